// File rules.go: the rules about a Flock that the registry, the admission
// plugin and the controller all apply, written once: the defaults of
// spec.replicas and spec.serviceName for a Flock that has not been defaulted
// (or whose generated name was not known when it was), and when a Flock
// carries the data-cleanup finalizer.

package v1alpha1

// DefaultReplicas is spec.replicas when it is not set.
const DefaultReplicas = int32(1)

// ReplicasOf returns spec.replicas, or DefaultReplicas when it is nil.
func ReplicasOf(spec *FlockSpec) int32 {
	if spec.Replicas == nil {
		return DefaultReplicas
	}
	return *spec.Replicas
}

// ServiceNameOr returns serviceName, the spec.serviceName of a Flock named
// name, or name when it is empty: the serviceName default.
func ServiceNameOr(serviceName, name string) string {
	if serviceName == "" {
		return name
	}
	return serviceName
}

// WantsDataCleanupFinalizer reports whether a Flock whose retention
// policies are whenDeleted and whenScaled carries FinalizerDataCleanup: when
// either is Delete, deleting the Flock must wait for its data directories
// to be removed (those of a scale down in progress too), so the finalizer
// is there from its creation on.
func WantsDataCleanupFinalizer(whenDeleted, whenScaled RetentionPolicyType) bool {
	return whenDeleted == DeleteRetentionPolicy || whenScaled == DeleteRetentionPolicy
}

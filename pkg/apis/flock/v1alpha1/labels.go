package v1alpha1

// Labels and annotations the controller puts on member pods.
const (
	// LabelFlockName is the name of the Flock a pod belongs to.
	LabelFlockName = "flock.dev/name"
	// LabelOrdinal is the member's ordinal.
	LabelOrdinal = "flock.dev/ordinal"
	// LabelPodName is the member's pod name, so a Service can select one member.
	LabelPodName = "flock.dev/pod-name"
	// LabelRevision is the template revision a member's pod was created from.
	LabelRevision = "controller-revision-hash"
	// FinalizerDataCleanup holds a Flock's deletion until the data directories
	// of its members are removed (retention whenDeleted: Delete).
	FinalizerDataCleanup = "flock.dev/data-cleanup"
)

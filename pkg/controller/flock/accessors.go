// File accessors.go: spec accessors with their defaults (replicasOf, serviceNameOf,
// partitionOf, ...), the names the controller derives (pod, cleanup pod,
// hostname, data path), member labels and owner references, and ordered
// views of members and pods. Pure; everything else builds on it.

package flock

import (
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// controllerKind is the kind of the owner of member pods and Services.
var controllerKind = v1alpha1.SchemeGroupVersion.WithKind("Flock")

// replicasOf returns spec.replicas, defaulting a nil value to 1.
func replicasOf(f *v1alpha1.Flock) int32 {
	return v1alpha1.ReplicasOf(&f.Spec)
}

// serviceNameOf returns spec.serviceName, defaulting to the Flock's name.
func serviceNameOf(f *v1alpha1.Flock) string {
	return v1alpha1.ServiceNameOr(f.Spec.ServiceName, f.Name)
}

// volumeNameOf returns spec.storage.volumeName, defaulting to "data".
func volumeNameOf(f *v1alpha1.Flock) string {
	if f.Spec.Storage.VolumeName == "" {
		return v1alpha1.DefaultVolumeName
	}
	return f.Spec.Storage.VolumeName
}

// partitionOf returns the partition of a RollingUpdate Flock within
// [0, replicas], and 0 for OnDelete.
func partitionOf(f *v1alpha1.Flock) int32 {
	us := f.Spec.UpdateStrategy
	if us.Type == v1alpha1.OnDeleteFlockStrategyType || us.RollingUpdate == nil || us.RollingUpdate.Partition == nil {
		return 0
	}
	return min(max(*us.RollingUpdate.Partition, 0), replicasOf(f))
}

// maxUnavailableOf returns rollingUpdate.maxUnavailable as a number of
// members: a percentage of replicas rounded down, and at least 1.
func maxUnavailableOf(f *v1alpha1.Flock) int {
	ru := f.Spec.UpdateStrategy.RollingUpdate
	if ru == nil {
		return 1
	}
	return scaledMaxUnavailable(ru.MaxUnavailable, replicasOf(f))
}

// scaledMaxUnavailable returns a maxUnavailable as a number of members: a
// percentage of replicas rounded down, and at least 1 (also when unset).
func scaledMaxUnavailable(v *intstr.IntOrString, replicas int32) int {
	if v == nil {
		return 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(replicas), false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// PodName returns the name of member ordinal's pod: <flock>-<ordinal>.
func PodName(flockName string, ordinal int32) string {
	return flockName + "-" + strconv.FormatInt(int64(ordinal), 10)
}

// ParseOrdinal returns the ordinal of a pod named <flockName>-<ordinal>, and
// false for any other name (including leading zeros and signs, so that a
// name maps to at most one ordinal and back).
func ParseOrdinal(flockName, podName string) (int32, bool) {
	suffix, ok := strings.CutPrefix(podName, flockName+"-")
	if !ok || suffix == "" || (len(suffix) > 1 && suffix[0] == '0') {
		return 0, false
	}
	for _, c := range suffix {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(suffix, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// MemberHostname returns the fully qualified DNS name of a member:
// <pod>.<service>.<namespace>.svc.<clusterDomain>.
func MemberHostname(podName, serviceName, namespace, clusterDomain string) string {
	return podName + "." + serviceName + "." + namespace + ".svc." + clusterDomain
}

// memberLabels are the labels the controller sets on member ordinal's pod,
// on top of the template's.
func memberLabels(f *v1alpha1.Flock, ordinal int32) map[string]string {
	name := PodName(f.Name, ordinal)
	return map[string]string{
		v1alpha1.LabelFlockName: f.Name,
		v1alpha1.LabelOrdinal:   strconv.FormatInt(int64(ordinal), 10),
		v1alpha1.LabelPodName:   name,
	}
}

// newControllerRef returns the controller ownerReference of a Flock's pods
// and Service.
func newControllerRef(f *v1alpha1.Flock) *metav1.OwnerReference {
	return metav1.NewControllerRef(f, controllerKind)
}

// IsFlockRef reports whether an ownerReference points to a Flock (of any
// version of the flock.dev group).
func IsFlockRef(ref *metav1.OwnerReference) bool {
	if ref.Kind != controllerKind.Kind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == controllerKind.Group
}

// podRevision returns the revision label of a pod.
func podRevision(pod *corev1.Pod) string {
	return pod.Labels[v1alpha1.LabelRevision]
}

// revisionOf returns the revision a ControllerRevision records: its
// controller-revision-hash label.
func revisionOf(cr *appsv1.ControllerRevision) string {
	return cr.Labels[v1alpha1.LabelRevision]
}

// sortedMembers returns members in ordinal order.
func sortedMembers(members map[int32]v1alpha1.FlockMember) []v1alpha1.FlockMember {
	out := make([]v1alpha1.FlockMember, 0, len(members))
	for _, m := range members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b v1alpha1.FlockMember) int { return int(a.Ordinal) - int(b.Ordinal) })
	return out
}

func membersByOrdinal(ms []v1alpha1.FlockMember) map[int32]v1alpha1.FlockMember {
	out := make(map[int32]v1alpha1.FlockMember, len(ms))
	for _, m := range ms {
		out[m.Ordinal] = m
	}
	return out
}

// sortedOrdinals returns the keys of pods in ascending order.
func sortedOrdinals(pods map[int32]*corev1.Pod) []int32 {
	ords := make([]int32, 0, len(pods))
	for ord := range pods {
		ords = append(ords, ord)
	}
	slices.Sort(ords)
	return ords
}

// reassignNotePrefix starts the note a reassigned member keeps in its
// status message.
const reassignNotePrefix = "reassigned from node "

// reassignNote returns the reassignment note in a member's status message,
// or "".
func reassignNote(message string) string {
	if i := strings.Index(message, reassignNotePrefix); i >= 0 {
		return message[i:]
	}
	return ""
}

// formatTime formats a time for status messages and events.
func formatTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// isControlledBy reports whether obj's controller is the Flock f (by UID).
func isControlledBy(obj metav1.Object, f *v1alpha1.Flock) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == f.UID
}

// File adoption.go: which pods that the Flock does not control may become
// its members (issue 14, bounded adoption). Pure.

package flock

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// adoptionCandidate reports whether pod, which the Flock does not control,
// may become one of its members: it is named <flock>-<n> with n a current
// (below replicas) or recorded ordinal, its data volume is exactly the one
// the member's pod gets, and the claim that volume names, if it exists, is
// the member's (controlled by the Flock; not an earlier Flock's of the same
// name, whose data a new Flock never takes: member data is keyed by the
// Flock's UID). Any other pod is ignored: never recorded, adopted or
// deleted.
func adoptionCandidate(s *snapshot, pod *corev1.Pod) bool {
	f := s.flock
	ord, ok := ParseOrdinal(f.Name, pod.Name)
	if !ok {
		return false
	}
	if _, foreign := s.foreignData[ord]; foreign {
		return false
	}
	m, recorded := s.members[ord]
	if !recorded {
		if ord >= replicasOf(f) {
			return false
		}
		m = v1alpha1.FlockMember{Ordinal: ord, Node: PinnedNode(pod)}
	}
	return hasMemberDataVolume(f, m, pod)
}

// adoptable reports whether the Flock may adopt pod, an orphan its
// selector matches: an adoption candidate whose member is recorded on the
// node the pod is pinned to (anywhere, for a member that follows its
// volume: its recorded node then follows the pod).
func adoptable(s *snapshot, pod *corev1.Pod) bool {
	ord, _ := ParseOrdinal(s.flock.Name, pod.Name)
	m, ok := s.members[ord]
	return ok && (PinnedNode(pod) == m.Node || followsVolume(s.flock, ord)) && adoptionCandidate(s, pod)
}

// hasMemberDataVolume reports whether pod's volume named
// storage.volumeName is exactly the data volume of member m's pod.
func hasMemberDataVolume(f *v1alpha1.Flock, m v1alpha1.FlockMember, pod *corev1.Pod) bool {
	want := memberDataVolume(f, m.Ordinal)
	got := volumeNamed(pod, want.Name)
	return got != nil && equality.Semantic.DeepEqual(want.VolumeSource, got.VolumeSource)
}

// volumeNamed returns pod's volume called name, or nil.
func volumeNamed(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

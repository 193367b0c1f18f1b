// File snapshot.go: the snapshot of one sync: everything the decisions
// need, read from the caches once at the start of Sync (snapshot_read.go),
// and never modified (a write makes a new snapshot with withFlock or
// withPods).

package flock

import (
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

// snapshot is what one sync knows. Decisions (planPlacement, planRecovery,
// blockedMembers, ...) are pure functions of it; tests build one by hand.
type snapshot struct {
	// flock is the Flock as last read or written in this sync.
	flock *v1alpha1.Flock
	// now is when the sync started.
	now time.Time
	// selector is spec.selector, parsed (never empty).
	selector labels.Selector
	// candidates are the pods the Flock controls and the orphans its
	// selector matches, from the cache (read-only).
	candidates []*corev1.Pod

	// members are the recorded members of flock, by ordinal.
	members map[int32]v1alpha1.FlockMember
	// pods are the pods the Flock owns after adoption, by ordinal (nil
	// before withPods).
	pods map[int32]*corev1.Pod

	// nodeList are the cluster's nodes; nodes the same, by name.
	nodeList []*corev1.Node
	nodes    map[string]*corev1.Node
	// others counts the members of the other Flocks per node, on first
	// use (placement and moves only).
	others *lazy[map[string]int]
	// retained says, on first use (placement and moves only), which node
	// holds the node-local volume of each of the Flock's ordinals that has
	// one and is not being removed, retained ones above replicas included.
	retained *lazy[map[int32]string]
	// awaited are the nodes of the recorded members' pods that this
	// controller created and its cache does not show yet, by ordinal
	// (podAwaited).
	awaited map[int32]string
	// lostSince says since when each lost node (NotReady, or gone while a
	// member is recorded on it) has been lost; Ready nodes are absent.
	lostSince map[string]time.Time

	// foreignData says, for the ordinal of each orphan among candidates
	// whose member claim exists and is not the Flock's (an earlier Flock's
	// of the same name, left by an orphaning delete), why it is not: such
	// an orphan runs on data that is not its member's, so it is no
	// adoption candidate.
	foreignData map[int32]string

	// nameTaken are ordinals below replicas without a pod of the Flock
	// whose pod name is taken by a pod the Flock does not control (set by
	// adopted).
	nameTaken map[int32]bool
	// volumes are the node-local PersistentVolumes of the Flock's ordinals
	// below replicas that exist and are theirs (retained ones included).
	volumes map[int32]*corev1.PersistentVolume
}

// withFlock returns a copy of s for f as written by this sync.
func (s *snapshot) withFlock(f *v1alpha1.Flock) *snapshot {
	n := *s
	n.flock = f
	n.members = membersByOrdinal(f.Status.Members)
	return &n
}

// withPods returns a copy of s with the pods the Flock owns after adoption.
func (s *snapshot) withPods(owned []*corev1.Pod) *snapshot {
	n := *s
	n.pods = make(map[int32]*corev1.Pod, len(owned))
	for _, pod := range owned {
		ord, _ := ParseOrdinal(s.flock.Name, pod.Name)
		n.pods[ord] = pod
	}
	return &n
}

// podNodes returns the nodes that pods of the Flock hold: those of the pods
// it controls in the cache (terminating ones included), then those of the
// pods it created that the cache does not show yet, in a stable order,
// each once.
func (s *snapshot) podNodes() []string {
	var out []string
	seen := map[string]bool{}
	add := func(node string) {
		if node != "" && !seen[node] {
			seen[node] = true
			out = append(out, node)
		}
	}
	for _, pod := range s.candidates {
		if isControlledBy(pod, s.flock) {
			add(PinnedNode(pod))
		}
	}
	for _, ord := range slices.Sorted(maps.Keys(s.awaited)) {
		add(s.awaited[ord])
	}
	return out
}

// deleting reports whether the Flock is being deleted.
func (s *snapshot) deleting() bool { return s.flock.DeletionTimestamp != nil }

// retainedDataWeight is what a node holding the retained data of an
// ordinal of the Flock without a member adds to the node's usage.
const retainedDataWeight = 1 << 20

// usage counts the members of all Flocks per node, the Flock's own from
// s.flock (which may be newer than the cache). A node that holds the
// retained data of an ordinal of the Flock with no member counts as if it
// were full (retainedDataWeight), so that it is chosen last: that ordinal
// goes back there when the Flock is scaled up again, and would have to
// wait while another member of the Flock held the node.
func (s *snapshot) usage() map[string]int {
	var other map[string]int
	if s.others != nil {
		other = s.others.get()
	}
	usage := maps.Clone(other)
	if usage == nil {
		usage = map[string]int{}
	}
	for _, m := range s.flock.Status.Members {
		usage[m.Node]++
	}
	if s.retained != nil {
		for ord, node := range s.retained.get() {
			if _, ok := s.members[ord]; !ok {
				usage[node] += retainedDataWeight
			}
		}
	}
	return usage
}

// lazy computes a value once, on first use, for any goroutine.
type lazy[T any] struct {
	once    sync.Once
	compute func() T
	value   T
}

func (l *lazy[T]) get() T {
	l.once.Do(func() { l.value = l.compute() })
	return l.value
}

// readyNodes returns the nodes whose Ready condition is True.
func (s *snapshot) readyNodes() []*corev1.Node {
	var ready []*corev1.Node
	for _, n := range s.nodeList {
		if placement.IsReady(n) {
			ready = append(ready, n)
		}
	}
	return ready
}

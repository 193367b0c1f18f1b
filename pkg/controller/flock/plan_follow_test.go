package flock

// Table tests of planFollow and of the pods of members that follow their
// volume, on hand-built snapshots.

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// withClaimTemplate returns a copy of f whose members get claims from a
// StorageClass (and so follow their volume).
func withClaimTemplate(f *v1alpha1.Flock) *v1alpha1.Flock {
	f = f.DeepCopy()
	f.Spec.Storage.ClaimTemplate = &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	return f
}

func TestPlanFollow(t *testing.T) {
	claims := withClaimTemplate(newFlock("pg", 3))
	explicit := claims.DeepCopy()
	explicit.Spec.Placement.Nodes = []string{"n-a"}
	three := map[int32]string{0: "n-a", 1: "n-b", 2: "n-c"}
	// pods: ordinal -> the node its pod is scheduled to ("": not yet).
	type move struct {
		from, to  string
		scheduled bool
	}
	tests := []struct {
		name    string
		flock   *v1alpha1.Flock
		members map[int32]string
		pods    map[int32]string
		want    map[int32]move
	}{
		{name: "node-local members never follow", flock: newFlock("pg", 3), members: three,
			pods: map[int32]string{0: "n-d"}, want: map[int32]move{}},
		{name: "pods where recorded: nothing", flock: claims, members: three,
			pods: map[int32]string{0: "n-a", 1: "n-b", 2: ""}, want: map[int32]move{}},
		{name: "no pods: nothing", flock: claims, members: three, want: map[int32]move{}},
		{name: "a pod on a free node: its member follows", flock: claims, members: three,
			pods: map[int32]string{0: "n-d", 1: "n-b"}, want: map[int32]move{0: {"n-a", "n-d", true}}},
		{name: "two members swap nodes", flock: claims, members: three,
			pods: map[int32]string{0: "n-b", 1: "n-a"}, want: map[int32]move{0: {"n-a", "n-b", true}, 1: {"n-b", "n-a", true}}},
		{name: "a pod on an unscheduled member's node: that member takes the freed node", flock: claims, members: three,
			pods: map[int32]string{0: "n-c", 2: ""}, want: map[int32]move{0: {"n-a", "n-c", true}, 2: {"n-c", "n-a", false}}},
		{name: "a chain of moves", flock: claims, members: three,
			pods: map[int32]string{0: "n-b", 1: "n-c"}, want: map[int32]move{0: {"n-a", "n-b", true}, 1: {"n-b", "n-c", true}, 2: {"n-c", "n-a", false}}},
		{name: "a member pinned by spec.placement.nodes keeps its node", flock: explicit, members: three,
			pods: map[int32]string{0: "n-a", 1: "n-d"}, want: map[int32]move{1: {"n-b", "n-d", true}}},
		{name: "a follower's pod on a pinned member's node does not take it", flock: explicit, members: three,
			pods: map[int32]string{1: "n-a"}, want: map[int32]move{}},
		{name: "two pods on one node: only the lower ordinal follows", flock: claims, members: three,
			pods: map[int32]string{0: "n-d", 1: "n-d"}, want: map[int32]move{0: {"n-a", "n-d", true}}},
		{name: "a scaled-down member follows too", flock: withClaimTemplate(newFlock("pg", 1)), members: three,
			pods: map[int32]string{2: "n-d"}, want: map[int32]move{2: {"n-c", "n-d", true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := testSnapshot(t, tc.flock, tc.members, testNodes("n-a", "n-b", "n-c", "n-d"), func(s *snapshot) {
				for ord, node := range tc.pods {
					s.pods[ord] = testPod(tc.flock, ord, node, true, nil)
				}
			})
			got := map[int32]move{}
			for ord, mv := range planFollow(s) {
				got[ord] = move{mv.from, mv.to, mv.scheduled}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("moves = %v, want %v", got, tc.want)
			}
			// The recorded nodes after the moves stay distinct.
			after := map[string]int32{}
			for ord, node := range tc.members {
				if mv, ok := got[ord]; ok {
					node = mv.to
				}
				if other, dup := after[node]; dup {
					t.Errorf("members %d and %d both recorded on %s", other, ord, node)
				}
				after[node] = ord
			}
		})
	}
}

// The pod of a member that follows its volume is not pinned: it must stay
// in the Flock's pool and off its other pods' nodes, and prefers its
// recorded node. A pod on another node than recorded is still the member.
func TestNewMemberPodFollowsVolume(t *testing.T) {
	f := withClaimTemplate(newFlock("pg", 2))
	f.Spec.Placement.NodeSelector = map[string]string{"pool": "db", "disk": "ssd"}
	m := v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}
	pod := NewMemberPod(f, m, "rev")
	if node := PinnedNode(pod); node != "" {
		t.Errorf("pod pinned to %s", node)
	}
	na := pod.Spec.Affinity.NodeAffinity
	wantTerms := []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}},
		{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"db"}},
	}}}
	if !reflect.DeepEqual(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, wantTerms) {
		t.Errorf("required terms = %+v, want %+v", na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, wantTerms)
	}
	pref := na.PreferredDuringSchedulingIgnoredDuringExecution
	if len(pref) != 1 || pref[0].Weight != 100 || len(pref[0].Preference.MatchFields) != 1 || pref[0].Preference.MatchFields[0].Values[0] != "n-b" {
		t.Errorf("preferred terms = %+v, want n-b", pref)
	}
	aa := pod.Spec.Affinity.PodAntiAffinity
	if aa == nil || len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
		aa.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != corev1.LabelHostname ||
		aa.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels[v1alpha1.LabelFlockName] != "pg" {
		t.Errorf("anti-affinity = %+v", aa)
	}
	pod.Spec.NodeName = "n-z"
	if why := identityMismatch(f, m, pod); why != "" {
		t.Errorf("a follower's pod on another node mismatches: %s", why)
	}

	// spec.placement.nodes still pins the members it names.
	f.Spec.Placement.Nodes = []string{"n-a", "n-b"}
	pinned := NewMemberPod(f, m, "rev")
	if node := PinnedNode(pinned); node != "n-b" {
		t.Errorf("explicitly placed member pinned to %q, want n-b", node)
	}
	pinned.Spec.NodeName = "n-z"
	if why := identityMismatch(f, m, pinned); why == "" {
		t.Error("an explicitly placed member's pod on another node matches")
	}
}

// A follower's pod on another node than recorded is never deleted as
// reassigned (the record follows the pod instead).
func TestPlanReassignedDeletionsSkipsFollowers(t *testing.T) {
	f := withClaimTemplate(newFlock("pg", 2))
	s := testSnapshot(t, f, map[int32]string{0: "n-a", 1: "n-b"}, testNodes("n-a", "n-b", "n-c"), func(s *snapshot) {
		s.pods[1] = withDataVolume(f, testPod(f, 1, "n-c", true, nil))
	})
	if d := planReassignedDeletions(s); len(d) != 0 {
		t.Errorf("deletions = %+v, want none", d)
	}
	node := newFlock("pg", 2)
	s = testSnapshot(t, node, map[int32]string{0: "n-a", 1: "n-b"}, testNodes("n-a", "n-b", "n-c"), func(s *snapshot) {
		s.pods[1] = withDataVolume(node, testPod(node, 1, "n-c", true, nil))
	})
	if d := planReassignedDeletions(s); len(d) != 1 || d[0].ord != 1 {
		t.Errorf("node-local: deletions = %+v, want member 1's pod", d)
	}
}

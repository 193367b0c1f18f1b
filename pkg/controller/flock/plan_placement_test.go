package flock

// Table tests of planPlacement and adoptable, on hand-built snapshots.

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func TestPlanPlacement(t *testing.T) {
	pg := newFlock("pg", 3)
	pinned := pg.DeepCopy()
	pinned.Spec.Placement.Nodes = []string{"n-c", "n-a", "n-b"}
	one := newFlock("pg", 1)
	app := map[string]string{"app": "pg"}
	terminating := testPod(one, 0, "n-c", true, app)
	terminating.DeletionTimestamp = &metav1.Time{Time: decisionNow}

	tests := []struct {
		name     string
		flock    *v1alpha1.Flock
		members  map[int32]string
		nodes    []*corev1.Node
		mutate   func(*snapshot)
		want     map[int32]string
		unplaced []int32
	}{
		{name: "new Flock: one distinct node each", flock: pg, nodes: testNodes("n-a", "n-b", "n-c"),
			want: map[int32]string{0: "n-a", 1: "n-b", 2: "n-c"}},
		{name: "recorded members stay; only the missing ordinal is placed", flock: pg, members: map[int32]string{0: "n-c", 2: "n-a"},
			nodes: testNodes("n-a", "n-b", "n-c"), want: map[int32]string{1: "n-b"}},
		{name: "explicit nodes win", flock: pinned, nodes: testNodes("n-a", "n-b", "n-c"),
			want: map[int32]string{0: "n-c", 1: "n-a", 2: "n-b"}},
		{name: "too few nodes: the rest is unplaced", flock: pg, nodes: testNodes("n-a", "n-b"),
			want: map[int32]string{0: "n-a", 1: "n-b"}, unplaced: []int32{2}},
		{name: "a retained volume brings its member back to its node", flock: one, nodes: testNodes("n-a", "n-b", "n-c"),
			mutate: func(s *snapshot) {
				s.volumes[0] = NewMemberVolume(one, v1alpha1.FlockMember{Ordinal: 0, Node: "n-c"}, "n-c", "/d", "")
			},
			want: map[int32]string{0: "n-c"}},
		{name: "a retained volume on a cordoned node holds its member back", flock: one,
			nodes: []*corev1.Node{newNode("n-a"), func() *corev1.Node { n := newNode("n-c"); n.Spec.Unschedulable = true; return n }()},
			mutate: func(s *snapshot) {
				s.volumes[0] = NewMemberVolume(one, v1alpha1.FlockMember{Ordinal: 0, Node: "n-c"}, "n-c", "/d", "")
			},
			want: map[int32]string{}},
		{name: "a retained volume on a gone node does not hold its member", flock: one, nodes: testNodes("n-a"),
			mutate: func(s *snapshot) {
				s.volumes[0] = NewMemberVolume(one, v1alpha1.FlockMember{Ordinal: 0, Node: "n-z"}, "n-z", "/d", "")
			},
			want: map[int32]string{0: "n-a"}},
		{name: "least used across Flocks first", flock: one, nodes: testNodes("n-a", "n-b", "n-c"),
			mutate: func(s *snapshot) {
				s.others = &lazy[map[string]int]{compute: func() map[string]int { return map[string]int{"n-a": 2, "n-b": 1} }}
			},
			want: map[int32]string{0: "n-c"}},
		{name: "a pod of the Flock keeps its node", flock: one, nodes: testNodes("n-a", "n-b", "n-c"),
			mutate: func(s *snapshot) { s.candidates = []*corev1.Pod{testPod(one, 0, "n-c", true, app)} },
			want:   map[int32]string{0: "n-c"}},
		{name: "a matching orphan with the member's data volume keeps its node", flock: one, nodes: testNodes("n-a", "n-c"),
			mutate: func(s *snapshot) {
				s.candidates = []*corev1.Pod{withDataVolume(one, testPod(one, 0, "n-c", false, app))}
			},
			want: map[int32]string{0: "n-c"}},
		{name: "an orphan with another data volume is ignored", flock: one, nodes: testNodes("n-a", "n-c"),
			mutate: func(s *snapshot) { s.candidates = []*corev1.Pod{testPod(one, 0, "n-c", false, app)} },
			want:   map[int32]string{0: "n-a"}},
		{name: "an orphan beyond replicas is ignored", flock: one, members: map[int32]string{0: "n-a"}, nodes: testNodes("n-a", "n-c"),
			mutate: func(s *snapshot) {
				s.candidates = []*corev1.Pod{withDataVolume(one, testPod(one, 3, "n-c", false, app))}
			},
			want: map[int32]string{}},
		{name: "an orphan the selector does not match is ignored", flock: one, nodes: testNodes("n-a", "n-c"),
			mutate: func(s *snapshot) {
				s.candidates = []*corev1.Pod{testPod(one, 0, "n-c", false, map[string]string{"app": "other"})}
			},
			want: map[int32]string{0: "n-a"}},
		{name: "a terminating pod is ignored", flock: one, nodes: testNodes("n-a", "n-c"),
			mutate: func(s *snapshot) { s.candidates = []*corev1.Pod{terminating} },
			want:   map[int32]string{0: "n-a"}},
		{name: "a pod above replicas gets a member, to be scaled down", flock: one, members: map[int32]string{0: "n-a"},
			nodes:  testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) { s.candidates = []*corev1.Pod{testPod(one, 1, "n-b", true, app)} },
			want:   map[int32]string{1: "n-b"}},
		{name: "no new member on a node a pod of the Flock still holds", flock: newFlock("pg", 2), members: map[int32]string{0: "n-a"},
			nodes: testNodes("n-a", "n-b", "n-c"),
			mutate: func(s *snapshot) {
				s.candidates = []*corev1.Pod{testMemberPod(s.flock, 3, "n-b", true)}
			},
			want: map[int32]string{1: "n-c"}},
		{name: "a retained volume on a node a pod of the Flock still holds waits", flock: one,
			nodes: testNodes("n-a", "n-c"),
			mutate: func(s *snapshot) {
				s.volumes[0] = NewMemberVolume(one, v1alpha1.FlockMember{Ordinal: 0, Node: "n-c"}, "n-c", "/d", "")
				s.candidates = []*corev1.Pod{testMemberPod(one, 2, "n-c", true)}
			},
			want: map[int32]string{}},
		{name: "a node with retained data of an ordinal without a member comes last", flock: newFlock("pg", 2), members: map[int32]string{0: "n-a"},
			nodes: testNodes("n-a", "n-b", "n-c"),
			mutate: func(s *snapshot) {
				s.retained = &lazy[map[int32]string]{compute: func() map[int32]string { return map[int32]string{0: "n-a", 4: "n-b"} }}
			},
			want: map[int32]string{1: "n-c"}},
		{name: "nothing to do", flock: one, members: map[int32]string{0: "n-b"}, nodes: testNodes("n-a", "n-b"),
			want: map[int32]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mutate []func(*snapshot)
			if tc.mutate != nil {
				mutate = append(mutate, tc.mutate)
			}
			plan := planPlacement(testSnapshot(t, tc.flock, tc.members, tc.nodes, mutate...))
			if !reflect.DeepEqual(plan.add, tc.want) {
				t.Errorf("add = %v, want %v", plan.add, tc.want)
			}
			if !reflect.DeepEqual(plan.unplaced, tc.unplaced) {
				t.Errorf("unplaced = %v, want %v", plan.unplaced, tc.unplaced)
			}
		})
	}
}

func TestAdoptable(t *testing.T) {
	pg := newFlock("pg", 2)
	app := map[string]string{"app": "pg"}
	otherVolume := withDataVolume(pg, testPod(pg, 1, "n-b", false, app))
	otherVolume.Spec.Volumes[len(otherVolume.Spec.Volumes)-1].PersistentVolumeClaim.ClaimName = "elsewhere"
	for _, tc := range []struct {
		name    string
		members map[int32]string
		pod     *corev1.Pod
		want    bool
	}{
		{"recorded member, its node and data volume", map[int32]string{1: "n-b"}, withDataVolume(pg, testPod(pg, 1, "n-b", false, app)), true},
		{"another node than the member's", map[int32]string{1: "n-a"}, withDataVolume(pg, testPod(pg, 1, "n-b", false, app)), false},
		{"no recorded member", nil, withDataVolume(pg, testPod(pg, 1, "n-b", false, app)), false},
		{"another data volume", map[int32]string{1: "n-b"}, otherVolume, false},
		{"no data volume", map[int32]string{1: "n-b"}, testPod(pg, 1, "n-b", false, app), false},
		{"recorded member beyond replicas (scale down in progress)", map[int32]string{5: "n-b"}, withDataVolume(pg, testPod(pg, 5, "n-b", false, app)), true},
		{"far beyond replicas, not recorded", nil, withDataVolume(pg, testPod(pg, 10000, "n-b", false, app)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := adoptable(testSnapshot(t, pg, tc.members, testNodes("n-a", "n-b")), tc.pod); got != tc.want {
				t.Errorf("adoptable = %v, want %v", got, tc.want)
			}
		})
	}
}

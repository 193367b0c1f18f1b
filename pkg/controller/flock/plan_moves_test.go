package flock

// Table tests of planMoves, on hand-built snapshots.

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func TestPlanMoves(t *testing.T) {
	web := newFlock("web", 3)
	three := map[int32]string{0: "n-a", 1: "n-b", 2: "n-c"}
	// available gives every member below replicas a pod Ready for an hour
	// on its node.
	available := func(s *snapshot) {
		for ord, m := range s.members {
			pod := testPod(s.flock, ord, m.Node, true, nil)
			pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
				Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(decisionNow.Add(-time.Hour)),
			}}}
			s.pods[ord] = pod
		}
	}
	// move asks member ord to move to node.
	move := func(ord int32, node string, force bool) func(*snapshot) {
		return func(s *snapshot) {
			m := s.members[ord]
			m.Move = &v1alpha1.FlockMemberMove{Node: node, Force: force, RequestedAt: metav1.NewTime(decisionNow.Add(-time.Second))}
			s.members[ord] = m
		}
	}
	down := func(ord int32) func(*snapshot) { return func(s *snapshot) { delete(s.pods, ord) } }
	cordonedD := newNode("n-d")
	cordonedD.Spec.Unschedulable = true
	notReadyD := newNode("n-d")
	setNodeReady(false)(notReadyD)
	pinned := web.DeepCopy()
	pinned.Spec.Placement.Nodes = []string{"n-a", "n-b", "n-c"}
	selected := web.DeepCopy()
	selected.Spec.Placement.NodeSelector = map[string]string{"disk": "local"}
	two := newFlock("web", 1)

	tests := []struct {
		name     string
		flock    *v1alpha1.Flock
		nodes    []*corev1.Node
		mutate   []func(*snapshot)
		moves    map[int32][2]string
		canceled map[int32]string
		waiting  map[int32]string
	}{
		{name: "no move asked: nothing", flock: web, nodes: testNodes("n-a", "n-b", "n-c", "n-d"), mutate: []func(*snapshot){available}},
		{name: "all available: the member moves", flock: web, nodes: testNodes("n-a", "n-b", "n-c", "n-d"),
			mutate: []func(*snapshot){available, move(1, "n-d", false)}, moves: map[int32][2]string{1: {"n-b", "n-d"}}},
		{name: "the moving member itself may be down", flock: web, nodes: testNodes("n-a", "n-b", "n-c", "n-d"),
			mutate: []func(*snapshot){available, down(1), move(1, "n-d", false)}, moves: map[int32][2]string{1: {"n-b", "n-d"}}},
		{name: "another member unavailable: it waits", flock: web, nodes: testNodes("n-a", "n-b", "n-c", "n-d"),
			mutate:  []func(*snapshot){available, down(2), move(1, "n-d", false)},
			waiting: map[int32]string{1: "member 2 is unavailable (use force to move anyway)"}},
		{name: "forced: it moves anyway", flock: web, nodes: testNodes("n-a", "n-b", "n-c", "n-d"),
			mutate: []func(*snapshot){available, down(2), move(1, "n-d", true)}, moves: map[int32][2]string{1: {"n-b", "n-d"}}},
		{name: "two moves: one at a time", flock: web, nodes: testNodes("n-a", "n-b", "n-c", "n-d", "n-e"),
			mutate: []func(*snapshot){available, move(0, "n-d", false), move(2, "n-e", false)}, moves: map[int32][2]string{0: {"n-a", "n-d"}},
			waiting: map[int32]string{2: "member 0 is unavailable (use force to move anyway)"}},
		{name: "target not Ready: it waits", flock: web, nodes: []*corev1.Node{newNode("n-a"), newNode("n-b"), newNode("n-c"), notReadyD},
			mutate: []func(*snapshot){available, move(1, "n-d", false)}, waiting: map[int32]string{1: "node n-d is not Ready"}},
		{name: "target cordoned since: canceled", flock: web, nodes: []*corev1.Node{newNode("n-a"), newNode("n-b"), newNode("n-c"), cordonedD},
			mutate: []func(*snapshot){available, move(1, "n-d", false)}, canceled: map[int32]string{1: "node n-d is not eligible any more: cordoned"}},
		{name: "target not matching the selector: canceled", flock: selected, nodes: testNodes("n-a", "n-b", "n-c", "n-d"),
			mutate:   []func(*snapshot){available, move(1, "n-d", false)},
			canceled: map[int32]string{1: "node n-d is not eligible any more: does not match nodeSelector disk=local"}},
		{name: "target gone: canceled", flock: web, nodes: testNodes("n-a", "n-b", "n-c"),
			mutate: []func(*snapshot){available, move(1, "n-d", false)}, canceled: map[int32]string{1: "node n-d is gone"}},
		{name: "target taken since: canceled", flock: web, nodes: testNodes("n-a", "n-b", "n-c"),
			mutate: []func(*snapshot){available, move(1, "n-c", false)}, canceled: map[int32]string{1: "node n-c holds member 2"}},
		{name: "already there: cleared", flock: web, nodes: testNodes("n-a", "n-b", "n-c"),
			mutate: []func(*snapshot){available, move(1, "n-b", false)}, canceled: map[int32]string{1: "the member is already on node n-b"}},
		{name: "pinned since: canceled", flock: pinned, nodes: testNodes("n-a", "n-b", "n-c", "n-d"),
			mutate:   []func(*snapshot){available, move(1, "n-d", false)},
			canceled: map[int32]string{1: "spec.placement.nodes[1] pins the member to node n-b"}},
		{name: "scaled away: canceled", flock: two, nodes: testNodes("n-a", "n-b", "n-c", "n-d"),
			mutate:   []func(*snapshot){available, move(1, "n-d", false)},
			canceled: map[int32]string{1: "member 1 is removed by a scale down (spec.replicas is 1)"}},
		{name: "being deleted: nothing moves", flock: func() *v1alpha1.Flock {
			f := web.DeepCopy()
			f.DeletionTimestamp = &metav1.Time{Time: decisionNow}
			return f
		}(), nodes: testNodes("n-a", "n-b", "n-c", "n-d"), mutate: []func(*snapshot){available, move(1, "n-d", false)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := planMoves(testSnapshot(t, tc.flock, three, tc.nodes, tc.mutate...))
			got := map[int32][2]string{}
			for ord, mv := range plan.moves {
				got[ord] = [2]string{mv.from, mv.to}
				if want := "moved from node " + mv.from + " to node " + mv.to + " at 2026-01-01T12:00:00Z (planned move)"; !strings.HasPrefix(mv.note, want) {
					t.Errorf("note %q, want prefix %q", mv.note, want)
				}
			}
			for _, c := range []struct {
				what      string
				got, want any
			}{{"moves", got, orEmpty(tc.moves)}, {"canceled", plan.canceled, orEmpty(tc.canceled)}, {"waiting", plan.waiting, orEmpty(tc.waiting)}} {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
		})
	}
}

// orEmpty returns m, or an empty map when m is nil.
func orEmpty[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

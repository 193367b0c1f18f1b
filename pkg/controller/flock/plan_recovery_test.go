package flock

// Table tests of planRecovery, on hand-built snapshots.

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func TestPlanRecovery(t *testing.T) {
	waiting := newFlock("pg", 2)
	reassign := newFlock("pg", 2)
	reassign.Spec.MemberRecovery = v1alpha1.MemberRecovery{Policy: v1alpha1.ReassignMemberRecovery, AfterSeconds: ptr.To(int32(60))}
	explicit := reassign.DeepCopy()
	explicit.Spec.Placement.Nodes = []string{"n-a", "n-b"}
	// notReady may be partitioned; outOfService is known to be down.
	notReady := newNode("n-b")
	setNodeReady(false)(notReady)
	outOfService := notReady.DeepCopy()
	outOfService.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}
	otherTaint := notReady.DeepCopy()
	otherTaint.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}}
	unconfirmed := "memberRecovery Reassign does not move it: node n-b is NotReady but not known to be down, so its pod may still run there; " +
		"once the node is down, delete its Node object or taint it node.kubernetes.io/out-of-service:NoExecute and the member moves"
	lostB := func(ago time.Duration) func(*snapshot) {
		return func(s *snapshot) { s.lostSince["n-b"] = decisionNow.Add(-ago) }
	}
	members := map[int32]string{0: "n-a", 1: "n-b"}

	tests := []struct {
		name    string
		flock   *v1alpha1.Flock
		members map[int32]string
		nodes   []*corev1.Node
		lost    func(*snapshot)
		// moves are ordinal -> from/to; note and requeue of the member on n-b
		// when it does not move.
		moves   map[int32][2]string
		note    string
		requeue time.Duration
		// unconfirmed are the members that wait for their node to be
		// known down.
		unconfirmed []int32
	}{
		{name: "no lost node: nothing", flock: reassign, members: members, nodes: testNodes("n-a", "n-b", "n-c"),
			lost: func(*snapshot) {}, moves: map[int32][2]string{}},
		{name: "Wait keeps the member", flock: waiting, members: members, nodes: []*corev1.Node{newNode("n-a"), notReady, newNode("n-c")},
			lost: lostB(time.Hour), moves: map[int32][2]string{}, note: "memberRecovery Wait keeps it on that node until the node is back"},
		{name: "Reassign waits for afterSeconds", flock: reassign, members: members, nodes: []*corev1.Node{newNode("n-a"), notReady, newNode("n-c")},
			lost: lostB(20 * time.Second), moves: map[int32][2]string{}, requeue: 40 * time.Second,
			note: "memberRecovery Reassign moves it to another node at 2026-01-01T12:00:40Z"},
		{name: "Reassign does not move off a merely NotReady node", flock: reassign, members: members, nodes: []*corev1.Node{newNode("n-a"), notReady, newNode("n-c")},
			lost: lostB(2 * time.Minute), moves: map[int32][2]string{}, note: unconfirmed, unconfirmed: []int32{1}},
		{name: "nor off one with another taint", flock: reassign, members: members, nodes: []*corev1.Node{newNode("n-a"), otherTaint, newNode("n-c")},
			lost: lostB(2 * time.Minute), moves: map[int32][2]string{}, note: unconfirmed, unconfirmed: []int32{1}},
		{name: "Reassign moves off an out-of-service node to a free Ready node", flock: reassign, members: members, nodes: []*corev1.Node{newNode("n-a"), outOfService, newNode("n-c")},
			lost: lostB(2 * time.Minute), moves: map[int32][2]string{1: {"n-b", "n-c"}}},
		{name: "Reassign moves off a gone node", flock: reassign, members: members, nodes: testNodes("n-a", "n-c"),
			lost: lostB(2 * time.Minute), moves: map[int32][2]string{1: {"n-b", "n-c"}}},
		{name: "no free node: the member waits", flock: reassign, members: members, nodes: []*corev1.Node{newNode("n-a"), outOfService},
			lost: lostB(2 * time.Minute), moves: map[int32][2]string{},
			note: "memberRecovery Reassign cannot move it yet: no other eligible Ready node is free of this Flock's members"},
		{name: "an explicit node is never left", flock: explicit, members: members, nodes: []*corev1.Node{newNode("n-a"), notReady, newNode("n-c")},
			lost: lostB(2 * time.Minute), moves: map[int32][2]string{}, note: "it is not reassigned: spec.placement.nodes[1] names that node"},
		{name: "a member above replicas is left to the scale down", flock: newFlock("pg", 1), members: members,
			nodes: []*corev1.Node{newNode("n-a"), notReady, newNode("n-c")}, lost: lostB(2 * time.Minute), moves: map[int32][2]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := planRecovery(testSnapshot(t, tc.flock, tc.members, tc.nodes, tc.lost))
			got := map[int32][2]string{}
			for ord, mv := range plan.moves {
				got[ord] = [2]string{mv.from, mv.to}
				if !strings.HasPrefix(mv.note, reassignNotePrefix+mv.from+" (") || !strings.Contains(mv.note, " to node "+mv.to+" at ") {
					t.Errorf("move note %q", mv.note)
				}
			}
			if !reflect.DeepEqual(got, tc.moves) {
				t.Errorf("moves = %v, want %v", got, tc.moves)
			}
			if !reflect.DeepEqual(plan.unconfirmed, tc.unconfirmed) {
				t.Errorf("unconfirmed = %v, want %v", plan.unconfirmed, tc.unconfirmed)
			}
			if plan.requeue != tc.requeue {
				t.Errorf("requeue = %v, want %v", plan.requeue, tc.requeue)
			}
			loss, ok := plan.losses[1]
			if tc.note == "" {
				if ok {
					t.Errorf("member 1: unexpected loss %+v", loss)
				}
				return
			}
			if !ok || loss.Note != tc.note {
				t.Errorf("loss of member 1 = %+v, want note %q", loss, tc.note)
			}
		})
	}
}

func TestPlanRecoveryGoneNodeNote(t *testing.T) {
	f := newFlock("pg", 2)
	f.Spec.MemberRecovery = v1alpha1.MemberRecovery{Policy: v1alpha1.ReassignMemberRecovery, AfterSeconds: ptr.To(int32(60))}
	s := testSnapshot(t, f, map[int32]string{0: "n-a", 1: "n-b"}, testNodes("n-a", "n-c"),
		func(s *snapshot) { s.lostSince["n-b"] = decisionNow.Add(-2 * time.Minute) })
	mv := planRecovery(s).moves[1]
	want := "reassigned from node n-b (gone since 2026-01-01T11:58:00Z) to node n-c at 2026-01-01T12:00:00Z; its data directory there started empty"
	if mv.note != want {
		t.Errorf("note = %q, want %q", mv.note, want)
	}
}

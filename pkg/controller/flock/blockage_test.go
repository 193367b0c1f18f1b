package flock

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func TestMemberBlockage(t *testing.T) {
	m := v1alpha1.FlockMember{Ordinal: 2, Node: "n-c"}
	node := newNode("n-c")
	cordoned := node.DeepCopy()
	cordoned.Spec.Unschedulable = true
	notReady := node.DeepCopy()
	notReady.Status.Conditions[0].Status = corev1.ConditionUnknown
	pending := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes: Insufficient cpu",
	}}}}
	running := readyPod("pg-2", 2, "", time.Now())
	boundNotReady := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n-c"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}

	for name, tc := range map[string]struct {
		pod    *corev1.Pod
		node   *corev1.Node
		reason string
		msg    string
	}{
		"gone":                  {nil, nil, ReasonNodeGone, "member 2 waits for node n-c, which is gone"},
		"not ready":             {nil, notReady, ReasonNodeNotReady, "member 2 waits for node n-c, which is NotReady"},
		"cordoned":              {pending, cordoned, ReasonNodeCordoned, "member 2 waits for node n-c, which is cordoned"},
		"unschedulable":         {pending, node, ReasonUnschedulable, "member 2 cannot be scheduled on node n-c: 0/3 nodes: Insufficient cpu"},
		"ready pod on cordoned": {running, cordoned, "", ""},
		"bound pod on cordoned": {boundNotReady, cordoned, "", ""},
		"no pod yet":            {nil, node, "", ""},
	} {
		b := memberBlockage(m, tc.pod, tc.node, nil)
		switch {
		case tc.reason == "" && b != nil:
			t.Errorf("%s: blocked %+v", name, b)
		case tc.reason != "" && (b == nil || b.Reason != tc.reason || b.Message != tc.msg):
			t.Errorf("%s: blockage = %+v, want %s %q", name, b, tc.reason, tc.msg)
		}
	}
}

func TestMemberBlockageTaint(t *testing.T) {
	m := v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}
	node := newNode("n-b")
	node.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	b := memberBlockage(m, nil, node, nil)
	if b == nil || b.Reason != ReasonNodeTainted || !strings.HasPrefix(b.Message, "member 1 waits for node n-b, which ") {
		t.Fatalf("blockage = %+v", b)
	}
	tolerated := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	if b := memberBlockage(m, nil, node, tolerated); b != nil {
		t.Fatalf("tolerated taint blocks: %+v", b)
	}
}

func TestBlockedMembers(t *testing.T) {
	pg := newFlock("pg", 2)
	deleting := pg.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: decisionNow}
	cordoned := newNode("n-b")
	cordoned.Spec.Unschedulable = true
	notReady := newNode("n-b")
	setNodeReady(false)(notReady)
	ready := testPod(pg, 1, "n-b", true, nil)
	ready.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	both := map[int32]string{0: "n-a", 1: "n-b"}
	claims := withClaimTemplate(pg)
	unschedulable := testPod(claims, 1, "", true, nil)
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 node(s) had volume node affinity conflict."}}

	tests := []struct {
		name    string
		flock   *v1alpha1.Flock
		members map[int32]string
		nodes   []*corev1.Node
		mutate  func(*snapshot)
		losses  map[int32]nodeLoss
		// want is member 1's blockage; nil: not blocked.
		want *blockage
	}{
		{name: "healthy", flock: pg, members: both, nodes: testNodes("n-a", "n-b")},
		{name: "unplaced", flock: pg, members: map[int32]string{0: "n-a"}, nodes: testNodes("n-a"),
			want: &blockage{ReasonUnplaceable, "member 1 cannot be placed: no eligible node is free of this Flock's members"}},
		{name: "unplaced while deleting is not reported", flock: deleting, members: map[int32]string{0: "n-a"}, nodes: testNodes("n-a")},
		{name: "retained data on the node of another member", flock: pg, members: map[int32]string{0: "n-a"}, nodes: testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) {
				s.volumes[1] = NewMemberVolume(pg, v1alpha1.FlockMember{Ordinal: 1, Node: "n-a"}, "n-a", "/d", "")
			},
			want: &blockage{ReasonDataNodeUnavailable, "member 1 waits for node n-a, which holds its retained data (PersistentVolume " +
				PersistentVolumeName(pg.UID, 1) + "): member 0 is there; move member 0 to another node (kubectl flock move pg 0), " +
				"or delete the PersistentVolume to let member 1 start on another node without its data"}},
		{name: "retained data on a cordoned node", flock: pg, members: map[int32]string{0: "n-a"}, nodes: []*corev1.Node{newNode("n-a"), cordoned},
			mutate: func(s *snapshot) {
				s.volumes[1] = NewMemberVolume(pg, v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}, "n-b", "/d", "")
			},
			want: &blockage{ReasonDataNodeUnavailable, "member 1 waits for node n-b, which holds its retained data (PersistentVolume " +
				PersistentVolumeName(pg.UID, 1) + "): the node is not eligible (cordoned)"}},
		{name: "pod name taken", flock: pg, members: both, nodes: testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) { s.nameTaken[1] = true },
			want: &blockage{ReasonPodNameTaken,
				"member 1 cannot start: pod pg-1 exists and is not a pod of this Flock on node n-b; delete it to let the member start"}},
		{name: "node gone, with what recovery does", flock: pg, members: both, nodes: testNodes("n-a"),
			losses: map[int32]nodeLoss{1: {Since: decisionNow.Add(-time.Minute), Note: "memberRecovery Wait keeps it on that node until the node is back"}},
			want: &blockage{ReasonNodeGone,
				"member 1 waits for node n-b, which is gone since 2026-01-01T11:59:00Z; memberRecovery Wait keeps it on that node until the node is back"}},
		{name: "node NotReady, even with a Ready pod", flock: pg, members: both, nodes: []*corev1.Node{newNode("n-a"), notReady},
			mutate: func(s *snapshot) { s.pods[1] = ready },
			want:   &blockage{ReasonNodeNotReady, "member 1 waits for node n-b, which is NotReady"}},
		{name: "cordoned node without a pod", flock: pg, members: both, nodes: []*corev1.Node{newNode("n-a"), cordoned},
			want: &blockage{ReasonNodeCordoned, "member 1 waits for node n-b, which is cordoned"}},
		{name: "cordoned node with a Ready pod: not blocked", flock: pg, members: both, nodes: []*corev1.Node{newNode("n-a"), cordoned},
			mutate: func(s *snapshot) { s.pods[1] = ready }},
		// A member that follows its volume is not held back by a recorded
		// node its pod has not been scheduled to.
		{name: "follower: cordoned recorded node without a pod", flock: claims, members: both, nodes: []*corev1.Node{newNode("n-a"), cordoned}},
		{name: "follower: gone recorded node without a pod", flock: claims, members: both, nodes: testNodes("n-a")},
		{name: "follower: the scheduler's word", flock: claims, members: both, nodes: []*corev1.Node{newNode("n-a"), cordoned},
			mutate: func(s *snapshot) { s.pods[1] = unschedulable },
			want:   &blockage{ReasonUnschedulable, "member 1 cannot be scheduled: 0/3 nodes are available: 3 node(s) had volume node affinity conflict."}},
		{name: "follower: its pod's node NotReady", flock: claims, members: both, nodes: []*corev1.Node{newNode("n-a"), notReady},
			mutate: func(s *snapshot) { s.pods[1] = testPod(claims, 1, "n-b", true, nil) },
			want:   &blockage{ReasonNodeNotReady, "member 1 waits for node n-b, which is NotReady"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mutate []func(*snapshot)
			if tc.mutate != nil {
				mutate = append(mutate, tc.mutate)
			}
			blocked := blockedMembers(testSnapshot(t, tc.flock, tc.members, tc.nodes, mutate...), tc.losses)
			if _, ok := blocked[0]; ok {
				t.Errorf("member 0 blocked: %+v", blocked[0])
			}
			got, ok := blocked[1]
			switch {
			case tc.want == nil && ok:
				t.Errorf("member 1 blocked: %+v", got)
			case tc.want != nil && (!ok || got != *tc.want):
				t.Errorf("member 1 = %+v, want %+v", got, *tc.want)
			}
		})
	}
}

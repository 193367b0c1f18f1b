package flock

// Table tests of the sync's decisions: planPlacement, planRecovery and
// blockedMembers. Each case builds a snapshot by hand; no client, no
// fixture.

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

var decisionNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// testSnapshot returns the snapshot of a sync of f at decisionNow, in a
// cluster of nodes, with f's members recorded as members says (ordinal ->
// node). mutate, when given, changes the snapshot before it is returned.
func testSnapshot(t *testing.T, f *v1alpha1.Flock, members map[int32]string, nodes []*corev1.Node, mutate ...func(*snapshot)) *snapshot {
	t.Helper()
	f = f.DeepCopy()
	for _, ord := range slices.Sorted(maps.Keys(members)) {
		f.Status.Members = append(f.Status.Members, v1alpha1.FlockMember{Ordinal: ord, Node: members[ord], Pod: PodName(f.Name, ord)})
	}
	sel, err := metav1.LabelSelectorAsSelector(f.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	s := &snapshot{
		flock: f, now: decisionNow, selector: sel, dataRoot: DefaultDataRoot,
		members: membersByOrdinal(f.Status.Members), pods: map[int32]*corev1.Pod{},
		nodeList: nodes, nodes: map[string]*corev1.Node{},
		otherUsage: map[string]int{}, lostSince: map[string]time.Time{},
		nameTaken: map[int32]bool{}, helpers: map[int32]*corev1.Pod{},
	}
	for _, n := range nodes {
		s.nodes[n.Name] = n
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func testNodes(names ...string) []*corev1.Node {
	var nodes []*corev1.Node
	for _, name := range names {
		nodes = append(nodes, newNode(name))
	}
	return nodes
}

// withDataVolume gives pod the data volume of its member of f.
func withDataVolume(f *v1alpha1.Flock, pod *corev1.Pod) *corev1.Pod {
	ord, _ := ParseOrdinal(f.Name, pod.Name)
	member := NewMemberPod(f, v1alpha1.FlockMember{Ordinal: ord, Node: pod.Spec.NodeName}, "", DefaultDataRoot)
	pod.Spec.Volumes = member.Spec.Volumes
	return pod
}

// testPod returns pod <flock>-<ordinal> bound to node, controlled by f when
// owned, labelled with labels.
func testPod(f *v1alpha1.Flock, ordinal int32, node string, owned bool, labels map[string]string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: PodName(f.Name, ordinal), Namespace: f.Namespace, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node},
	}
	if owned {
		pod.OwnerReferences = []metav1.OwnerReference{*newControllerRef(f)}
	}
	return pod
}

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
		{name: "least used across Flocks first", flock: one, nodes: testNodes("n-a", "n-b", "n-c"),
			mutate: func(s *snapshot) { s.otherUsage = map[string]int{"n-a": 2, "n-b": 1} },
			want:   map[int32]string{0: "n-c"}},
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

func TestPlanRecovery(t *testing.T) {
	waiting := newFlock("pg", 2)
	reassign := newFlock("pg", 2)
	reassign.Spec.MemberRecovery = v1alpha1.MemberRecovery{Policy: v1alpha1.ReassignMemberRecovery, AfterSeconds: ptr.To(int32(60))}
	explicit := reassign.DeepCopy()
	explicit.Spec.Placement.Nodes = []string{"n-a", "n-b"}
	notReady := newNode("n-b")
	setNodeReady(false)(notReady)
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
	}{
		{name: "no lost node: nothing", flock: reassign, members: members, nodes: testNodes("n-a", "n-b", "n-c"),
			lost: func(*snapshot) {}, moves: map[int32][2]string{}},
		{name: "Wait keeps the member", flock: waiting, members: members, nodes: []*corev1.Node{newNode("n-a"), notReady, newNode("n-c")},
			lost: lostB(time.Hour), moves: map[int32][2]string{}, note: "memberRecovery Wait keeps it on that node until the node is back"},
		{name: "Reassign waits for afterSeconds", flock: reassign, members: members, nodes: []*corev1.Node{newNode("n-a"), notReady, newNode("n-c")},
			lost: lostB(20 * time.Second), moves: map[int32][2]string{}, requeue: 40 * time.Second,
			note: "memberRecovery Reassign moves it to another node at 2026-01-01T12:00:40Z"},
		{name: "Reassign moves to a free Ready node", flock: reassign, members: members, nodes: []*corev1.Node{newNode("n-a"), notReady, newNode("n-c")},
			lost: lostB(2 * time.Minute), moves: map[int32][2]string{1: {"n-b", "n-c"}}},
		{name: "Reassign moves off a gone node", flock: reassign, members: members, nodes: testNodes("n-a", "n-c"),
			lost: lostB(2 * time.Minute), moves: map[int32][2]string{1: {"n-b", "n-c"}}},
		{name: "no free node: the member waits", flock: reassign, members: members, nodes: []*corev1.Node{newNode("n-a"), notReady},
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
		{name: "pod name taken", flock: pg, members: both, nodes: testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) { s.nameTaken[1] = true },
			want: &blockage{ReasonPodNameTaken,
				"member 1 cannot start: pod pg-1 exists and is not a pod of this Flock on node n-b; delete it to let the member start"}},
		{name: "waits for its data cleanup", flock: pg, members: both, nodes: testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) {
				s.helpers[1] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pg-1-cleanup"}, Spec: corev1.PodSpec{NodeName: "n-b"}}
			},
			want: &blockage{ReasonDataCleanup, "member 1 waits for pod pg-1-cleanup to finish removing its data directory on node n-b"}},
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

func TestAdoptable(t *testing.T) {
	pg := newFlock("pg", 2)
	app := map[string]string{"app": "pg"}
	otherVolume := withDataVolume(pg, testPod(pg, 1, "n-b", false, app))
	otherVolume.Spec.Volumes[len(otherVolume.Spec.Volumes)-1].HostPath.Path = "/elsewhere"
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

func TestPlanMember(t *testing.T) {
	pg := newFlock("pg", 2)
	plan := newUpdatePlan(pg, nil, Revision(&pg.Spec.Template), "", nil)
	member := func(mutate func(*corev1.Pod)) *corev1.Pod {
		pod := NewMemberPod(pg, v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}, plan.Update, DefaultDataRoot)
		pod.Spec.NodeName = "n-b"
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(decisionNow.Add(-time.Hour)),
		}}}
		if mutate != nil {
			mutate(pod)
		}
		return pod
	}
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: decisionNow} }
	both := map[int32]string{0: "n-a", 1: "n-b"}

	tests := []struct {
		name    string
		members map[int32]string
		nodes   []*corev1.Node
		mutate  func(*snapshot)
		want    memberAction
	}{
		{name: "unplaced: wait", members: map[int32]string{0: "n-a"}, nodes: testNodes("n-a", "n-b"),
			want: memberAction{kind: memberKeep, wait: true}},
		{name: "no pod: create at the update revision", members: both, nodes: testNodes("n-a", "n-b"),
			want: memberAction{kind: memberCreate, wait: true, template: &pg.Spec.Template, revision: plan.Update}},
		{name: "no pod, its name taken: wait", members: both, nodes: testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) { s.nameTaken[1] = true }, want: memberAction{kind: memberKeep, wait: true}},
		{name: "no pod, its data being removed: wait", members: both, nodes: testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) { s.helpers[1] = &corev1.Pod{} }, want: memberAction{kind: memberKeep, wait: true}},
		{name: "healthy and available: go on", members: both, nodes: testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) { s.pods[1] = member(nil) }, want: memberAction{kind: memberKeep}},
		{name: "not Ready yet: wait", members: both, nodes: testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) { s.pods[1] = member(func(p *corev1.Pod) { p.Status.Conditions = nil }) },
			want:   memberAction{kind: memberKeep, wait: true}},
		{name: "terminating: wait", members: both, nodes: testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) { s.pods[1] = member(terminating) }, want: memberAction{kind: memberKeep, wait: true}},
		{name: "terminating on a gone node: force-delete", members: both, nodes: testNodes("n-a"),
			mutate: func(s *snapshot) { s.pods[1] = member(terminating) },
			want:   memberAction{kind: memberDelete, wait: true, why: "its node is lost", force: true}},
		{name: "terminated: recreate", members: both, nodes: testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) { s.pods[1] = member(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }) },
			want: memberAction{kind: memberDelete, wait: true, why: "recreate",
				warning: "pod pg-1 of member 1 is Failed; deleting it to recreate it on node n-b"}},
		{name: "wrong hostname: recreate", members: both, nodes: testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) { s.pods[1] = member(func(p *corev1.Pod) { p.Spec.Hostname = "other" }) },
			want: memberAction{kind: memberDelete, wait: true, why: "recreate",
				warning: `pod pg-1 has hostname "other" and subdomain "pg", want "pg-1" and "pg"; deleting it to recreate it`}},
		{name: "member labels lost: relabel", members: both, nodes: testNodes("n-a", "n-b"),
			mutate: func(s *snapshot) {
				s.pods[1] = member(func(p *corev1.Pod) { delete(p.Labels, v1alpha1.LabelOrdinal) })
			},
			want: memberAction{kind: memberRelabel}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mutate []func(*snapshot)
			if tc.mutate != nil {
				mutate = append(mutate, tc.mutate)
			}
			got := planMember(testSnapshot(t, pg, tc.members, tc.nodes, mutate...), 1, plan)
			if !reflect.DeepEqual(got.template, tc.want.template) {
				t.Errorf("template %v, want %v", got.template, tc.want.template)
			}
			got.template, tc.want.template = nil, nil
			if got != tc.want {
				t.Errorf("planMember = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPlanRollingUpdate(t *testing.T) {
	pg := newFlock("pg", 3)
	nodes := []string{"n-a", "n-b", "n-c"}
	members := map[int32]string{0: "n-a", 1: "n-b", 2: "n-c"}
	old := func(ord int32, mutate ...func(*corev1.Pod)) *corev1.Pod {
		pod := NewMemberPod(pg, v1alpha1.FlockMember{Ordinal: ord, Node: nodes[ord]}, "old", DefaultDataRoot)
		pod.Spec.NodeName = nodes[ord]
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(decisionNow.Add(-time.Hour)),
		}}}
		for _, m := range mutate {
			m(pod)
		}
		return pod
	}
	notReady := func(p *corev1.Pod) { p.Status.Conditions = nil }
	allOld := func(s *snapshot) {
		for ord := range int32(3) {
			s.pods[ord] = old(ord)
		}
	}
	rolling := updatePlan{Strategy: v1alpha1.RollingUpdateFlockStrategyType, MaxUnavailable: 1, Update: "new", Current: "old"}
	withPlan := func(mutate func(*updatePlan)) updatePlan {
		p := rolling
		mutate(&p)
		return p
	}
	lostA := newNode("n-a")
	setNodeReady(false)(lostA)

	tests := []struct {
		name    string
		nodes   []*corev1.Node
		mutate  func(*snapshot)
		plan    updatePlan
		changed map[int32]bool
		replace []int32
		waiting string
	}{
		{name: "one at a time from the top", mutate: allOld, plan: rolling, replace: []int32{2}, waiting: "pg-1"},
		{name: "an unavailable pod costs nothing", plan: rolling, replace: []int32{2}, waiting: "pg-1",
			mutate: func(s *snapshot) { allOld(s); s.pods[2] = old(2, notReady) }},
		{name: "an unavailable pod below spends the budget", plan: rolling, waiting: "pg-2",
			mutate: func(s *snapshot) { allOld(s); s.pods[0] = old(0, notReady) }},
		{name: "a pod on a NotReady node is unavailable", nodes: []*corev1.Node{lostA, newNode("n-b"), newNode("n-c")},
			plan: rolling, mutate: allOld, waiting: "pg-2"},
		{name: "partition", mutate: allOld, plan: withPlan(func(p *updatePlan) { p.Partition = 2 }), replace: []int32{2}},
		{name: "maxUnavailable 2", mutate: allOld, plan: withPlan(func(p *updatePlan) { p.MaxUnavailable = 2 }),
			replace: []int32{2, 1}, waiting: "pg-0"},
		{name: "changed this sync: left alone and unavailable", mutate: allOld, plan: rolling,
			changed: map[int32]bool{2: true}, waiting: "pg-1"},
		{name: "OnDelete: nothing", mutate: allOld,
			plan: withPlan(func(p *updatePlan) { p.Strategy = v1alpha1.OnDeleteFlockStrategyType })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.nodes == nil {
				tc.nodes = testNodes(nodes...)
			}
			s := testSnapshot(t, pg, members, tc.nodes, tc.mutate)
			replace, waiting := planRollingUpdate(s, tc.plan, tc.changed)
			if !slices.Equal(replace, tc.replace) {
				t.Errorf("replace = %v, want %v", replace, tc.replace)
			}
			var got string
			if waiting != nil {
				got = waiting.Name
			}
			if got != tc.waiting {
				t.Errorf("waiting = %q, want %q", got, tc.waiting)
			}
		})
	}
}

func TestPlanScaleDown(t *testing.T) {
	ordered := newFlock("pg", 1)
	parallel := ordered.DeepCopy()
	parallel.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	pod := func(f *v1alpha1.Flock, ord int32, node string, terminating bool) *corev1.Pod {
		p := testPod(f, ord, node, true, nil)
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: decisionNow}
		}
		return p
	}
	type del struct {
		name    string
		force   bool
		changes bool
	}
	tests := []struct {
		name    string
		flock   *v1alpha1.Flock
		nodes   []*corev1.Node
		pods    []*corev1.Pod
		want    []del
		waiting string
	}{
		{name: "OrderedReady: the highest first, one at a time", flock: ordered, nodes: testNodes("n-a", "n-b", "n-c"),
			pods: []*corev1.Pod{pod(ordered, 0, "n-a", false), pod(ordered, 1, "n-b", false), pod(ordered, 2, "n-c", false)},
			want: []del{{"pg-2", false, true}}},
		{name: "OrderedReady: waits for a terminating pod", flock: ordered, nodes: testNodes("n-a", "n-b", "n-c"),
			pods:    []*corev1.Pod{pod(ordered, 1, "n-b", false), pod(ordered, 2, "n-c", true)},
			waiting: "pg-2"},
		{name: "a terminating pod on a gone node is forced", flock: ordered, nodes: testNodes("n-a", "n-b"),
			pods: []*corev1.Pod{pod(ordered, 1, "n-b", false), pod(ordered, 2, "n-c", true)},
			want: []del{{"pg-2", true, false}}, waiting: "pg-2"},
		{name: "Parallel: all at once", flock: parallel, nodes: testNodes("n-a", "n-b"),
			pods: []*corev1.Pod{pod(parallel, 0, "n-a", false), pod(parallel, 1, "n-b", false), pod(parallel, 2, "n-c", false)},
			want: []del{{"pg-2", true, true}, {"pg-1", false, true}}},
		{name: "nothing above replicas", flock: ordered, nodes: testNodes("n-a"), pods: []*corev1.Pod{pod(ordered, 0, "n-a", false)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := testSnapshot(t, tc.flock, nil, tc.nodes, func(s *snapshot) {
				for _, p := range tc.pods {
					ord, _ := ParseOrdinal("pg", p.Name)
					s.pods[ord] = p
				}
			})
			deletions, waiting := planScaleDown(s)
			var got []del
			for _, d := range deletions {
				got = append(got, del{d.pod.Name, d.force, d.changes})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("deletions = %v, want %v", got, tc.want)
			}
			if name := ptrName(waiting); name != tc.waiting {
				t.Errorf("waiting = %q, want %q", name, tc.waiting)
			}
		})
	}
}

func ptrName(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	return p.Name
}

func TestPlanReassignedDeletions(t *testing.T) {
	pg := newFlock("pg", 2)
	notReady := newNode("n-b")
	setNodeReady(false)(notReady)
	s := testSnapshot(t, pg, map[int32]string{0: "n-a", 1: "n-c"}, []*corev1.Node{newNode("n-a"), notReady, newNode("n-c")}, func(s *snapshot) {
		s.pods[0] = testPod(pg, 0, "n-a", true, nil) // on its member's node
		s.pods[1] = testPod(pg, 1, "n-b", true, nil) // member 1 moved to n-c
	})
	got := planReassignedDeletions(s)
	if len(got) != 1 || got[0].pod.Name != "pg-1" || !got[0].force || !got[0].changes ||
		got[0].why != "member 1 was reassigned from node n-b to node n-c" {
		t.Fatalf("deletions = %+v", got)
	}
	// Terminating on a Ready node: it finishes by itself; nothing to do.
	s.nodes["n-b"] = newNode("n-b")
	s.pods[1].DeletionTimestamp = &metav1.Time{Time: decisionNow}
	if got := planReassignedDeletions(s); len(got) != 0 {
		t.Fatalf("deletions of a pod terminating on a Ready node = %+v", got)
	}
}

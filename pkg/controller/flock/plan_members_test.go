package flock

// Table tests of the per-member decisions (planMember, planRollingUpdate,
// planScaleDown, planReassignedDeletions), on hand-built snapshots.

import (
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func TestPlanMember(t *testing.T) {
	pg := newFlock("pg", 2)
	plan := newUpdatePlan(pg, nil, Revision(&pg.Spec.Template), "", nil)
	member := func(mutate func(*corev1.Pod)) *corev1.Pod {
		pod := NewMemberPod(pg, v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}, plan.Update)
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
		pod := NewMemberPod(pg, v1alpha1.FlockMember{Ordinal: ord, Node: nodes[ord]}, "old")
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
	pod := testMemberPod
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

func TestPlanReassignedDeletions(t *testing.T) {
	pg := newFlock("pg", 2)
	notReady := newNode("n-b")
	setNodeReady(false)(notReady)
	notReady.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}
	s := testSnapshot(t, pg, map[int32]string{0: "n-a", 1: "n-c"}, []*corev1.Node{newNode("n-a"), notReady, newNode("n-c")}, func(s *snapshot) {
		s.pods[0] = testPod(pg, 0, "n-a", true, nil) // on its member's node
		s.pods[1] = testPod(pg, 1, "n-b", true, nil) // member 1 moved to n-c
	})
	got := planReassignedDeletions(s)
	if len(got) != 1 || got[0].pod.Name != "pg-1" || !got[0].force || !got[0].changes ||
		got[0].why != "member 1 was moved from node n-b to node n-c" {
		t.Fatalf("deletions = %+v", got)
	}
	// Merely NotReady (it may be partitioned and still run the pod): a
	// graceful deletion, never a forced one.
	s.nodes["n-b"] = newNode("n-b")
	setNodeReady(false)(s.nodes["n-b"])
	if got := planReassignedDeletions(s); len(got) != 1 || got[0].force {
		t.Fatalf("deletions of a pod on a NotReady node = %+v", got)
	}
	// Terminating on a Ready node: it finishes by itself; nothing to do.
	s.nodes["n-b"] = newNode("n-b")
	s.pods[1].DeletionTimestamp = &metav1.Time{Time: decisionNow}
	if got := planReassignedDeletions(s); len(got) != 0 {
		t.Fatalf("deletions of a pod terminating on a Ready node = %+v", got)
	}
}

package flock

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func withReassign(fl *v1alpha1.Flock, afterSeconds int32) *v1alpha1.Flock {
	fl.Spec.MemberRecovery = v1alpha1.MemberRecovery{Policy: v1alpha1.ReassignMemberRecovery, AfterSeconds: &afterSeconds}
	return fl
}

// notReadySince makes a node NotReady since t, as the node lifecycle
// controller records it.
func notReadySince(t time.Time) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(t),
		}}
	}
}

func TestWaitKeepsMemberOnLostNode(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c", "n-d")
	fl := newFlock("pg", 3)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	f.settle("pg")
	before := f.memberNodes("pg")
	lostAt := f.clock.Now()
	f.deleteNode("n-b")
	f.mustSync("pg")    // the node's delete event
	f.deletePod("pg-1") // as the pod garbage collector does for a gone node
	for range 5 {
		f.clock.Step(time.Hour)
		f.settle("pg")
	}
	if got := f.memberNodes("pg"); !equality.Semantic.DeepEqual(got, before) {
		t.Fatalf("members = %v, want %v", got, before)
	}
	want := "member 1 waits for node n-b, which is gone since " + formatTime(lostAt) +
		"; memberRecovery Wait keeps it on that node until the node is back"
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Status != metav1.ConditionTrue || c.Reason != ReasonNodeGone || c.Message != want {
		t.Fatalf("MembersBlocked = %+v", c)
	}
	if m := f.getFlock("pg").Status.Members[1]; m.Message != want || m.Ready {
		t.Errorf("member 1 = %+v", m)
	}
	// The pod waits on its node.
	if p := f.pod("pg-1"); p == nil || PinnedNode(p) != "n-b" || p.Spec.NodeName != "" {
		t.Errorf("pg-1 = %+v", p)
	}

	// NotReady: since the node's transition time.
	since := f.clock.Now().Add(-time.Minute)
	f.updateNode("n-c", notReadySince(since))
	f.settle("pg")
	c := f.condition("pg", v1alpha1.FlockMembersBlocked)
	if !strings.Contains(c.Message, "member 2 waits for node n-c, which is NotReady since "+formatTime(since)+"; memberRecovery Wait") {
		t.Errorf("MembersBlocked = %+v", c)
	}
}

func TestReassignMovesMemberOffGoneNode(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c", "n-d")
	f.members.graceful = true
	f.createFlock(withReassign(newFlock("pg", 3), 10))
	for range 3 {
		f.settle("pg")
	}
	if got := f.memberNodes("pg"); got[1] != "n-b" {
		t.Fatalf("members = %v", got)
	}
	lostAt := f.clock.Now()
	f.deleteNode("n-b")
	res := f.syncResult("pg")
	if res.RequeueAfter != 10*time.Second {
		t.Errorf("RequeueAfter = %v, want 10s", res.RequeueAfter)
	}
	c := f.condition("pg", v1alpha1.FlockMembersBlocked)
	if !strings.Contains(c.Message, "member 1 waits for node n-b, which is gone since "+formatTime(lostAt)+
		"; memberRecovery Reassign moves it to another node at "+formatTime(lostAt.Add(10*time.Second))) {
		t.Fatalf("MembersBlocked = %+v", c)
	}
	// Its pod still says Ready, but the member is not available.
	if p := f.pod("pg-1"); !isRunningAndReady(p) {
		t.Fatal("the test needs pg-1 to look Ready")
	}
	if c := f.condition("pg", v1alpha1.FlockAvailable); c.Status != metav1.ConditionFalse || c.Message != "2 of 3 members available" {
		t.Errorf("Available = %+v", c)
	}
	f.clock.Step(9 * time.Second)
	f.settle("pg")
	if got := f.memberNodes("pg")[1]; got != "n-b" {
		t.Fatalf("moved after 9s to %s", got)
	}

	f.clock.Step(time.Second)
	f.events()
	f.members.ops = nil
	f.mustSync("pg")
	if got := f.memberNodes("pg"); got[1] != "n-d" {
		t.Fatalf("members = %v, want member 1 on the spare node n-d", got)
	}
	// The old pod is gone at once (its node cannot confirm anything).
	if len(f.members.ops) == 0 || f.members.ops[0] != "force-delete pg-1" {
		t.Fatalf("ops = %v", f.members.ops)
	}
	// The status written by that sync saw the old pod (Ready, on n-b):
	// it is not member 1 on n-d, so member 1 is neither Ready nor
	// available (found by the fault suite: the Flock said Available
	// before member 1 had a pod on its new node).
	if st := f.getFlock("pg").Status; st.Members[1].Ready || st.ReadyReplicas != 2 ||
		!strings.Contains(st.Members[1].Message, "pod pg-1 on node n-b is being replaced by one on node n-d") {
		t.Errorf("member 1 %+v, readyReplicas %d", st.Members[1], st.ReadyReplicas)
	}
	if c := f.condition("pg", v1alpha1.FlockAvailable); c.Status != metav1.ConditionFalse || c.Message != "2 of 3 members available" {
		t.Errorf("Available = %+v", c)
	}
	events := f.events()
	if !hasEvent(events, "Warning MemberReassigned", "member 1", "from node n-b to node n-d", "Reassign after 10s") {
		t.Errorf("no MemberReassigned event in %v", events)
	}
	f.settle("pg")
	p := f.pod("pg-1")
	if p == nil || p.Spec.NodeName != "n-d" || !isRunningAndReady(p) {
		t.Fatalf("pg-1 = %+v; ops %v", p, f.members.ops)
	}
	// A fresh volume on the new node, for the same claim name.
	if pv := f.data.volumes[PersistentVolumeName("flock-pg", 1)]; pv == nil || !volumeOnNode(pv, "n-d") {
		t.Errorf("member 1's volume = %+v", pv)
	}
	note := "reassigned from node n-b (gone since " + formatTime(lostAt) + ") to node n-d at " +
		formatTime(lostAt.Add(10*time.Second)) + "; its data directory there started empty"
	m := f.getFlock("pg").Status.Members[1]
	if !m.Ready || m.Message != note {
		t.Errorf("member 1 = %+v, want the note %q", m, note)
	}
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Status != metav1.ConditionFalse {
		t.Errorf("MembersBlocked = %+v", c)
	}

	// The node comes back: nothing moves back.
	f.addNode(newNode("n-b"))
	for range 3 {
		f.clock.Step(time.Minute)
		f.settle("pg")
	}
	if got := f.memberNodes("pg"); got[1] != "n-d" {
		t.Fatalf("members = %v after n-b returned", got)
	}
	if p := f.pod("pg-1"); p.Spec.NodeName != "n-d" {
		t.Errorf("pg-1 on %s", p.Spec.NodeName)
	}
	if m := f.getFlock("pg").Status.Members[1]; m.Message != note {
		t.Errorf("the note is gone: %+v", m)
	}
}

func TestReassignMovesMemberOffNotReadyNode(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.members.graceful = true
	fl := withReassign(newFlock("pg", 2), 30)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	f.settle("pg")
	since := f.clock.Now()
	f.updateNode("n-a", notReadySince(since))
	f.clock.Step(29 * time.Second)
	f.settle("pg")
	if got := f.memberNodes("pg")[0]; got != "n-a" {
		t.Fatalf("moved early to %s", got)
	}
	f.events()

	// Due, but n-a is only NotReady: it may be partitioned and still run
	// pg-0, so nothing moves and nothing is deleted; an event and the
	// status say why.
	f.clock.Step(time.Second)
	f.members.ops = nil
	f.settle("pg")
	f.clock.Step(time.Minute)
	f.settle("pg")
	if got := f.memberNodes("pg")[0]; got != "n-a" {
		t.Fatalf("member 0 moved to %s off a node not known to be down", got)
	}
	for _, op := range f.members.ops {
		if strings.Contains(op, "pg-0") {
			t.Errorf("%s: pg-0 touched on a NotReady node", op)
		}
	}
	events := f.events()
	if !hasEvent(events, "Warning ReassignWaiting", "member 0", "NotReady but not known to be down", corev1.TaintNodeOutOfService) {
		t.Errorf("events = %v, want ReassignWaiting", events)
	}
	if n := strings.Count(strings.Join(events, "\n"), "ReassignWaiting"); n != 1 {
		t.Errorf("%d ReassignWaiting events, want one", n)
	}
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Status != metav1.ConditionTrue ||
		!strings.Contains(c.Message, "memberRecovery Reassign does not move it: node n-a is NotReady but not known to be down") {
		t.Errorf("MembersBlocked = %+v", c)
	}

	// The administrator says n-a is down: the member moves, and its pod
	// there is force-deleted (its kubelet cannot confirm a graceful stop).
	f.updateNode("n-a", func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	})
	f.members.ops = nil
	f.mustSync("pg")
	if got := f.memberNodes("pg")[0]; got != "n-c" {
		t.Fatalf("member 0 on %s, want n-c", got)
	}
	if len(f.members.ops) == 0 || f.members.ops[0] != "force-delete pg-0" {
		t.Fatalf("ops = %v", f.members.ops)
	}
	f.settle("pg")
	if p := f.pod("pg-0"); p == nil || p.Spec.NodeName != "n-c" || !isRunningAndReady(p) {
		t.Fatalf("pg-0 = %+v", p)
	}
	if m := f.getFlock("pg").Status.Members[0]; !strings.HasPrefix(m.Message, "reassigned from node n-a (NotReady since "+formatTime(since)+") to node n-c") {
		t.Errorf("member 0 = %+v", m)
	}
	// n-a comes back: it keeps nothing of the Flock.
	f.updateNode("n-a", func(n *corev1.Node) { n.Spec.Taints = nil; setNodeReady(true)(n) })
	f.settle("pg")
	for _, p := range f.allPods() {
		if p.Spec.NodeName == "n-a" {
			t.Errorf("pod %s on the returned node", p.Name)
		}
	}
}

// A member records in status since when its node is lost, so a restarted
// controller (a fresh tracker) keeps counting from then: the member moves
// afterSeconds after the loss, neither sooner nor later; once the node is
// back, the record goes.
func TestReassignWaitSurvivesRestart(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c", "n-d")
	f.createFlock(withReassign(newFlock("pg", 3), 60))
	for range 3 {
		f.settle("pg")
	}
	f.clock.Step(500 * time.Millisecond) // the record rounds up to whole seconds
	lostAt := f.clock.Now().Truncate(time.Second).Add(time.Second)
	f.deleteNode("n-b")
	f.settle("pg")
	m := f.getFlock("pg").Status.Members[1]
	if m.NodeLostSince == nil || !m.NodeLostSince.Time.Equal(lostAt) {
		t.Fatalf("member 1 = %+v, want nodeLostSince %s", m, formatTime(lostAt))
	}
	if other := f.getFlock("pg").Status.Members[0]; other.NodeLostSince != nil {
		t.Errorf("member 0 on a Ready node = %+v", other)
	}
	f.clock.Step(50 * time.Second)
	f.settle("pg")

	restart := func() { f.controller.control.(*defaultFlockControl).lost = newNodeLossTracker() }
	restart()
	f.clock.Step(9 * time.Second)
	f.settle("pg")
	if got := f.memberNodes("pg")[1]; got != "n-b" {
		t.Fatalf("member 1 moved to %s before afterSeconds", got)
	}
	if m := f.getFlock("pg").Status.Members[1]; m.NodeLostSince == nil || !m.NodeLostSince.Time.Equal(lostAt) {
		t.Fatalf("after the restart member 1 = %+v, want nodeLostSince %s", m, formatTime(lostAt))
	}
	restart()
	f.clock.SetTime(lostAt.Add(time.Minute))
	f.settle("pg")
	if got := f.memberNodes("pg")[1]; got != "n-d" {
		t.Fatalf("member 1 on %s 60s after its node was lost (restarted twice meanwhile), want n-d", got)
	}
	if m := f.getFlock("pg").Status.Members[1]; m.NodeLostSince != nil {
		t.Errorf("the moved member keeps nodeLostSince: %+v", m)
	}
}

// A node that comes back clears its members' record.
func TestNodeLostSinceClearedWhenReady(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	f.createFlock(newFlock("pg", 2))
	for range 3 {
		f.settle("pg")
	}
	since := f.clock.Now().Add(-time.Minute).Truncate(time.Second)
	f.updateNode("n-b", notReadySince(since))
	f.settle("pg")
	if m := f.getFlock("pg").Status.Members[1]; m.NodeLostSince == nil || !m.NodeLostSince.Time.Equal(since) {
		t.Fatalf("member 1 = %+v, want nodeLostSince %s (the node's transition)", m, formatTime(since))
	}
	f.updateNode("n-b", setNodeReady(true))
	f.settle("pg")
	if m := f.getFlock("pg").Status.Members[1]; m.NodeLostSince != nil {
		t.Errorf("member 1 = %+v, want no nodeLostSince once its node is Ready", m)
	}
}

func TestReassignWithoutSpareNodeWaits(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(withReassign(newFlock("pg", 3), 10))
	for range 3 {
		f.settle("pg")
	}
	f.deleteNode("n-c")
	f.mustSync("pg")
	f.clock.Step(time.Minute)
	f.settle("pg")
	if got := f.memberNodes("pg")[2]; got != "n-c" {
		t.Fatalf("member 2 moved to %s", got)
	}
	want := "memberRecovery Reassign cannot move it yet: no other eligible Ready node is free of this Flock's members"
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); !strings.HasSuffix(c.Message, want) {
		t.Fatalf("MembersBlocked = %+v", c)
	}
	// A cordoned node is not eligible either.
	n := newNode("n-d")
	n.Spec.Unschedulable = true
	f.addNode(n)
	f.settle("pg")
	if got := f.memberNodes("pg")[2]; got != "n-c" {
		t.Fatalf("member 2 moved to cordoned %s", got)
	}
	// A new node is: the member moves there.
	f.addNode(newNode("n-e"))
	f.settle("pg")
	if got := f.memberNodes("pg")[2]; got != "n-e" {
		t.Fatalf("member 2 on %s, want n-e", got)
	}
	if p := f.pod("pg-2"); p == nil || p.Spec.NodeName != "n-e" || !isRunningAndReady(p) {
		t.Fatalf("pg-2 = %+v", p)
	}
}

func TestReassignNeverMovesExplicitMembers(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	fl := withReassign(newFlock("pg", 2), 10)
	fl.Spec.Placement.Nodes = []string{"n-a", "n-b"}
	f.createFlock(fl)
	f.settle("pg")
	f.settle("pg")
	f.deleteNode("n-b")
	f.clock.Step(time.Minute)
	f.settle("pg")
	if got := f.memberNodes("pg")[1]; got != "n-b" {
		t.Fatalf("member 1 moved to %s", got)
	}
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); !strings.HasSuffix(c.Message, "it is not reassigned: spec.placement.nodes[1] names that node") {
		t.Fatalf("MembersBlocked = %+v", c)
	}
}

func TestNodeLossTracker(t *testing.T) {
	tr := newNodeLossTracker()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, lost := tr.lostSince("n", newNode("n"), t0); lost {
		t.Fatal("a Ready node is lost")
	}
	since, lost := tr.lostSince("n", nil, t0)
	if !lost || !since.Equal(t0) {
		t.Fatalf("gone: %v %v", since, lost)
	}
	if since, _ := tr.lostSince("n", nil, t0.Add(time.Hour)); !since.Equal(t0) {
		t.Fatalf("the first sighting must be kept: %v", since)
	}
	// Back and Ready: forgotten; gone again: a new start.
	tr.lostSince("n", newNode("n"), t0.Add(2*time.Hour))
	if since, _ := tr.lostSince("n", nil, t0.Add(3*time.Hour)); !since.Equal(t0.Add(3 * time.Hour)) {
		t.Fatalf("since = %v", since)
	}
	nr := newNode("m")
	notReadySince(t0.Add(-time.Minute))(nr)
	if since, lost := tr.lostSince("m", nr, t0); !lost || !since.Equal(t0.Add(-time.Minute)) {
		t.Fatalf("NotReady: %v %v", since, lost)
	}
}

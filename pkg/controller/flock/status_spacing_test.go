package flock

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func TestStatusSpacingGrowsWithMembersUpToASecond(t *testing.T) {
	for members, want := range map[int]time.Duration{
		0: 0, 3: 6 * time.Millisecond, 100: 200 * time.Millisecond, 500: time.Second, 5000: time.Second,
	} {
		if got := statusSpacing(members); got != want {
			t.Errorf("statusSpacing(%d) = %v, want %v", members, got, want)
		}
	}
}

// A big Flock's status write that follows the controller's last write
// closer than its spacing waits for the rest of it, and the sync asks to be
// run again then; a new generation or a deletion is written at once.
func TestStatusOfABigFlockIsWrittenSpaced(t *testing.T) {
	const replicas = 250 // spacing 500 ms
	var nodes []string
	for i := range replicas {
		nodes = append(nodes, fmt.Sprintf("n%03d", i))
	}
	f := newFixtureWithConfig(t, fixtureConfig{verbosity: 4, memberParallelism: 8, statusSpacing: true}, nodes...)
	spacing := statusSpacing(replicas)

	fl := newFlock("pg", replicas)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	if res := f.syncResult("pg"); res.RequeueAfter != 0 {
		t.Fatalf("the first sync (a new generation) asked to wait %v", res.RequeueAfter)
	}
	if st := f.getFlock("pg").Status; st.ObservedGeneration != 1 || len(st.Members) != replicas {
		t.Fatalf("first sync: observedGeneration %d, %d members; want 1, %d", st.ObservedGeneration, len(st.Members), replicas)
	}
	if f.controller.control.(*defaultFlockControl).paced.len() != 1 {
		t.Fatalf("the first status write was not noted")
	}

	f.runPods()
	f.clock.Step(spacing / 5)
	before := f.getFlock("pg")
	res := f.syncResult("pg")
	// The fake clientset keeps no resourceVersion on objects: compare the
	// status itself (its members are Ready now, which it does not say yet).
	if got := f.getFlock("pg"); !apiequality.Semantic.DeepEqual(got.Status, before.Status) {
		t.Fatalf("the status was written %v after the last write (readyReplicas %d -> %d); want it spaced by %v",
			spacing/5, before.Status.ReadyReplicas, got.Status.ReadyReplicas, spacing)
	}
	if before.Status.ReadyReplicas == replicas {
		t.Fatalf("the members were Ready before the pods ran; the check above proves nothing")
	}
	if want := spacing - spacing/5; res.RequeueAfter != want {
		t.Fatalf("RequeueAfter %v, want the rest of the spacing, %v", res.RequeueAfter, want)
	}

	f.clock.Step(res.RequeueAfter)
	f.syncResult("pg")
	if st := f.getFlock("pg").Status; st.ReadyReplicas != replicas {
		t.Fatalf("after the spacing: readyReplicas %d, want %d", st.ReadyReplicas, replicas)
	}

	// A new generation is not spaced.
	f.updateFlock("pg", func(fl *v1alpha1.Flock) { fl.Spec.MinReadySeconds = 1 })
	f.syncResult("pg")
	if st := f.getFlock("pg").Status; st.ObservedGeneration != 2 {
		t.Fatalf("a new generation waited: observedGeneration %d, want 2", st.ObservedGeneration)
	}

}

// A status write that would change nothing but messages waits a
// second after the Flock's last write, whatever its size: a member's passing
// step is folded into the write that follows. A change of anything else is
// written within the Flock's own spacing, with the latest messages.
func TestMembersMessagesAloneAreWrittenSpaced(t *testing.T) {
	f := newFixtureWithConfig(t, fixtureConfig{memberParallelism: 8, statusSpacing: true}, "n0", "n1", "n2")
	fl := newFlock("pg", 3)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	f.syncResult("pg") // makes the pods; the status does not show them yet
	f.clock.Step(10 * time.Millisecond)
	f.syncResult("pg")
	message := func(ord int) string { return f.getFlock("pg").Status.Members[ord].Message }
	if got := message(0); got != "pod is waiting to be scheduled" {
		t.Fatalf("member 0 once its pod is made: %q; want its pod waiting to be scheduled", got)
	}

	// Member 0's pod is bound to its node and not yet running: only its
	// message would change.
	f.updatePod("pg-0", func(p *corev1.Pod) { p.Spec.NodeName = "n0"; p.Status.Phase = corev1.PodPending })
	f.clock.Step(10 * time.Millisecond) // past the 3-member spacing of 6 ms
	res := f.syncResult("pg")
	if got := message(0); got != "pod is waiting to be scheduled" {
		t.Fatalf("a change of a message alone was written 10 ms after the last write: %q", got)
	}
	if want := messageSpacing - 10*time.Millisecond; res.RequeueAfter != want {
		t.Fatalf("RequeueAfter %v, want the rest of the message spacing, %v", res.RequeueAfter, want)
	}
	f.clock.Step(res.RequeueAfter)
	if f.syncResult("pg"); message(0) != "pod is Pending and not Ready" {
		t.Fatalf("after the message spacing member 0 says %q; want its pod Pending", message(0))
	}

	// Member 1's pod is bound too (a message) and member 2's runs (a
	// count): both are written at once.
	f.updatePod("pg-1", func(p *corev1.Pod) { p.Spec.NodeName = "n1"; p.Status.Phase = corev1.PodPending })
	f.updatePod("pg-2", func(p *corev1.Pod) {
		p.Spec.NodeName, p.Status.Phase = "n2", corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
	f.clock.Step(10 * time.Millisecond)
	if res := f.syncResult("pg"); res.RequeueAfter != 0 {
		t.Fatalf("a change of readiness asked to wait %v", res.RequeueAfter)
	}
	st := f.getFlock("pg").Status
	if st.ReadyReplicas != 1 || message(1) != "pod is Pending and not Ready" {
		t.Fatalf("readyReplicas %d, member 1 %q; want 1 and its pod Pending, written together", st.ReadyReplicas, message(1))
	}
}

// statusChangeOf tells a change of messages alone, of members or of
// conditions, from any other.
func TestStatusChangeOf(t *testing.T) {
	st := &v1alpha1.FlockStatus{
		Replicas:   2,
		Members:    []v1alpha1.FlockMember{{Ordinal: 0, Message: "a"}, {Ordinal: 1}},
		Conditions: []metav1.Condition{{Type: "Available", Status: metav1.ConditionFalse, Reason: "MembersUnavailable", Message: "x"}},
	}
	for name, c := range map[string]struct {
		mutate func(*v1alpha1.FlockStatus)
		want   statusChange
	}{
		"nothing":               {func(*v1alpha1.FlockStatus) {}, statusUnchanged},
		"a message":             {func(s *v1alpha1.FlockStatus) { s.Members[1].Message = "b" }, statusMessagesChanged},
		"a message and ready":   {func(s *v1alpha1.FlockStatus) { s.Members[0].Message, s.Members[0].Ready = "", true }, statusChanged},
		"a count":               {func(s *v1alpha1.FlockStatus) { s.ReadyReplicas = 1 }, statusChanged},
		"a member more":         {func(s *v1alpha1.FlockStatus) { s.Members = append(s.Members, v1alpha1.FlockMember{Ordinal: 2}) }, statusChanged},
		"a condition's message": {func(s *v1alpha1.FlockStatus) { s.Conditions[0].Message = "y" }, statusMessagesChanged},
		"a condition's reason":  {func(s *v1alpha1.FlockStatus) { s.Conditions[0].Reason = "Other" }, statusChanged},
		"a condition more": {func(s *v1alpha1.FlockStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: "Progressing", Message: "x"})
		}, statusChanged},
	} {
		if got := statusChangeOf(st, c.mutate); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
	if st.Members[1].Message != "" || st.Conditions[0].Message != "x" {
		t.Fatalf("statusChangeOf changed the status it was given")
	}
}

// The pacer never holds back a deleted Flock's status, nor one that does not
// show its generation yet, and forgets writes older than any spacing.
func TestStatusPacer(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakePassiveClock(now)
	p := newStatusPacer(statusSpacing, clk)
	f := &v1alpha1.Flock{ObjectMeta: metav1.ObjectMeta{UID: "a", Generation: 2}, Status: v1alpha1.FlockStatus{ObservedGeneration: 2}}
	if w := p.wait(f, 500, false, now); w != 0 {
		t.Fatalf("a Flock never written waits %v", w)
	}
	p.wrote("a")
	if w := p.wait(f, 500, false, now.Add(300*time.Millisecond)); w != 700*time.Millisecond {
		t.Fatalf("300 ms after a write of a 500-member Flock: wait %v, want 700ms", w)
	}
	if w := p.wait(f, 3, false, now.Add(300*time.Millisecond)); w != 0 {
		t.Fatalf("300 ms after a write of a 3-member Flock: wait %v, want 0", w)
	}
	newGen := f.DeepCopy()
	newGen.Generation = 3
	deleted := f.DeepCopy()
	deleted.DeletionTimestamp = &metav1.Time{Time: now}
	for name, g := range map[string]*v1alpha1.Flock{"a new generation": newGen, "a deleted Flock": deleted} {
		if w := p.wait(g, 500, false, now); w != 0 {
			t.Errorf("%s waits %v", name, w)
		}
	}
	clk.SetTime(now.Add(maxStatusSpacing))
	p.wrote("b")
	if p.len() != 1 {
		t.Fatalf("%d writes remembered a spacing after the first; want only the last", p.len())
	}
	if w := p.wait(f, 500, false, now.Add(maxStatusSpacing)); w != 0 {
		t.Fatalf("a forgotten write still waits %v", w)
	}
	none := newStatusPacer(nil, clk)
	none.wrote("a")
	if w := none.wait(f, 500, true, now); w != 0 {
		t.Fatalf("without spacing: wait %v", w)
	}
}

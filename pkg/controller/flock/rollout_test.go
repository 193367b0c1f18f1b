package flock

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// setImage changes the image of the template's container: a new revision.
func setImage(image string) func(*v1alpha1.Flock) {
	return func(fl *v1alpha1.Flock) { fl.Spec.Template.Spec.Containers[0].Image = image }
}

// revisions returns the revision label of each pod of a Flock by name.
func (f *fixture) podRevisions() map[string]string {
	out := map[string]string{}
	for _, p := range f.allPods() {
		out[p.Name] = podRevision(p)
	}
	return out
}

// unavailable counts the members below replicas without a Running and
// Ready pod.
func (f *fixture) unavailable(name string) int {
	fl := f.getFlock(name)
	n := 0
	for ord := range replicasOf(fl) {
		if p := f.pod(PodName(name, ord)); p == nil || !isRunningAndReady(p) {
			n++
		}
	}
	return n
}

// roll syncs and runs pods until nothing changes (at most 60 rounds),
// calling after() after every sync and every runPods.
func (f *fixture) roll(name string, after func()) {
	f.t.Helper()
	for range 60 {
		before := f.snapshot()
		f.mustSync(name)
		after()
		f.runPods()
		after()
		if f.snapshot() == before {
			return
		}
	}
	f.t.Fatalf("flock %s did not settle in 60 rounds", name)
}

// deletions returns the pod names of the delete operations in ops.
func deletions(ops []string) []string {
	var out []string
	for _, op := range ops {
		if name, ok := strings.CutPrefix(op, "delete "); ok {
			out = append(out, name)
		}
	}
	return out
}

func TestRollingUpdateReplacesFromHighestOrdinalOnOwnNodes(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(newFlock("pg", 3))
	f.settle("pg")
	nodes := f.memberNodes("pg")
	rev1 := f.getFlock("pg").Status.UpdateRevision

	f.updateFlock("pg", setImage("postgres:18"))
	rev2 := Revision(&f.getFlock("pg").Spec.Template)
	f.members.ops = nil
	f.events()
	f.roll("pg", func() {
		if n := f.unavailable("pg"); n > 1 {
			t.Fatalf("%d members unavailable with maxUnavailable 1 (ops %v)", n, f.members.ops)
		}
	})

	want := []string{
		"delete pg-2", "create pg-2 " + rev2,
		"delete pg-1", "create pg-1 " + rev2,
		"delete pg-0", "create pg-0 " + rev2,
	}
	if !slices.Equal(f.members.ops, want) {
		t.Fatalf("ops = %v, want %v", f.members.ops, want)
	}
	for _, p := range f.allPods() {
		ord, _ := ParseOrdinal("pg", p.Name)
		if p.Spec.NodeName != nodes[ord] || p.Spec.Containers[0].Image != "postgres:18" {
			t.Errorf("pod %s on %s with %s, want node %s", p.Name, p.Spec.NodeName, p.Spec.Containers[0].Image, nodes[ord])
		}
	}
	st := f.getFlock("pg").Status
	if st.CurrentRevision != rev2 || st.UpdateRevision != rev2 || st.UpdatedReplicas != 3 || st.CurrentReplicas != 3 {
		t.Errorf("status = %+v", st)
	}
	if c := f.condition("pg", v1alpha1.FlockProgressing); c.Status != metav1.ConditionFalse || c.Reason != ReasonComplete {
		t.Errorf("Progressing = %+v", c)
	}
	events := f.events()
	if !hasEvent(events, "Normal RolloutComplete", rev2, rev1) {
		t.Errorf("no RolloutComplete event in %v", events)
	}
	if !hasEvent(events, "Normal SuccessfulDelete", "pg-2", "rolling update to revision "+rev2) {
		t.Errorf("no rolling update delete event in %v", events)
	}

	// Both templates are recorded, numbered in order, as ControllerRevisions
	// owned by the Flock.
	for i, rev := range []string{rev1, rev2} {
		cr, ok := f.history.get(testNamespace, RevisionName("pg", rev))
		if !ok {
			t.Fatalf("no ControllerRevision for %s", rev)
		}
		tmpl, err := TemplateOf(cr)
		if err != nil {
			t.Fatal(err)
		}
		if cr.Revision != int64(i+1) || Revision(tmpl) != rev || !isControlledBy(cr, f.getFlock("pg")) ||
			cr.Labels[v1alpha1.LabelRevision] != rev || cr.Labels[v1alpha1.LabelFlockName] != "pg" {
			t.Errorf("revision %s = %+v", rev, cr)
		}
	}
}

func TestRollingUpdateProgressingCondition(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(newFlock("pg", 3))
	f.settle("pg")
	f.updateFlock("pg", setImage("postgres:18"))
	rev2 := Revision(&f.getFlock("pg").Spec.Template)
	f.mustSync("pg") // deletes pg-2
	f.mustSync("pg") // creates it at rev2
	c := f.condition("pg", v1alpha1.FlockProgressing)
	if c.Status != metav1.ConditionTrue || c.Reason != ReasonRollingUpdate ||
		!strings.HasPrefix(c.Message, "rolling update to revision "+rev2+": 0 of 3 members updated") {
		t.Errorf("Progressing = %+v", c)
	}
	f.runPods()
	f.mustSync("pg")
	if c := f.condition("pg", v1alpha1.FlockProgressing); !strings.HasPrefix(c.Message, "rolling update to revision "+rev2+": 1 of 3 members updated") {
		t.Errorf("Progressing = %+v", c)
	}
}

func TestRollingUpdateWaitsMinReadySeconds(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	fl := newFlock("pg", 3)
	fl.Spec.MinReadySeconds = 10
	f.createFlock(fl)
	for range 3 {
		f.settle("pg")
		f.clock.Step(10 * time.Second)
	}
	f.settle("pg")
	f.updateFlock("pg", setImage("postgres:18"))
	f.members.ops = nil
	f.mustSync("pg") // deletes pg-2
	f.mustSync("pg") // creates it
	f.runPods()
	res := f.syncResult("pg")
	if got := deletions(f.members.ops); !slices.Equal(got, []string{"pg-2"}) {
		t.Fatalf("deleted %v before pg-2 was Ready for minReadySeconds", got)
	}
	if res.RequeueAfter != 10*time.Second {
		t.Errorf("RequeueAfter = %v, want 10s", res.RequeueAfter)
	}
	f.clock.Step(9 * time.Second)
	f.mustSync("pg")
	if got := deletions(f.members.ops); len(got) != 1 {
		t.Fatalf("deleted %v after 9s", got)
	}
	f.clock.Step(time.Second)
	f.mustSync("pg")
	if got := deletions(f.members.ops); !slices.Equal(got, []string{"pg-2", "pg-1"}) {
		t.Fatalf("deleted %v after 10s", got)
	}
}

func TestRollingUpdatePartition(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	fl := newFlock("pg", 3)
	one := int32(1)
	fl.Spec.UpdateStrategy.RollingUpdate.Partition = &one
	f.createFlock(fl)
	f.settle("pg")
	rev1 := f.getFlock("pg").Status.UpdateRevision
	f.updateFlock("pg", setImage("postgres:18"))
	rev2 := Revision(&f.getFlock("pg").Spec.Template)
	f.roll("pg", func() {})

	if got := f.podRevisions(); got["pg-0"] != rev1 || got["pg-1"] != rev2 || got["pg-2"] != rev2 {
		t.Fatalf("revisions = %v, want pg-0 at %s, the others at %s", got, rev1, rev2)
	}
	st := f.getFlock("pg").Status
	if st.CurrentRevision != rev1 || st.UpdateRevision != rev2 || st.UpdatedReplicas != 2 || st.CurrentReplicas != 1 {
		t.Errorf("status = %+v", st)
	}
	if c := f.condition("pg", v1alpha1.FlockProgressing); c.Status != metav1.ConditionFalse || c.Reason != ReasonComplete ||
		!strings.Contains(c.Message, "members [0] below partition 1 stay at revision "+rev1) {
		t.Errorf("Progressing = %+v", c)
	}

	// Below the partition a deleted pod comes back at the current revision,
	// from its ControllerRevision.
	f.deletePod("pg-0")
	f.roll("pg", func() {})
	if p := f.pod("pg-0"); podRevision(p) != rev1 || p.Spec.Containers[0].Image != "postgres:17" {
		t.Fatalf("pg-0 came back at %s with %s", podRevision(p), p.Spec.Containers[0].Image)
	}

	// Lowering the partition finishes the rollout.
	f.updateFlock("pg", func(fl *v1alpha1.Flock) { fl.Spec.UpdateStrategy.RollingUpdate.Partition = new(int32) })
	f.roll("pg", func() {})
	if got := f.podRevisions(); got["pg-0"] != rev2 {
		t.Fatalf("revisions = %v", got)
	}
	if st := f.getFlock("pg").Status; st.CurrentRevision != rev2 {
		t.Errorf("currentRevision = %s", st.CurrentRevision)
	}
}

func TestRollingUpdateMaxUnavailable(t *testing.T) {
	for _, policy := range []v1alpha1.PodManagementPolicyType{v1alpha1.OrderedReadyPodManagement, v1alpha1.ParallelPodManagement} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t, "n-a", "n-b", "n-c", "n-d", "n-e")
			f.members.graceful = true
			fl := newFlock("pg", 5)
			fl.Spec.PodManagementPolicy = policy
			two := intstr.FromString("40%") // of 5: 2
			fl.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &two
			f.createFlock(fl)
			for range 5 {
				f.settle("pg")
			}
			f.updateFlock("pg", setImage("postgres:18"))
			f.members.ops = nil
			f.mustSync("pg")
			if got := deletions(f.members.ops); !slices.Equal(got, []string{"pg-4", "pg-3"}) {
				t.Fatalf("first round deleted %v, want pg-4 and pg-3", got)
			}
			for range 60 {
				before := f.snapshot()
				f.mustSync("pg")
				if n := f.unavailable("pg"); n > 2 {
					t.Fatalf("%d members unavailable with maxUnavailable 2", n)
				}
				f.finishTerminating()
				f.runPods()
				if f.snapshot() == before {
					break
				}
			}
			if got := deletions(f.members.ops); !slices.Equal(got, []string{"pg-4", "pg-3", "pg-2", "pg-1", "pg-0"}) {
				t.Fatalf("deleted %v", got)
			}
			if st := f.getFlock("pg").Status; st.UpdatedReplicas != 5 || st.ReadyReplicas != 5 {
				t.Errorf("status = %+v", st)
			}
		})
	}
}

func TestOnDeleteReplacesOnlyDeletedPods(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	fl := newFlock("pg", 3)
	fl.Spec.UpdateStrategy = v1alpha1.FlockUpdateStrategy{Type: v1alpha1.OnDeleteFlockStrategyType}
	f.createFlock(fl)
	f.settle("pg")
	rev1 := f.getFlock("pg").Status.UpdateRevision
	f.updateFlock("pg", setImage("postgres:18"))
	rev2 := Revision(&f.getFlock("pg").Spec.Template)
	f.members.ops = nil
	f.settle("pg")
	if len(f.members.ops) != 0 {
		t.Fatalf("OnDelete touched pods: %v", f.members.ops)
	}
	if c := f.condition("pg", v1alpha1.FlockProgressing); c.Status != metav1.ConditionFalse ||
		!strings.Contains(c.Message, "members [0 1 2] run an earlier revision than "+rev2+" and are updated when their pods are deleted") {
		t.Errorf("Progressing = %+v", c)
	}

	f.deletePod("pg-1")
	f.settle("pg")
	if got := f.podRevisions(); got["pg-0"] != rev1 || got["pg-1"] != rev2 || got["pg-2"] != rev1 {
		t.Fatalf("revisions = %v", got)
	}
	if p := f.pod("pg-1"); p.Spec.Containers[0].Image != "postgres:18" {
		t.Errorf("pg-1 image %s", p.Spec.Containers[0].Image)
	}
	if st := f.getFlock("pg").Status; st.UpdatedReplicas != 1 || st.CurrentRevision != rev1 {
		t.Errorf("status = %+v", st)
	}
}

// A template whose pods never become Ready halts the rollout at the first
// replaced member, with a condition and an event; a fixed template resumes
// it without anyone deleting the stuck pod. Meanwhile a member below the
// halt that loses its pod gets the current (working) revision back.
func TestHaltedRolloutResumesWhenTemplateIsFixed(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(newFlock("pg", 3))
	f.settle("pg")
	rev1 := f.getFlock("pg").Status.UpdateRevision

	f.updateFlock("pg", func(fl *v1alpha1.Flock) {
		fl.Spec.Template.Annotations = map[string]string{neverReady: "true"}
	})
	broken := Revision(&f.getFlock("pg").Spec.Template)
	f.members.ops = nil
	f.events()
	f.roll("pg", func() {})
	if got := deletions(f.members.ops); !slices.Equal(got, []string{"pg-2"}) {
		t.Fatalf("deleted %v, want only pg-2", got)
	}
	if got := f.podRevisions(); got["pg-2"] != broken || got["pg-1"] != rev1 || got["pg-0"] != rev1 {
		t.Fatalf("revisions = %v", got)
	}
	if c := f.condition("pg", v1alpha1.FlockProgressing); c.Reason != ReasonRollingUpdate {
		t.Fatalf("Progressing before %v = %+v", testHaltAfter, c)
	}
	res := f.syncResult("pg")
	if res.RequeueAfter <= 0 || res.RequeueAfter > testHaltAfter {
		t.Errorf("RequeueAfter = %v, want at most %v", res.RequeueAfter, testHaltAfter)
	}

	f.clock.Step(testHaltAfter)
	f.mustSync("pg")
	c := f.condition("pg", v1alpha1.FlockProgressing)
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonRolloutHalted ||
		!strings.Contains(c.Message, "halted at pod pg-2 on node n-c: it has not become Ready within 30s of its creation (readiness probe failed)") {
		t.Fatalf("Progressing = %+v", c)
	}
	if !hasEvent(f.events(), "Warning RolloutHalted", "pg-2", broken) {
		t.Error("no RolloutHalted event")
	}
	f.mustSync("pg")
	if hasEvent(f.events(), "Warning RolloutHalted") {
		t.Error("RolloutHalted event repeated without a change")
	}

	// A member below the halt loses its pod: it comes back working.
	f.deletePod("pg-0")
	f.roll("pg", func() {})
	if p := f.pod("pg-0"); podRevision(p) != rev1 || !isRunningAndReady(p) {
		t.Fatalf("pg-0 came back at %s (ready %v)", podRevision(p), isRunningAndReady(p))
	}

	// Fixing the template resumes the rollout: pg-2 (not Ready) is
	// replaced at once, then the others in order.
	f.updateFlock("pg", func(fl *v1alpha1.Flock) {
		fl.Spec.Template.Annotations = nil
		fl.Spec.Template.Spec.Containers[0].Image = "postgres:18"
	})
	fixed := Revision(&f.getFlock("pg").Spec.Template)
	f.members.ops = nil
	f.roll("pg", func() {})
	if got := deletions(f.members.ops); !slices.Equal(got, []string{"pg-2", "pg-1", "pg-0"}) {
		t.Fatalf("deleted %v", got)
	}
	st := f.getFlock("pg").Status
	if st.CurrentRevision != fixed || st.ReadyReplicas != 3 || st.UpdatedReplicas != 3 {
		t.Fatalf("status = %+v", st)
	}
	if c := f.condition("pg", v1alpha1.FlockProgressing); c.Reason != ReasonComplete {
		t.Errorf("Progressing = %+v", c)
	}
}

func TestHaltedAtOnceByCrashingContainer(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	f.createFlock(newFlock("pg", 2))
	f.settle("pg")
	f.updateFlock("pg", setImage("postgres:nope"))
	f.mustSync("pg")
	f.mustSync("pg")
	f.updatePod("pg-1", func(p *corev1.Pod) {
		p.Spec.NodeName = "n-b"
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "db", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"},
		}}}
	})
	f.mustSync("pg")
	if c := f.condition("pg", v1alpha1.FlockProgressing); c.Reason != ReasonRolloutHalted ||
		!strings.Contains(c.Message, "container db is in ImagePullBackOff: not found") {
		t.Fatalf("Progressing = %+v", c)
	}
}

func TestRevisionHistoryLimit(t *testing.T) {
	f := newFixture(t, "n-a")
	fl := newFlock("pg", 1)
	two := int32(2)
	fl.Spec.RevisionHistoryLimit = &two
	f.createFlock(fl)
	f.settle("pg")
	var revs []string
	revs = append(revs, f.getFlock("pg").Status.UpdateRevision)
	for i := range 4 {
		f.updateFlock("pg", setImage(fmt.Sprintf("postgres:%d", 20+i)))
		revs = append(revs, Revision(&f.getFlock("pg").Spec.Template))
		f.settle("pg")
	}
	var have []string
	for _, obj := range f.revisions.List() {
		have = append(have, revisionOf(obj.(*appsv1.ControllerRevision)))
	}
	slices.Sort(have)
	want := slices.Clone(revs[2:]) // the live one and the 2 before it
	slices.Sort(want)
	if !slices.Equal(have, want) {
		t.Fatalf("revisions kept = %v, want %v (all: %v)", have, want, revs)
	}

	// Going back to a kept template makes it the newest revision again.
	f.updateFlock("pg", setImage("postgres:21"))
	f.settle("pg")
	cr, ok := f.history.get(testNamespace, RevisionName("pg", revs[2]))
	if !ok || cr.Revision != 6 {
		t.Fatalf("revision %s after rollback = %+v", revs[2], cr)
	}
	if got := f.podRevisions(); got["pg-0"] != revs[2] {
		t.Errorf("pod revision = %v", got)
	}
}

func TestRevisionWriteFailureDoesNotStopTheSync(t *testing.T) {
	f := newFixture(t, "n-a")
	f.createFlock(newFlock("pg", 1))
	f.history.failures["CreateRevision"] = &injector{err: fmt.Errorf("forbidden"), times: 1}
	if err := f.sync("pg"); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("sync error = %v", err)
	}
	if f.pod("pg-0") == nil {
		t.Fatal("no pod created while the revision could not be written")
	}
	f.settle("pg")
	if _, ok := f.history.get(testNamespace, RevisionName("pg", f.getFlock("pg").Status.UpdateRevision)); !ok {
		t.Fatal("revision not written on retry")
	}
}

func TestOrphanRevisionIsAdopted(t *testing.T) {
	f := newFixture(t, "n-a")
	fl := newFlock("pg", 1)
	cr := NewControllerRevision(fl, &fl.Spec.Template, Revision(&fl.Spec.Template), 7)
	cr.OwnerReferences = nil
	if err := f.revisions.Add(cr); err != nil {
		t.Fatal(err)
	}
	f.createFlock(fl)
	f.settle("pg")
	got, _ := f.history.get(testNamespace, cr.Name)
	if !isControlledBy(got, fl) || got.Revision != 7 {
		t.Fatalf("revision = %+v", got)
	}
}

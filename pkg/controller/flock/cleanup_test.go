package flock

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// helpers returns the data helper pods of a Flock (in the server's
// namespace) that are not being deleted, by name.
func (f *fixture) helpers(name string) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for _, p := range f.allPods() {
		if p.Namespace == DefaultHelperNamespace && p.Labels[LabelHelper] != "" && p.Labels[v1alpha1.LabelFlockName] == name && p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out
}

// helperPod returns a helper pod of Flock name, or nil.
func (f *fixture) helperPod(name, job string, ord int32) *corev1.Pod {
	p, err := f.members.getPod(DefaultHelperNamespace, HelperPodName(job, f.getFlock(name).UID, ord))
	if err != nil {
		return nil
	}
	return p
}

// pgDir is the data directory of Flock pg of the fixture (UID flock-pg).
const pgDir = "/var/lib/flock/db/pg-flock-pg"

// flockExists reports whether a Flock is still stored.
func (f *fixture) flockExists(name string) bool {
	_, err := f.flockClient.FlockV1alpha1().Flocks(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	return err == nil
}

// settleDeletedData makes Flock name of replicas members whose data goes
// with it (whenDeleted: Delete), with graceful pod deletion, and settles it.
func (f *fixture) settleDeletedData(name string, replicas int32) {
	f.members.graceful = true
	f.createFlock(withRetention(newFlock(name, replicas), v1alpha1.RetainRetentionPolicy, v1alpha1.DeleteRetentionPolicy))
	f.settle(name)
}

// mustFinishCleanup runs the helper pods of deleted Flock name and syncs
// it (at most 10 times) until it is gone, then checks that nothing is left
// (mustBeGoneWithNothingLeft).
func (f *fixture) mustFinishCleanup(name string) {
	f.t.Helper()
	f.runPods()
	f.runPods()
	for i := 0; i < 10 && f.flockExists(name); i++ {
		f.mustSync(name)
		f.finishTerminating()
	}
	f.mustBeGoneWithNothingLeft(name)
}

// mustBeGoneWithNothingLeft fails the test unless Flock name is gone, and
// so are its pods (once the terminating ones finish), its helper pods, and
// the volumes and claims.
func (f *fixture) mustBeGoneWithNothingLeft(name string) {
	f.t.Helper()
	if f.flockExists(name) {
		f.t.Fatalf("the Flock is still there: %+v", f.getFlock(name).Status)
	}
	f.finishTerminating()
	if got := f.podNames(); len(got) != 0 {
		f.t.Errorf("pods left: %v", got)
	}
	if len(f.helpers(name)) != 0 || len(f.data.volumes) != 0 || len(f.data.claims) != 0 {
		f.t.Errorf("left: helpers %v, volumes %v, claims %v", f.helpers(name), f.data.volumes, f.data.claims)
	}
}

func withRetention(fl *v1alpha1.Flock, whenScaled, whenDeleted v1alpha1.RetentionPolicyType) *v1alpha1.Flock {
	fl.Spec.Storage.Retention = v1alpha1.RetentionPolicy{WhenScaled: whenScaled, WhenDeleted: whenDeleted}
	return fl
}

func TestScaleDownWithDeleteRetentionRemovesData(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(withRetention(newFlock("pg", 3), v1alpha1.DeleteRetentionPolicy, v1alpha1.RetainRetentionPolicy))
	f.settle("pg")
	if fl := f.getFlock("pg"); !slices.Contains(fl.Finalizers, v1alpha1.FinalizerDataCleanup) {
		t.Fatalf("finalizers = %v", fl.Finalizers)
	}
	pv2 := PersistentVolumeName("flock-pg", 2)
	if _, ok := f.data.volumes[pv2]; !ok {
		t.Fatalf("no volume %s: %v", pv2, f.data.volumes)
	}
	f.events()

	f.scale("pg", 2)
	f.mustSync("pg") // deletes pg-2
	if f.pod("pg-2") != nil {
		t.Fatal("pg-2 not deleted")
	}
	f.mustSync("pg") // starts the helper
	h := f.helperPod("pg", HelperCleanup, 2)
	if h == nil || h.Spec.NodeName != "n-c" || h.Spec.Volumes[0].HostPath.Path != "/var/lib/flock/db" ||
		h.Spec.Containers[0].Image != DefaultCleanupImage || h.Namespace != DefaultHelperNamespace {
		t.Fatalf("helper = %+v", h)
	}
	if m := f.memberNodes("pg"); m[2] != "n-c" {
		t.Fatalf("member 2 left status before its data was removed: %v", m)
	}
	st := f.getFlock("pg").Status
	if msg := st.Members[2].Message; !strings.Contains(msg, "removing data directory "+pgDir+" on node n-c (helper pod flock-system/"+h.Name+")") {
		t.Errorf("member 2 message = %q", msg)
	}
	if c := f.condition("pg", v1alpha1.FlockProgressing); c.Reason != ReasonScalingDown {
		t.Errorf("Progressing = %+v", c)
	}

	f.runPods() // Running
	f.mustSync("pg")
	if len(f.helpers("pg")) != 1 || len(f.getFlock("pg").Status.Members) != 3 || len(f.data.claims) != 3 {
		t.Fatal("helper, member or claim gone while the helper runs")
	}
	f.runPods() // Succeeded
	f.settle("pg")
	if got := f.helpers("pg"); len(got) != 0 {
		t.Errorf("helpers left: %v", got)
	}
	if m := f.memberNodes("pg"); len(m) != 2 {
		t.Errorf("members = %v", m)
	}
	if _, ok := f.data.volumes[pv2]; ok || f.data.claims[testNamespace+"/data-pg-2"] != nil || len(f.data.volumes) != 2 {
		t.Errorf("volumes %v, claims %v", f.data.volumes, f.data.claims)
	}
	if !hasEvent(f.events(), "Normal DataCleanupDone", pgDir, "member 2", "n-c") {
		t.Error("no DataCleanupDone event")
	}
	if c := f.condition("pg", v1alpha1.FlockProgressing); c.Reason != ReasonComplete {
		t.Errorf("Progressing = %+v", c)
	}
}

func TestScaleDownWithRetainKeepsData(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(newFlock("pg", 3)) // Retain, Retain (the defaults)
	f.settle("pg")
	if fl := f.getFlock("pg"); len(fl.Finalizers) != 0 {
		t.Fatalf("finalizers = %v", fl.Finalizers)
	}
	f.scale("pg", 1)
	f.settle("pg")
	f.settle("pg")
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0"}) || len(f.helpers("pg")) != 0 {
		t.Fatalf("pods = %v, helpers %v (no cleanup pod may run)", got, f.helpers("pg"))
	}
	if len(f.data.volumes) != 3 || len(f.data.claims) != 3 {
		t.Errorf("volumes %d, claims %d: Retain keeps them", len(f.data.volumes), len(f.data.claims))
	}
	// The member that comes back finds its node and data again.
	f.scale("pg", 2)
	f.settle("pg")
	if p := f.pod("pg-1"); p == nil || p.Spec.NodeName != "n-b" {
		t.Fatalf("pg-1 = %+v", p)
	}
	if len(f.data.volumes) != 3 {
		t.Errorf("volumes %v", f.data.volumes)
	}
}

func TestScaleUpWhileDataIsRemovedWaitsForTheHelper(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(withRetention(newFlock("pg", 3), v1alpha1.DeleteRetentionPolicy, v1alpha1.RetainRetentionPolicy))
	f.settle("pg")
	oldPV := f.data.volumes[PersistentVolumeName("flock-pg", 2)].UID
	f.scale("pg", 2)
	f.mustSync("pg")
	f.mustSync("pg")
	f.runPods() // the helper runs
	f.scale("pg", 3)
	f.mustSync("pg")
	if f.pod("pg-2") != nil {
		t.Fatal("pg-2 created while its data directory is being removed")
	}
	c := f.condition("pg", v1alpha1.FlockMembersBlocked)
	if c.Reason != ReasonDataCleanup || !strings.Contains(c.Message, "member 2 waits for helper pod flock-system/flock-cleanup-flock-pg-2 to finish removing its data directory on node n-c") {
		t.Fatalf("MembersBlocked = %+v", c)
	}
	f.settle("pg")
	if p := f.pod("pg-2"); p == nil || p.Spec.NodeName != "n-c" || !isRunningAndReady(p) {
		t.Fatalf("pg-2 = %+v", p)
	}
	if len(f.helpers("pg")) != 0 {
		t.Error("helper left")
	}
	if pv := f.data.volumes[PersistentVolumeName("flock-pg", 2)]; pv == nil || pv.UID == oldPV || pv.Annotations[AnnotationPrepared] != "true" {
		t.Errorf("member 2 did not get a fresh, prepared volume: %+v", pv)
	}
}

func TestFailedCleanupIsRetried(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	f.createFlock(withRetention(newFlock("pg", 2), v1alpha1.DeleteRetentionPolicy, v1alpha1.RetainRetentionPolicy))
	f.settle("pg")
	f.scale("pg", 1)
	f.mustSync("pg")
	f.mustSync("pg")
	name := HelperPodName(HelperCleanup, "flock-pg", 1)
	h, err := f.members.getPod(DefaultHelperNamespace, name)
	if err != nil {
		t.Fatal(err)
	}
	h = h.DeepCopy()
	h.Status.Phase = corev1.PodFailed
	h.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "cleanup", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: metav1.NewTime(f.clock.Now())},
	}}}
	if err := f.pods.Update(h); err != nil {
		t.Fatal(err)
	}
	res := f.syncResult("pg")
	if res.RequeueAfter != helperRetryDelay || f.helperPod("pg", HelperCleanup, 1) == nil {
		t.Fatalf("RequeueAfter = %v; helper %v", res.RequeueAfter, f.helperPod("pg", HelperCleanup, 1))
	}
	if msg := f.getFlock("pg").Status.Members[1].Message; !strings.Contains(msg, "failed (exit code 1, Error) on node n-b; retrying at 2026-11-30T12:00:10Z") {
		t.Errorf("message = %q", msg)
	}
	f.clock.Step(helperRetryDelay)
	f.mustSync("pg") // deletes the failed helper
	if !hasEvent(f.events(), "Warning HelperFailed", name, "exit code 1") {
		t.Error("no HelperFailed event")
	}
	f.mustSync("pg") // a new attempt
	if h := f.helperPod("pg", HelperCleanup, 1); h == nil || h.Status.Phase != corev1.PodPending {
		t.Fatalf("no new helper: %+v", h)
	}
	f.settle("pg")
	if m := f.memberNodes("pg"); len(m) != 1 {
		t.Errorf("members = %v", m)
	}
}

func TestCleanupSkippedWhenNodeIsGone(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(withRetention(newFlock("pg", 3), v1alpha1.DeleteRetentionPolicy, v1alpha1.RetainRetentionPolicy))
	f.settle("pg")
	f.deleteNode("n-c")
	f.scale("pg", 2)
	f.settle("pg")
	if len(f.helpers("pg")) != 0 || f.pod("pg-2") != nil {
		t.Fatalf("pods = %v, helpers %v", f.podNames(), f.helpers("pg"))
	}
	if m := f.memberNodes("pg"); len(m) != 2 {
		t.Errorf("members = %v", m)
	}
	if len(f.data.volumes) != 2 || len(f.data.claims) != 2 {
		t.Errorf("member 2's claim and volume are not deleted: %v %v", f.data.volumes, f.data.claims)
	}
	if !hasEvent(f.events(), "Warning DataCleanupSkipped", "node n-c of member 2 is gone", pgDir) {
		t.Error("no DataCleanupSkipped event")
	}
}

func TestDeleteWithDeleteRetentionRemovesDataThenReleasesTheFlock(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.settleDeletedData("pg", 3)
	f.deleteNode("n-c") // member 2's node is lost: its directory there stays
	f.mustSync("pg")
	if fl := f.getFlock("pg"); !slices.Contains(fl.Finalizers, v1alpha1.FinalizerDataCleanup) {
		t.Fatalf("finalizers = %v", fl.Finalizers)
	}
	f.events()

	f.deleteFlock("pg")
	if !f.flockExists("pg") {
		t.Fatal("the finalizer did not hold the Flock")
	}
	f.mustSync("pg")
	// The member pods go first (pg-2's at once: its node is gone); no
	// helper while they terminate.
	if got := f.members.ops[len(f.members.ops)-3:]; !slices.Equal(got, []string{"delete pg-0", "delete pg-1", "force-delete pg-2"}) {
		t.Fatalf("ops = %v", got)
	}
	f.mustSync("pg")
	if len(f.helpers("pg")) != 0 {
		t.Fatal("helpers started while member pods terminate")
	}
	if msg := f.getFlock("pg").Status.Members[0].Message; msg != "data directory "+pgDir+" on node n-a is removed once pod pg-0 is gone" {
		t.Errorf("message = %q", msg)
	}
	f.finishTerminating()
	if res := f.syncResult("pg"); res.RequeueAfter != cleanupRecheck {
		t.Errorf("RequeueAfter = %v while the cleanups run, want %v", res.RequeueAfter, cleanupRecheck)
	}
	got := f.helpers("pg")
	if len(got) != 2 || f.helperPod("pg", HelperCleanup, 0).Spec.NodeName != "n-a" || f.helperPod("pg", HelperCleanup, 1).Spec.NodeName != "n-b" {
		t.Fatalf("helpers = %v", got)
	}
	if !hasEvent(f.events(), "Warning DataCleanupSkipped", "node n-c of member 2 is gone") {
		t.Error("no DataCleanupSkipped event for member 2")
	}
	if !f.flockExists("pg") {
		t.Fatal("the Flock went before its data")
	}
	f.mustFinishCleanup("pg")
}

// A Flock deleted under whenDeleted: Delete sends its members' writes at
// once, as a sync sends their creates (Options.MemberParallelism): the
// three member pods' deletes are in flight together, then the three
// cleanup helpers' creates (a barrier, bounded at 10 s, that writes one
// after another would only pass by its timeout); nothing is left when the
// Flock goes.
func TestDeleteRemovesItsMembersAtOnce(t *testing.T) {
	f := newFixtureWithConfig(t, fixtureConfig{verbosity: 4, memberParallelism: 4}, "n-a", "n-b", "n-c")
	f.settleDeletedData("pg", 3)
	f.deleteFlock("pg")

	deletes := newInFlight(3)
	f.members.beforeWrite = func(p *corev1.Pod) {
		if p.Namespace == testNamespace {
			deletes.wait()
		}
	}
	f.mustSync("pg")
	if most := deletes.most(); most < 3 {
		t.Errorf("at most %d member pod deletes were in flight at once, want 3", most)
	}
	if got := f.members.ops[len(f.members.ops)-3:]; len(slices.DeleteFunc(slices.Clone(got), func(op string) bool { return strings.HasPrefix(op, "delete pg-") })) != 0 {
		t.Fatalf("last ops = %v, want the three member pods' deletes", got)
	}
	f.finishTerminating()
	cleanups := newInFlight(3)
	f.members.beforeWrite = func(p *corev1.Pod) {
		if p.Labels[LabelHelper] == HelperCleanup {
			cleanups.wait()
		}
	}
	f.mustSync("pg")
	if most := cleanups.most(); most < 3 {
		t.Errorf("at most %d cleanup helper creates were in flight at once, want 3", most)
	}
	for ord := range int32(3) {
		if h := f.helperPod("pg", HelperCleanup, ord); h == nil {
			t.Errorf("member %d has no cleanup helper", ord)
		}
	}
	f.members.beforeWrite = nil

	f.mustFinishCleanup("pg")
}

// The removals of one sync share their reads of the API server: a member's
// volume is looked up in the sync's one live list of the Flock's volumes,
// and the helper pods a member's last step looks for come from one live
// list a sync, not one a member (at 500 members, 1,000 round trips a sync).
func TestDeleteSharesItsReadsAcrossMembers(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.settleDeletedData("pg", 3)
	f.deleteFlock("pg")
	most := 0
	for i := 0; i < 20 && f.flockExists("pg"); i++ {
		before := f.members.calls["ListPodsLive"]
		f.mustSync("pg")
		most = max(most, f.members.calls["ListPodsLive"]-before)
		f.runPods()
		f.finishTerminating()
	}
	if most > 2 {
		t.Errorf("a sync listed pods from the API server %d times, want at most 2 (the members' helpers once, and the last look before the finalizer goes)", most)
	}
	if f.data.liveVolumeGets != 0 {
		t.Errorf("%d volumes read one by one from the API server, want none (the sync's list has them)", f.data.liveVolumeGets)
	}
	f.mustBeGoneWithNothingLeft("pg")
}

// A Flock deleted right after a sync made its member's volume, claim and
// prepare helper, while the caches have not seen them yet (the fault suite
// found the volume left after kube-apiserver restarted): the removal reads
// the API server before it lets the Flock go, and nothing is left.
func TestDeleteRemovesDataTheCacheHasNotSeen(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	f.members.instantPrepare = false
	f.createFlock(withRetention(newFlock("pg", 2), v1alpha1.DeleteRetentionPolicy, v1alpha1.DeleteRetentionPolicy))
	f.mustSync("pg")
	helpers := f.helpers("pg")
	if len(f.data.volumes) != 2 || len(helpers) != 2 {
		t.Fatalf("after the first sync: volumes %v, helpers %v; want the two members' volumes and prepare helpers", f.data.volumes, helpers)
	}
	f.data.hide()
	for _, h := range helpers {
		if err := f.members.pods.Delete(h); err != nil {
			t.Fatal(err)
		}
		f.members.uncachedPods = append(f.members.uncachedPods, h)
	}

	f.deleteFlock("pg")
	for i := 0; i < 20 && f.flockExists("pg"); i++ {
		f.mustSync("pg")
		f.runPods()
		f.finishTerminating()
	}
	if f.flockExists("pg") {
		t.Fatalf("the Flock is still held: %+v", f.getFlock("pg").Status)
	}
	var left []string
	for _, m := range []map[string]*corev1.PersistentVolume{f.data.volumes, f.data.uncachedVolumes} {
		left = slices.AppendSeq(left, maps.Keys(m))
	}
	for _, m := range []map[string]*corev1.PersistentVolumeClaim{f.data.claims, f.data.uncachedClaims} {
		left = slices.AppendSeq(left, maps.Keys(m))
	}
	for _, p := range f.members.uncachedPods {
		left = append(left, p.Name)
	}
	left = slices.AppendSeq(left, maps.Keys(f.helpers("pg")))
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// whenScaled: Retain, whenDeleted: Delete: members a scale down left with
// their data are not in status any more, and deleting the Flock removes
// their data too (found by the fault suite: their volumes were left).
func TestDeleteRemovesDataRetainedByScaleDown(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(withRetention(newFlock("pg", 3), v1alpha1.RetainRetentionPolicy, v1alpha1.DeleteRetentionPolicy))
	f.settle("pg")
	f.scale("pg", 1)
	f.settle("pg")
	if m := f.memberNodes("pg"); len(m) != 1 || len(f.data.volumes) != 3 || len(f.data.claims) != 3 {
		t.Fatalf("members %v, volumes %v, claims %v: a Retain scale down keeps the data", m, f.data.volumes, f.data.claims)
	}
	f.events()

	f.deleteFlock("pg")
	var cleaned []string
	for i := 0; i < 20 && f.flockExists("pg"); i++ {
		f.mustSync("pg")
		for _, ord := range []int32{1, 2} {
			if !f.flockExists("pg") {
				break
			}
			if h := f.helperPod("pg", HelperCleanup, ord); h != nil && !slices.Contains(cleaned, h.Spec.NodeName) {
				cleaned = append(cleaned, h.Spec.NodeName)
			}
		}
		f.runPods()
		f.finishTerminating()
	}
	if f.flockExists("pg") {
		t.Fatalf("the Flock is still held: %+v", f.getFlock("pg").Status)
	}
	slices.Sort(cleaned)
	if !slices.Equal(cleaned, []string{"n-b", "n-c"}) {
		t.Errorf("cleanup helpers of the scaled-down members ran on %v, want their nodes n-b and n-c", cleaned)
	}
	if len(f.data.volumes) != 0 || len(f.data.claims) != 0 {
		t.Errorf("left: volumes %v, claims %v", f.data.volumes, f.data.claims)
	}
	if !hasEvent(f.events(), "Normal DataCleanupDone", pgDir, "member 2", "n-c") {
		t.Error("no DataCleanupDone event for member 2")
	}
}

func TestDeleteWithRetainNeedsNoFinalizer(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	f.createFlock(newFlock("pg", 2))
	f.settle("pg")
	f.deleteFlock("pg")
	if f.flockExists("pg") {
		t.Fatal("a Retain Flock was held")
	}
}

func TestDeleteWithOrphanedDependentsKeepsData(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	f.createFlock(withRetention(newFlock("pg", 2), v1alpha1.DeleteRetentionPolicy, v1alpha1.DeleteRetentionPolicy))
	f.settle("pg")
	f.deleteFlock("pg", metav1.FinalizerOrphanDependents)
	f.mustSync("pg")
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0", "pg-1"}) {
		t.Fatalf("pods = %v", got)
	}
	if fl := f.getFlock("pg"); slices.Contains(fl.Finalizers, v1alpha1.FinalizerDataCleanup) {
		t.Fatalf("finalizers = %v", fl.Finalizers)
	}
	if !hasEvent(f.events(), "Normal DataCleanupSkipped", "orphaned dependents") {
		t.Error("no DataCleanupSkipped event")
	}
	if len(f.data.volumes) != 2 || len(f.data.claims) != 2 {
		t.Errorf("volumes %v, claims %v", f.data.volumes, f.data.claims)
	}
}

// whenDeleted: Retain with whenScaled: Delete: deleting the Flock finishes
// the cleanup of a scale down in progress, and leaves the members' data.
func TestDeleteDuringScaleDownCleanup(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	f.createFlock(withRetention(newFlock("pg", 2), v1alpha1.DeleteRetentionPolicy, v1alpha1.RetainRetentionPolicy))
	f.settle("pg")
	f.scale("pg", 1)
	f.mustSync("pg")
	f.mustSync("pg")
	f.deleteFlock("pg")
	f.mustSync("pg")
	if !f.flockExists("pg") || f.pod("pg-0") == nil || f.helperPod("pg", HelperCleanup, 1) == nil {
		t.Fatalf("flock exists %v, pods %v, helpers %v", f.flockExists("pg"), f.podNames(), f.helpers("pg"))
	}
	f.runPods()
	f.runPods()
	for i := 0; i < 10 && f.flockExists("pg"); i++ {
		f.mustSync("pg")
	}
	if f.flockExists("pg") {
		t.Fatal("the Flock is still held")
	}
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0"}) {
		t.Errorf("pods = %v (the member's pod is the garbage collector's)", got)
	}
	if _, ok := f.data.volumes[PersistentVolumeName("flock-pg", 0)]; !ok || len(f.data.volumes) != 1 {
		t.Errorf("volumes %v: member 0's stays, member 1's goes", f.data.volumes)
	}
}

func TestFinalizerFollowsRetention(t *testing.T) {
	f := newFixture(t, "n-a")
	f.createFlock(newFlock("pg", 1))
	f.mustSync("pg")
	f.updateFlock("pg", func(fl *v1alpha1.Flock) {
		fl.Spec.Storage.Retention.WhenDeleted = v1alpha1.DeleteRetentionPolicy
	})
	f.mustSync("pg")
	if fl := f.getFlock("pg"); !slices.Equal(fl.Finalizers, []string{v1alpha1.FinalizerDataCleanup}) {
		t.Fatalf("finalizers = %v", fl.Finalizers)
	}
	f.updateFlock("pg", func(fl *v1alpha1.Flock) {
		fl.Spec.Storage.Retention.WhenDeleted = v1alpha1.RetainRetentionPolicy
		fl.Finalizers = append(fl.Finalizers, "example.com/other")
	})
	f.mustSync("pg")
	if fl := f.getFlock("pg"); !slices.Equal(fl.Finalizers, []string{"example.com/other"}) {
		t.Fatalf("finalizers = %v", fl.Finalizers)
	}
}

package flock

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// helpers returns the cleanup pods of a Flock, by name.
func (f *fixture) helpers(name string) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for _, p := range f.allPods() {
		if p.Labels[LabelCleanupOf] == name {
			out[p.Name] = p
		}
	}
	return out
}

// flockExists reports whether a Flock is still stored.
func (f *fixture) flockExists(name string) bool {
	_, err := f.flockClient.FlockV1alpha1().Flocks(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	return err == nil
}

func withRetention(fl *v1alpha1.Flock, whenScaled, whenDeleted v1alpha1.RetentionPolicyType) *v1alpha1.Flock {
	fl.Spec.Storage.Retention = v1alpha1.RetentionPolicy{WhenScaled: whenScaled, WhenDeleted: whenDeleted}
	return fl
}

func TestNewCleanupPod(t *testing.T) {
	fl := newFlock("pg", 3)
	p := NewCleanupPod(fl, v1alpha1.FlockMember{Ordinal: 2, Node: "n-c"}, "busybox:1.36", "/srv/flock")
	if p.Name != "pg-2-cleanup" || p.Namespace != testNamespace || p.Spec.NodeName != "n-c" ||
		p.Spec.RestartPolicy != corev1.RestartPolicyNever || p.Labels[LabelCleanupOf] != "pg" {
		t.Errorf("pod = %+v", p.ObjectMeta)
	}
	if _, ok := ParseOrdinal("pg", p.Name); ok {
		t.Error("a cleanup pod name parses as a member pod name")
	}
	if ord, ok := cleanupOrdinal("pg", p.Name); !ok || ord != 2 {
		t.Errorf("cleanupOrdinal = %d, %v", ord, ok)
	}
	// Only the Flock's data directory, nothing else of the host.
	if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].HostPath == nil || p.Spec.Volumes[0].HostPath.Path != "/srv/flock/db/pg" {
		t.Errorf("volumes = %+v", p.Spec.Volumes)
	}
	if p.Spec.HostNetwork || p.Spec.HostPID || p.Spec.HostIPC || len(p.Spec.Containers) != 1 {
		t.Errorf("spec = %+v", p.Spec)
	}
	c := p.Spec.Containers[0]
	if c.Image != "busybox:1.36" || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != cleanupMountPath ||
		!strings.Contains(strings.Join(c.Command, " "), "rm -rf -- /flock-data/* /flock-data/.[!.]* /flock-data/..?*") {
		t.Errorf("container = %+v", c)
	}
	if len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Operator != corev1.TolerationOpExists || p.Spec.Tolerations[0].Key != "" {
		t.Errorf("tolerations = %+v (want one that tolerates everything)", p.Spec.Tolerations)
	}
	// Owned (so it is collected with the Flock), but not controlled (so it
	// is never taken for a member).
	if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != fl.UID || metav1.GetControllerOf(p) != nil {
		t.Errorf("owners = %+v", p.OwnerReferences)
	}
}

func TestScaleDownWithDeleteRetentionRemovesData(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(withRetention(newFlock("pg", 3), v1alpha1.DeleteRetentionPolicy, v1alpha1.RetainRetentionPolicy))
	f.settle("pg")
	if fl := f.getFlock("pg"); !slices.Contains(fl.Finalizers, v1alpha1.FinalizerDataCleanup) {
		t.Fatalf("finalizers = %v", fl.Finalizers)
	}
	f.events()

	f.scale("pg", 2)
	f.mustSync("pg") // deletes pg-2
	if f.pod("pg-2") != nil {
		t.Fatal("pg-2 not deleted")
	}
	f.mustSync("pg") // starts the helper
	h := f.helpers("pg")["pg-2-cleanup"]
	if h == nil || h.Spec.NodeName != "n-c" || h.Spec.Volumes[0].HostPath.Path != "/var/lib/flock/db/pg" ||
		h.Spec.Containers[0].Image != DefaultCleanupImage {
		t.Fatalf("helper = %+v", h)
	}
	if m := f.memberNodes("pg"); m[2] != "n-c" {
		t.Fatalf("member 2 left status before its data was removed: %v", m)
	}
	st := f.getFlock("pg").Status
	if msg := st.Members[2].Message; msg != "removing data directory /var/lib/flock/db/pg on node n-c (pod pg-2-cleanup)" {
		t.Errorf("member 2 message = %q", msg)
	}
	if c := f.condition("pg", v1alpha1.FlockProgressing); c.Reason != ReasonScalingDown {
		t.Errorf("Progressing = %+v", c)
	}
	if !hasEvent(f.events(), "Normal DataCleanupStarted", "/var/lib/flock/db/pg", "member 2", "n-c", "pg-2-cleanup") {
		t.Error("no DataCleanupStarted event")
	}

	f.runPods() // Running
	f.mustSync("pg")
	if len(f.helpers("pg")) != 1 || len(f.getFlock("pg").Status.Members) != 3 {
		t.Fatal("helper or member gone while the helper runs")
	}
	f.runPods() // Succeeded
	f.mustSync("pg")
	if got := f.helpers("pg"); len(got) != 0 {
		t.Errorf("helpers left: %v", got)
	}
	if m := f.memberNodes("pg"); len(m) != 2 {
		t.Errorf("members = %v", m)
	}
	if !hasEvent(f.events(), "Normal DataCleanupDone", "/var/lib/flock/db/pg", "member 2", "n-c") {
		t.Error("no DataCleanupDone event")
	}
	f.mustSync("pg")
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
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0"}) {
		t.Fatalf("pods = %v (no cleanup pod may run)", got)
	}
	if hasEvent(f.events(), "Normal DataCleanupStarted") {
		t.Error("cleanup with Retain")
	}
	// The member that comes back finds its node (and data) again.
	f.scale("pg", 2)
	f.settle("pg")
	if p := f.pod("pg-1"); p == nil || p.Spec.NodeName != "n-b" {
		t.Fatalf("pg-1 = %+v", p)
	}
}

func TestScaleUpWhileDataIsRemovedWaitsForTheHelper(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(withRetention(newFlock("pg", 3), v1alpha1.DeleteRetentionPolicy, v1alpha1.RetainRetentionPolicy))
	f.settle("pg")
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
	if c.Reason != ReasonDataCleanup || c.Message != "member 2 waits for pod pg-2-cleanup to finish removing its data directory on node n-c" {
		t.Fatalf("MembersBlocked = %+v", c)
	}
	f.settle("pg")
	if p := f.pod("pg-2"); p == nil || p.Spec.NodeName != "n-c" || !isRunningAndReady(p) {
		t.Fatalf("pg-2 = %+v", p)
	}
	if len(f.helpers("pg")) != 0 {
		t.Error("helper left")
	}
}

func TestFailedCleanupIsRetried(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	f.createFlock(withRetention(newFlock("pg", 2), v1alpha1.DeleteRetentionPolicy, v1alpha1.RetainRetentionPolicy))
	f.settle("pg")
	f.scale("pg", 1)
	f.mustSync("pg")
	f.mustSync("pg")
	f.updatePod("pg-1-cleanup", func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "cleanup", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: metav1.NewTime(f.clock.Now())},
		}}}
	})
	res := f.syncResult("pg")
	if res.RequeueAfter != cleanupRetryDelay || f.pod("pg-1-cleanup") == nil {
		t.Fatalf("RequeueAfter = %v; helper %v", res.RequeueAfter, f.pod("pg-1-cleanup"))
	}
	if msg := f.getFlock("pg").Status.Members[1].Message; !strings.Contains(msg, "failed to remove data directory /var/lib/flock/db/pg on node n-b (exit code 1, Error); retrying at 2026-11-30T12:00:10Z") {
		t.Errorf("message = %q", msg)
	}
	f.clock.Step(cleanupRetryDelay)
	f.mustSync("pg") // deletes the failed helper
	if !hasEvent(f.events(), "Warning DataCleanupFailed", "pg-1-cleanup", "exit code 1") {
		t.Error("no DataCleanupFailed event")
	}
	f.mustSync("pg") // a new attempt
	if h := f.pod("pg-1-cleanup"); h == nil || h.Status.Phase != corev1.PodPending {
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
		t.Fatalf("pods = %v", f.podNames())
	}
	if m := f.memberNodes("pg"); len(m) != 2 {
		t.Errorf("members = %v", m)
	}
	if !hasEvent(f.events(), "Warning DataCleanupSkipped", "node n-c of member 2 is gone", "/var/lib/flock/db/pg") {
		t.Error("no DataCleanupSkipped event")
	}
}

func TestDeleteWithDeleteRetentionRemovesDataThenReleasesTheFlock(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.members.graceful = true
	f.createFlock(withRetention(newFlock("pg", 3), v1alpha1.RetainRetentionPolicy, v1alpha1.DeleteRetentionPolicy))
	f.settle("pg")
	f.deleteNode("n-c") // member 2's node is lost: its cleanup is skipped
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
	if msg := f.getFlock("pg").Status.Members[0].Message; msg != "data directory /var/lib/flock/db/pg on node n-a is removed once pod pg-0 is gone" {
		t.Errorf("message = %q", msg)
	}
	f.finishTerminating()
	f.mustSync("pg")
	if got := f.helpers("pg"); len(got) != 2 || got["pg-0-cleanup"].Spec.NodeName != "n-a" || got["pg-1-cleanup"].Spec.NodeName != "n-b" {
		t.Fatalf("helpers = %v", got)
	}
	if !hasEvent(f.events(), "Warning DataCleanupSkipped", "node n-c of member 2 is gone") {
		t.Error("no DataCleanupSkipped event for member 2")
	}
	if !f.flockExists("pg") {
		t.Fatal("the Flock went before its data")
	}
	f.runPods()
	f.runPods()
	f.mustSync("pg")
	if f.flockExists("pg") {
		t.Fatalf("the Flock is still there: %+v", f.getFlock("pg"))
	}
	f.finishTerminating()
	if got := f.podNames(); len(got) != 0 {
		t.Errorf("pods left: %v", got)
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
	if !f.flockExists("pg") || f.pod("pg-0") == nil || f.pod("pg-1-cleanup") == nil {
		t.Fatalf("flock exists %v, pods %v", f.flockExists("pg"), f.podNames())
	}
	f.runPods()
	f.runPods()
	f.mustSync("pg")
	if f.flockExists("pg") {
		t.Fatal("the Flock is still held")
	}
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0"}) {
		t.Errorf("pods = %v (the member's pod is the garbage collector's)", got)
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

func TestCleanupSkippedInTerminatingNamespace(t *testing.T) {
	f := newFixture(t, "n-a")
	f.createFlock(withRetention(newFlock("pg", 1), v1alpha1.RetainRetentionPolicy, v1alpha1.DeleteRetentionPolicy))
	f.settle("pg")
	f.deleteFlock("pg")
	f.mustSync("pg") // deletes pg-0
	// As the NamespaceLifecycle admission plugin refuses it.
	terminating := apierrors.NewForbidden(podResource, "pg-0-cleanup", errors.New("unable to create new content in namespace db because it is being terminated"))
	terminating.ErrStatus.Details.Causes = append(terminating.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause})
	f.members.failNext("CreatePod", 1, terminating)
	f.mustSync("pg")
	if f.flockExists("pg") {
		t.Fatal("the Flock is held in a namespace being deleted")
	}
	if !hasEvent(f.events(), "Warning DataCleanupSkipped", "namespace db is being deleted", "/var/lib/flock/db/pg", "n-a") {
		t.Error("no DataCleanupSkipped event")
	}
}

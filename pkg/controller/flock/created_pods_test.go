package flock

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// createOps returns the creates of the member pods of Flock pg in ops,
// refused ones included.
func createOps(ops []string) []string {
	var out []string
	for _, op := range ops {
		if f := strings.Fields(op); len(f) >= 2 && (f[0] == "create" || f[0] == "already-exists") && strings.HasPrefix(f[1], "pg-") {
			out = append(out, f[0]+" "+f[1])
		}
	}
	return out
}

// createPair makes Flock pg of two members Parallel on two nodes (the
// pods created by the controller held back from the cache if cacheLag)
// and syncs it once; it returns the fixture and the creates it made.
func createPair(t *testing.T, cacheLag bool) (*fixture, []string) {
	t.Helper()
	f := newFixture(t, "n-a", "n-b")
	f.members.cacheLag = cacheLag
	fl := newFlock("pg", 2)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	f.mustSync("pg")
	want := []string{"create pg-0", "create pg-1"}
	if got := createOps(f.members.ops); !slices.Equal(got, want) {
		t.Fatalf("creates %v, want %v", got, want)
	}
	return f, want
}

func TestCreatedPodIsNotCreatedAgainWhileTheCacheIsBehind(t *testing.T) {
	f, want := createPair(t, true)
	// Syncs before the cache shows the pods send no create.
	f.mustSync("pg")
	f.clock.Step(30 * time.Second)
	f.mustSync("pg")
	if got := createOps(f.members.ops); !slices.Equal(got, want) {
		t.Fatalf("creates while the cache was behind %v, want only %v", got, want)
	}
	if err := f.members.deliverCreated(); err != nil {
		t.Fatal(err)
	}
	if n := f.controller.control.(*defaultFlockControl).created.len(); n != 0 {
		t.Errorf("%d pods still awaited after the cache showed them", n)
	}
	f.mustSync("pg")
	if got := createOps(f.members.ops); !slices.Equal(got, want) {
		t.Fatalf("creates after the cache caught up %v, want only %v", got, want)
	}

	// A pod deleted (its deletion delivered) is created again at once.
	f.members.cacheLag = false
	f.deletePod("pg-1")
	f.mustSync("pg")
	if got := createOps(f.members.ops); !slices.Equal(got, append(want, "create pg-1")) {
		t.Fatalf("creates after pg-1 was deleted %v, want pg-1 again", got)
	}
}

func TestCreatedPodNeverDeliveredIsCreatedAgainAfterTheTTL(t *testing.T) {
	f := newFixture(t, "n-a")
	f.members.cacheLag = true
	f.createFlock(newFlock("pg", 1))
	f.mustSync("pg")
	// The pod went before the cache ever showed it, and no event told.
	f.members.uncachedPods = nil
	f.mustSync("pg")
	if got := createOps(f.members.ops); !slices.Equal(got, []string{"create pg-0"}) {
		t.Fatalf("creates %v, want one within the TTL", got)
	}
	f.clock.Step(createdPodTTL + time.Second)
	f.mustSync("pg")
	if got := createOps(f.members.ops); !slices.Equal(got, []string{"create pg-0", "create pg-0"}) {
		t.Fatalf("creates %v, want pg-0 again after the TTL", got)
	}
}

func TestPodDeliveredAfterTheSnapshotIsNotCreatedAgain(t *testing.T) {
	f, want := createPair(t, false)
	// A sync whose snapshot was taken just before the informer delivered
	// the pods: the snapshot has none, the cache has both, and neither is
	// awaited any more.
	control := f.controller.control.(*defaultFlockControl)
	if n := control.created.len(); n != 0 {
		t.Fatalf("%d pods awaited after their delivery, want 0", n)
	}
	cur, err := f.flockClient.FlockV1alpha1().Flocks(testNamespace).Get(f.ctx, "pg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := control.Sync(f.ctx, cur, nil, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if got := createOps(f.members.ops); !slices.Equal(got, want) {
		t.Fatalf("creates %v, want no create of a pod the cache has", got)
	}
}

// A member scaled away while its pod's create is not in the cache yet
// stays recorded until that pod is gone: were it dropped, its node would be
// free for another member while the pod may still run there (the fault
// suite saw two pods of one Flock on one node so).
func TestScaledDownMemberStaysRecordedWhileItsPodIsAwaited(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.members.cacheLag = true
	f.members.graceful = true
	fl := newFlock("pg", 3)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	f.mustSync("pg")
	want := map[int32]string{0: "n-a", 1: "n-b", 2: "n-c"}
	if got := f.memberNodes("pg"); !maps.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}

	// Scaled to one before the cache shows the pods: members 1 and 2 stay.
	f.scale("pg", 1)
	f.mustSync("pg")
	if got := f.memberNodes("pg"); !maps.Equal(got, want) {
		t.Fatalf("members %v after a scale down with their pods awaited, want %v kept", got, want)
	}

	// The pods shown, the scale down deletes them; the members leave with
	// them, not before.
	if err := f.members.deliverCreated(); err != nil {
		t.Fatal(err)
	}
	f.members.cacheLag = false
	f.mustSync("pg")
	for _, name := range []string{"pg-1", "pg-2"} {
		if p := f.pod(name); p == nil || p.DeletionTimestamp == nil {
			t.Fatalf("pod %s: %v, want it terminating", name, p)
		}
	}
	if got := f.memberNodes("pg"); !maps.Equal(got, want) {
		t.Fatalf("members %v while their pods terminate, want %v kept", got, want)
	}
	// n-b cordoned: a scale back up while pg-2 still terminates on n-c
	// must not put member 1 there.
	f.updateNode("n-b", func(n *corev1.Node) { n.Spec.Unschedulable = true })
	f.scale("pg", 2)
	f.mustSync("pg")
	f.finishTerminating()
	f.mustSync("pg")
	if got, want := f.memberNodes("pg"), map[int32]string{0: "n-a", 1: "n-b"}; !maps.Equal(got, want) {
		t.Fatalf("members %v once the pods are gone, want %v", got, want)
	}
}

// With whenScaled: Delete, a member scaled away while its pod's create is
// not in the cache yet gets no cleanup helper until that pod is gone: the
// helper would remove the data directory under the starting pod.
func TestNoCleanupBesideAnAwaitedPod(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	f.members.cacheLag = true
	fl := newFlock("pg", 2)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	fl.Spec.Storage.Retention.WhenScaled = v1alpha1.DeleteRetentionPolicy
	f.createFlock(fl)
	f.mustSync("pg")
	f.scale("pg", 1)
	f.mustSync("pg")
	f.mustSync("pg")
	if h := f.helperPod("pg", HelperCleanup, 1); h != nil {
		t.Fatalf("cleanup helper %s made while pod pg-1 was awaited", h.Name)
	}
	if got := f.memberNodes("pg"); got[1] != "n-b" {
		t.Fatalf("members %v, want member 1 kept on n-b", got)
	}

	// Shown, the pod goes first, then the data.
	if err := f.members.deliverCreated(); err != nil {
		t.Fatal(err)
	}
	f.members.cacheLag = false
	f.settle("pg")
	if got := f.memberNodes("pg"); len(got) != 1 {
		t.Fatalf("members %v after the scale down settled, want member 0 only", got)
	}
	if p := f.pod("pg-1"); p != nil {
		t.Fatalf("pod pg-1 still there: %+v", p.ObjectMeta)
	}
}

// A member pod whose create is older than createdPodTTL and still not in the
// cache is read from the API server before its member leaves status: while
// the pod is there, a scale down keeps the member (and its node); once it is
// gone, the member leaves.
func TestAwaitedPodOlderThanItsTTLIsReadFromTheAPIServer(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.members.cacheLag = true
	fl := newFlock("pg", 3)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	f.mustSync("pg")
	if n := len(f.members.uncachedPods); n != 3 {
		t.Fatalf("%d pods created and not in the cache, want 3", n)
	}

	f.clock.Step(createdPodTTL + time.Second)
	f.scale("pg", 1)
	f.mustSync("pg")
	want := map[int32]string{0: "n-a", 1: "n-b", 2: "n-c"}
	if got := f.memberNodes("pg"); !maps.Equal(got, want) {
		t.Fatalf("members %v after a scale down with their pods created %s ago and still in the API server, want %v kept",
			got, createdPodTTL+time.Second, want)
	}
	// A new member may not take n-c while pg-2 may run there.
	f.addNode(newNode("n-d"))
	f.updateNode("n-d", func(n *corev1.Node) { n.Spec.Unschedulable = true })

	// pg-1 is deleted before the cache ever showed it: member 1 leaves
	// once its pod is read again, a createdPodTTL after the last read.
	pod := f.members.uncachedPods[1]
	if pod.Name != "pg-1" {
		t.Fatalf("uncached pods %v", f.members.uncachedPods)
	}
	f.members.deleteUncached(pod, "delete ")
	f.mustSync("pg")
	if got := f.memberNodes("pg"); !maps.Equal(got, want) {
		t.Fatalf("members %v within a createdPodTTL of the pods' last read, want %v kept", got, want)
	}
	f.clock.Step(createdPodTTL + time.Second)
	f.mustSync("pg")
	want = map[int32]string{0: "n-a", 2: "n-c"}
	if got := f.memberNodes("pg"); !maps.Equal(got, want) {
		t.Fatalf("members %v once pg-1 is gone from the API server, want %v", got, want)
	}
	// A read that fails keeps the member.
	f.members.failNext("GetPodLive", 5, apierrors.NewServiceUnavailable("injected"))
	f.members.deleteUncached(f.members.uncachedPods[1], "delete ")
	f.clock.Step(createdPodTTL + time.Second)
	f.mustSync("pg")
	if got := f.memberNodes("pg"); !maps.Equal(got, want) {
		t.Fatalf("members %v while the API server cannot be read, want %v", got, want)
	}
	f.members.failures = map[string]*injector{}
	f.mustSync("pg")
	if got, want := f.memberNodes("pg"), map[int32]string{0: "n-a"}; !maps.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
}

// A member reassigned off a gone node while the pod created for it there is
// not in the cache yet: that node, back, takes no other member of the Flock
// until the pod is gone.
func TestNoMemberBesideAnAwaitedPodOfAReassignedMember(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.members.cacheLag = true
	fl := withReassign(newFlock("pg", 2), 5)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	f.mustSync("pg")
	if got, want := f.memberNodes("pg"), map[int32]string{0: "n-a", 1: "n-b"}; !maps.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	reassignOffNodeB(t, f)
	f.scale("pg", 3)
	f.mustSync("pg")
	if got, want := f.memberNodes("pg"), map[int32]string{0: "n-a", 1: "n-c"}; !maps.Equal(got, want) {
		t.Fatalf("members %v while pg-1, not yet in the cache, is on n-b; want %v (member 2 unplaced)", got, want)
	}
	// Shown, the old pod is deleted (its member is elsewhere); once it is
	// gone, member 2 takes n-b.
	if err := f.members.deliverCreated(); err != nil {
		t.Fatal(err)
	}
	f.members.cacheLag = false
	f.settle("pg")
	if got, want := f.memberNodes("pg"), map[int32]string{0: "n-a", 1: "n-c", 2: "n-b"}; !maps.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
}

// A member an OrderedReady Flock has not reached yet gets its data ahead;
// a finished prepare helper whose deletion failed goes in a later sync,
// though the member's pod is still not made (member 0 is kept out by a
// pod of its name that is not the Flock's).
func TestFinishedPrepareHelperGoesWhileItsMemberWaits(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	f.members.instantPrepare = false
	fl := newFlock("pg", 2)
	f.createFlock(fl)
	stray := NewMemberPod(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, "")
	stray.OwnerReferences, stray.UID = nil, "stray"
	stray.Labels = map[string]string{"app": "other"}
	f.addPod(stray)
	f.mustSync("pg")
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Reason != ReasonPodNameTaken {
		t.Fatalf("MembersBlocked = %+v, want %s", c, ReasonPodNameTaken)
	}
	if f.helperPod("pg", HelperPrepare, 1) == nil {
		t.Fatalf("no prepare helper of member 1, made ahead; helpers %v", f.helpers("pg"))
	}
	f.runPods() // the helper starts
	f.runPods() // and completes
	if h := f.helperPod("pg", HelperPrepare, 1); h == nil || h.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("prepare helper of member 1: %+v", h)
	}
	f.members.failNext("ForceDeletePod", 1, apierrors.NewServiceUnavailable("injected"))
	_ = f.sync("pg")
	if f.helperPod("pg", HelperPrepare, 1) == nil {
		t.Fatal("the helper's deletion was to fail once")
	}
	f.mustSync("pg")
	if h := f.helperPod("pg", HelperPrepare, 1); h != nil {
		t.Fatalf("finished prepare helper of waiting member 1 left: %+v", h.Status)
	}
	if p := f.pod("pg-1"); p != nil {
		t.Fatalf("pg-1 made before member 0: %+v", p)
	}
}

// A member of an OrderedReady Flock reassigned off a gone node while the pod
// created for it there is not in the cache yet: once that node is back, the
// directory the member left there (whenScaled Delete) is not removed while
// the pod may still use it, also while a lower member is not Ready (the
// data of the members after it is made ahead).
func TestNoLeftDataRemovalBesideAnAwaitedPod(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	fl := withReassign(newFlock("pg", 2), 5)
	fl.Spec.Storage.Retention.WhenScaled = v1alpha1.DeleteRetentionPolicy
	f.createFlock(fl)
	f.settle("pg")
	f.members.cacheLag = true
	f.deletePod("pg-1")
	f.mustSync("pg")
	if n := len(f.members.uncachedPods); n != 1 {
		t.Fatalf("%d pods created and not in the cache, want pg-1", n)
	}
	reassignOffNodeB(t, f)
	f.updatePod("pg-0", func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	})
	for _, step := range []time.Duration{0, time.Second, createdPodTTL} {
		f.clock.Step(step)
		f.mustSync("pg")
		if h := f.helperPod("pg", HelperCleanup, 1); h != nil {
			t.Fatalf("cleanup helper %s on %s while pg-1, created there and not yet in the cache, may use the directory", h.Name, h.Spec.NodeName)
		}
	}
}

// reassignOffNodeB deletes node n-b, so that member 1 of Flock pg (Reassign
// after 5 s) moves from it to n-c, and then brings n-b back.
func reassignOffNodeB(t *testing.T, f *fixture) {
	t.Helper()
	f.deleteNode("n-b")
	f.mustSync("pg")
	f.clock.Step(10 * time.Second)
	f.mustSync("pg")
	if got, want := f.memberNodes("pg"), map[int32]string{0: "n-a", 1: "n-c"}; !maps.Equal(got, want) {
		t.Fatalf("members %v, want member 1 reassigned to n-c: %v", got, want)
	}
	f.addNode(newNode("n-b"))
}

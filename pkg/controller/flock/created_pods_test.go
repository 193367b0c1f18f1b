package flock

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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

package flock

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// TestRandomOperations drives two Flocks, with random update strategies,
// retention and recovery policies, through random sequences of scale
// changes, template changes, pod deletions and failures, node outages,
// cordons, node removals, orphaning, the passing of time, injected write
// errors and status conflicts, and a pod cache behind the controller's
// creates, checking the invariants after every step (fixture.check: among
// them, a member moves only off a lost node under Reassign, no pod is
// without a member, no two pods of a Flock share a node, and no cleanup
// helper runs beside a member pod). Then it heals
// the world and checks that every Flock converges: all members Ready at the
// update revision (above the partition), each on its own node, no cleanup
// left, the status saying so.
func TestRandomOperations(t *testing.T) {
	nodeNames := []string{"n-a", "n-b", "n-c", "n-d", "n-e"}
	flockNames := []string{"pg", "kv"}
	ops := []string{"CreatePod", "DeletePod", "ForceDeletePod", "PatchPod", "CreateService", "UpdateService", "PatchService"}
	images := []string{"postgres:16", "postgres:17", "postgres:18"}
	const steps = 300

	first, last := randomSeeds(t)
	for seed := first; seed <= last; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			f := newFixtureWithLogVerbosity(t, 0, nodeNames...)
			f.members.graceful = rng.IntN(2) == 0
			conflicts := 0
			f.flockClient.PrependReactor("update", "flocks", func(action clienttesting.Action) (bool, runtime.Object, error) {
				if action.GetSubresource() == "status" && conflicts > 0 {
					conflicts--
					return true, nil, apierrors.NewConflict(flockResource, "x", errors.New("injected"))
				}
				return false, nil, nil
			})
			for _, name := range flockNames {
				fl := newFlock(name, int32(rng.IntN(4)))
				if rng.IntN(2) == 0 {
					fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
				}
				switch rng.IntN(3) {
				case 0:
					fl.Spec.UpdateStrategy = v1alpha1.FlockUpdateStrategy{Type: v1alpha1.OnDeleteFlockStrategyType}
				case 1:
					partition := int32(rng.IntN(2))
					mu := intstr.FromInt32(int32(1 + rng.IntN(2)))
					fl.Spec.UpdateStrategy.RollingUpdate = &v1alpha1.RollingUpdateFlockStrategy{Partition: &partition, MaxUnavailable: &mu}
				}
				if rng.IntN(2) == 0 {
					fl.Spec.Storage.Retention.WhenScaled = v1alpha1.DeleteRetentionPolicy
				}
				if rng.IntN(2) == 0 {
					withReassign(fl, int32(5+rng.IntN(20)))
				}
				f.createFlock(fl)
			}
			randomPod := func() *corev1.Pod {
				var pods []*corev1.Pod
				for _, p := range f.allPods() {
					if p.Namespace == testNamespace {
						pods = append(pods, p)
					}
				}
				if len(pods) == 0 {
					return nil
				}
				return pods[rng.IntN(len(pods))]
			}
			randomNode := func() string { return nodeNames[rng.IntN(len(nodeNames))] }
			nodeExists := func(name string) bool { _, ok, _ := f.nodes.GetByKey(name); return ok }

			for step := range steps {
				switch op := rng.IntN(20); op {
				case 19:
					// The pod cache falls behind the controller's creates,
					// or catches up.
					if f.members.cacheLag {
						if err := f.members.deliverCreated(); err != nil {
							t.Fatal(err)
						}
					}
					f.members.cacheLag = !f.members.cacheLag
					t.Logf("step %d: pod cache lags: %v", step, f.members.cacheLag)
				case 16:
					f.updateFlock(flockNames[rng.IntN(len(flockNames))], setImage(images[rng.IntN(len(images))]))
				case 17:
					f.clock.Step(time.Duration(rng.IntN(20)) * time.Second)
				case 18:
					// A data helper fails.
					for _, p := range f.allPods() {
						if p.Labels[LabelHelper] != "" && p.Status.Phase == corev1.PodRunning {
							p = p.DeepCopy()
							p.Status.Phase = corev1.PodFailed
							if err := f.pods.Update(p); err != nil {
								t.Fatal(err)
							}
							break
						}
					}
				case 0:
					f.scale(flockNames[rng.IntN(len(flockNames))], int32(rng.IntN(len(nodeNames)+2)))
				case 1:
					if p := randomPod(); p != nil {
						t.Logf("step %d: delete pod %s on %s", step, p.Name, p.Spec.NodeName)
						f.deletePod(p.Name)
					}
				case 2:
					if p := randomPod(); p != nil && p.DeletionTimestamp == nil {
						f.updatePod(p.Name, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
					}
				case 3, 4:
					f.runPods()
				case 5:
					t.Logf("step %d: pods finish terminating", step)
					f.finishTerminating()
				case 6:
					if n := randomNode(); nodeExists(n) {
						ready := rng.IntN(2) == 0
						t.Logf("step %d: node %s ready=%v", step, n, ready)
						f.updateNode(n, setNodeReady(ready))
						f.check()
					}
				case 7:
					if n := randomNode(); nodeExists(n) {
						cordon := rng.IntN(2) == 0
						f.updateNode(n, func(node *corev1.Node) { node.Spec.Unschedulable = cordon })
						f.check()
					}
				case 8:
					if n := randomNode(); nodeExists(n) {
						t.Logf("step %d: delete node %s", step, n)
						f.deleteNode(n)
					} else {
						t.Logf("step %d: add node %s", step, n)
						f.addNode(newNode(n))
						f.check()
					}
				case 9:
					// Orphan a pod (as kubectl delete --cascade=orphan of an
					// earlier Flock, or a GC race, would leave it).
					if p := randomPod(); p != nil {
						t.Logf("step %d: orphan pod %s on %s", step, p.Name, p.Spec.NodeName)
						f.updatePod(p.Name, func(p *corev1.Pod) { p.OwnerReferences = nil })
					}
				case 10:
					f.members.failNext(ops[rng.IntN(len(ops))], 1+rng.IntN(2), apierrors.NewServiceUnavailable("injected"))
				case 11:
					conflicts = 1 + rng.IntN(3)
				default:
					_ = f.sync(flockNames[rng.IntN(len(flockNames))])
				}
				if t.Failed() {
					t.Fatalf("failed at step %d", step)
				}
			}

			// Heal: every node back, Ready and schedulable; no more faults;
			// no Flock larger than the cluster.
			f.members.failures = map[string]*injector{}
			conflicts = 0
			f.members.cacheLag = false
			if err := f.members.deliverCreated(); err != nil {
				t.Fatal(err)
			}
			for _, n := range nodeNames {
				if !nodeExists(n) {
					f.addNode(newNode(n))
				}
				f.updateNode(n, func(node *corev1.Node) { setNodeReady(true)(node); node.Spec.Unschedulable = false })
			}
			for _, name := range flockNames {
				if replicasOf(f.getFlock(name)) > int32(len(nodeNames)) {
					f.scale(name, int32(len(nodeNames)))
				}
			}
			converged := false
			quiet := 0
			for range 100 {
				before := f.snapshot()
				for _, name := range flockNames {
					f.mustSync(name)
				}
				f.runPods()
				f.finishTerminating()
				// Failed helpers are retried after a delay: converged means
				// nothing changes twice in a row, time passing in between.
				f.clock.Step(helperRetryDelay)
				if quiet = quiet + 1; f.snapshot() != before {
					quiet = 0
				}
				if quiet == 2 {
					converged = true
					break
				}
			}
			if !converged {
				t.Fatal("did not converge after healing")
			}
			// Converged, the controller writes nothing: one more sync of
			// every Flock, with nothing changed in the world, asks for no
			// write of any kind and records no event (an idle Flock costs
			// its cluster nothing).
			before := f.writes()
			f.events()
			for _, name := range flockNames {
				f.mustSync(name)
			}
			if ev := f.events(); len(ev) > 0 {
				t.Errorf("a sync of converged Flocks recorded events: %q", ev)
			}
			if after := f.writes(); !maps.Equal(before, after) {
				var wrote []string
				for kind, n := range after {
					if n != before[kind] {
						wrote = append(wrote, fmt.Sprintf("%s: %d", kind, n-before[kind]))
					}
				}
				slices.Sort(wrote)
				t.Errorf("a sync of converged Flocks wrote: %s", strings.Join(wrote, "; "))
			}
			for _, name := range flockNames {
				fl := f.getFlock(name)
				replicas := replicasOf(fl)
				st := fl.Status
				// Only a pod name held by a pod the Flock does not own (an
				// orphan left pinned elsewhere), or the node of a member's
				// retained data held by another member (moved there by
				// Reassign while it was the only Ready node), may keep a
				// member out; a rolling update then waits too (the member
				// counts against maxUnavailable), and so do the members
				// after it in an OrderedReady Flock. A scaled-away member's
				// data may wait for such an orphan, which uses its claim.
				blocked := f.condition(name, v1alpha1.FlockMembersBlocked)
				dataNodeTaken := blocked.Reason == ReasonDataNodeUnavailable && strings.Contains(blocked.Message, " is there; ")
				keptOut := blocked.Reason == ReasonPodNameTaken || dataNodeTaken
				for _, m := range st.Members {
					if m.Ordinal >= replicas && orphanUsesData(f, fl, m) {
						keptOut = true
					}
				}
				orderedWait := keptOut && fl.Spec.PodManagementPolicy != v1alpha1.ParallelPodManagement
				nodes := map[string]bool{}
				var owned int32
				for _, p := range f.allPods() {
					if !isControlledBy(p, fl) {
						continue
					}
					owned++
					if (!isRunningAndReady(p) && !orderedWait) || nodes[p.Spec.NodeName] {
						t.Errorf("%s: pod %s ready=%v on %s (taken=%v)", name, p.Name, isRunningAndReady(p), p.Spec.NodeName, nodes[p.Spec.NodeName])
					}
					nodes[p.Spec.NodeName] = true
				}
				for _, h := range f.helpers(name) {
					// A finished helper may stay as the record of its
					// member's data while a pod of the member's name that is
					// not the Flock's keeps the member from its data.
					if ord, ok := helperOrdinal(fl.UID, h); ok && helperFinished(h) && nameTakenMember(fl, ord) {
						continue
					}
					t.Errorf("%s: cleanup pod %s left on %s, %s", name, h.Name, h.Spec.NodeName, h.Status.Phase)
				}
				if owned != replicas || st.ReadyReplicas != replicas || int32(len(st.Members)) != replicas {
					if !keptOut {
						t.Errorf("%s: %d pods, status %+v, MembersBlocked %+v", name, owned, st, blocked)
					}
					continue
				}
				if fl.Spec.UpdateStrategy.Type == v1alpha1.RollingUpdateFlockStrategyType {
					for _, p := range f.allPods() {
						ord, _ := ParseOrdinal(name, p.Name)
						if isControlledBy(p, fl) && ord >= partitionOf(fl) && podRevision(p) != st.UpdateRevision {
							t.Errorf("%s: pod %s at revision %s, want %s", name, p.Name, podRevision(p), st.UpdateRevision)
						}
					}
				}
				if c := f.condition(name, v1alpha1.FlockAvailable); c.Status != metav1.ConditionTrue {
					t.Errorf("%s: Available = %+v", name, c)
				}
				if blocked.Status != metav1.ConditionFalse {
					t.Errorf("%s: MembersBlocked = %+v", name, blocked)
				}
			}
		})
	}
}

// randomSeeds returns the seeds TestRandomOperations runs: 1 to 40, or the
// range FLOCK_RANDOM_SEEDS names ("401-2000", or one seed "37"), for a
// longer search than CI's.
func randomSeeds(t *testing.T) (first, last uint64) {
	v := os.Getenv("FLOCK_RANDOM_SEEDS")
	if v == "" {
		return 1, 40
	}
	lo, hi, found := strings.Cut(v, "-")
	if !found {
		hi = lo
	}
	first, err1 := strconv.ParseUint(lo, 10, 64)
	last, err2 := strconv.ParseUint(hi, 10, 64)
	if err1 != nil || err2 != nil || first == 0 || first > last {
		t.Fatalf("FLOCK_RANDOM_SEEDS=%q: want a seed or a range first-last of seeds from 1", v)
	}
	return first, last
}

// orphanUsesData reports whether member m of fl waits for the removal of its
// data because a pod of its name that fl does not control is there (its
// message says so).
func orphanUsesData(f *fixture, fl *v1alpha1.Flock, m v1alpha1.FlockMember) bool {
	p := f.pod(PodName(fl.Name, m.Ordinal))
	return p != nil && !isControlledBy(p, fl) && strings.Contains(m.Message, "is removed once pod "+p.Name+", which uses it, is gone")
}

// nameTakenMember reports whether member ord of fl is kept out by a pod of
// its name that is not fl's (its message says so).
func nameTakenMember(fl *v1alpha1.Flock, ord int32) bool {
	for _, m := range fl.Status.Members {
		if m.Ordinal == ord && strings.Contains(m.Message, fmt.Sprintf("cannot start: pod %s exists and is not a pod of this Flock", PodName(fl.Name, ord))) {
			return true
		}
	}
	return false
}

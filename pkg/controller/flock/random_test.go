package flock

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// TestRandomOperations drives two Flocks through random sequences of scale
// changes, pod deletions and failures, node outages, cordons, node
// removals, orphaning, injected write errors and status conflicts, checking
// the invariants after every step (fixture.check). Then it heals the world
// and checks that every Flock converges: all members Ready, each on its own
// node, the status saying so.
func TestRandomOperations(t *testing.T) {
	nodeNames := []string{"n-a", "n-b", "n-c", "n-d", "n-e"}
	flockNames := []string{"pg", "kv"}
	ops := []string{"CreatePod", "DeletePod", "UpdatePod", "PatchPod", "CreateService", "UpdateService", "PatchService"}
	const steps = 300

	for seed := uint64(1); seed <= 40; seed++ {
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
				f.createFlock(fl)
			}
			randomPod := func() *corev1.Pod {
				pods := f.allPods()
				if len(pods) == 0 {
					return nil
				}
				return pods[rng.IntN(len(pods))]
			}
			randomNode := func() string { return nodeNames[rng.IntN(len(nodeNames))] }
			nodeExists := func(name string) bool { _, ok, _ := f.nodes.GetByKey(name); return ok }

			for step := range steps {
				switch op := rng.IntN(16); op {
				case 0:
					f.scale(flockNames[rng.IntN(len(flockNames))], int32(rng.IntN(len(nodeNames)+2)))
				case 1:
					if p := randomPod(); p != nil {
						f.deletePod(p.Name)
					}
				case 2:
					if p := randomPod(); p != nil && p.DeletionTimestamp == nil {
						f.updatePod(p.Name, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
					}
				case 3, 4:
					f.runPods()
				case 5:
					f.finishTerminating()
				case 6:
					if n := randomNode(); nodeExists(n) {
						ready := rng.IntN(2) == 0
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
						f.deleteNode(n)
					} else {
						f.addNode(newNode(n))
						f.check()
					}
				case 9:
					// Orphan a pod (as kubectl delete --cascade=orphan of an
					// earlier Flock, or a GC race, would leave it).
					if p := randomPod(); p != nil {
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
			for range 60 {
				before := f.snapshot()
				for _, name := range flockNames {
					f.mustSync(name)
				}
				f.runPods()
				f.finishTerminating()
				if f.snapshot() == before {
					converged = true
					break
				}
			}
			if !converged {
				t.Fatal("did not converge after healing")
			}
			for _, name := range flockNames {
				fl := f.getFlock(name)
				replicas := replicasOf(fl)
				nodes := map[string]bool{}
				var owned int32
				for _, p := range f.allPods() {
					if !isControlledBy(p, fl) {
						continue
					}
					owned++
					if !isRunningAndReady(p) || nodes[p.Spec.NodeName] {
						t.Errorf("%s: pod %s ready=%v on %s (taken=%v)", name, p.Name, isRunningAndReady(p), p.Spec.NodeName, nodes[p.Spec.NodeName])
					}
					nodes[p.Spec.NodeName] = true
				}
				st := fl.Status
				blocked := f.condition(name, v1alpha1.FlockMembersBlocked)
				if owned != replicas || st.ReadyReplicas != replicas || int32(len(st.Members)) != replicas {
					// Only a pod name held by a pod the Flock does not own
					// (an orphan left pinned elsewhere) may keep a member out.
					if blocked.Reason != ReasonPodNameTaken {
						t.Errorf("%s: %d pods, status %+v, MembersBlocked %+v", name, owned, st, blocked)
					}
					continue
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

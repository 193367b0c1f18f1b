// A Flock's PodDisruptionBudget (issue 19.3): every Flock owns one
// (maxUnavailable 1 by default), so two `kubectl drain` calls on the nodes of
// two members never take both down: the second waits on the budget until the
// first member is back.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
)

func TestFlockDisruptionBudgetDrains(t *testing.T) {
	ns := newNamespace(t)
	pool := "pdb-" + ns
	for i := range 3 {
		addNode(t, fmt.Sprintf("%s-%d", pool, i), map[string]string{"flock-e2e-pool": pool}, nil)
	}
	f := newFlock("quorum", ns, 3)
	f.Spec.Placement.NodeSelector = map[string]string{"flock-e2e-pool": pool}
	createFlock(t, f)
	f = waitFlockAvailable(t, ns, "quorum")

	// The budget: owned by the Flock, maxUnavailable 1, over its members.
	var pdb *policyv1.PodDisruptionBudget
	eventually(t, time.Minute, "the Flock's PodDisruptionBudget allows one disruption", func(ctx context.Context) error {
		var err error
		pdb, err = env.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "quorum", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pdb.Status.ExpectedPods != 3 || pdb.Status.DisruptionsAllowed != 1 {
			return fmt.Errorf("status %+v", pdb.Status)
		}
		return nil
	})
	if ref := metav1.GetControllerOf(pdb); ref == nil || ref.UID != f.UID {
		t.Errorf("budget owner %+v, want the Flock %s", pdb.OwnerReferences, f.UID)
	}
	if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(2) {
		t.Errorf("budget minAvailable %v, want 2 (3 replicas, maxUnavailable 1)", pdb.Spec.MinAvailable)
	}

	k := env.KubectlBuilt()
	node0, node1 := f.Status.Members[0].Node, f.Status.Members[1].Node
	pod1 := f.Status.Members[1].Pod
	pod1UID := podUID(t, ns, pod1)

	// Drain member 0's node: its pod is evicted and, the node cordoned, its
	// replacement waits there.
	kubectl(t, k, "drain", node0, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s")

	// Drain member 1's node meanwhile: the budget refuses the eviction.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	drain := env.KubectlCommand(ctx, k, "drain", node1, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=150s")
	var out bytes.Buffer
	drain.Stdout, drain.Stderr = &out, &out
	if err := drain.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- drain.Wait() }()
	consistently(t, 10*time.Second, "member 1 stays while member 0 is down", func(ctx context.Context) error {
		select {
		case err := <-done:
			return fmt.Errorf("the second drain ended (%v) while member 0 was down:\n%s", err, out.String())
		default:
		}
		if uid := podUID(t, ns, pod1); uid != pod1UID {
			return fmt.Errorf("member 1's pod was evicted (uid %s -> %s)", pod1UID, uid)
		}
		return nil
	})

	// Member 0 comes back (its node uncordoned); then the second drain
	// evicts member 1 and ends.
	kubectl(t, k, "uncordon", node0)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the second drain: %v\n%s", err, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("the second drain did not end after member 0 came back:\n%s", out.String())
	}
	back := getFlock(t, ns, "quorum")
	if !back.Status.Members[0].Ready || back.Status.Members[0].Node != node0 {
		t.Errorf("member 0 after the drains: %+v, want Ready on %s", back.Status.Members[0], node0)
	}
	if uid := podUID(t, ns, pod1); uid == pod1UID {
		t.Errorf("member 1's pod was not evicted by the second drain:\n%s", out.String())
	}
	kubectl(t, k, "uncordon", node1)
	waitFlockAvailable(t, ns, "quorum")
}

// TestFlockDisruptionBudgetPolicy: the budget follows spec.disruptionBudget
// and replicas, and policy None removes it. A Flock of no members has no
// budget and no headless Service; both come with its first member.
func TestFlockDisruptionBudgetPolicy(t *testing.T) {
	ns := newNamespace(t)
	logFile := filepath.Join(env.LogDir(), "flock-apiserver.log")
	logStart := fileSize(logFile)
	f := newFlock("tuned", ns, 3)
	two := intstr.FromInt32(2)
	f.Spec.DisruptionBudget.MaxUnavailable = &two
	createFlock(t, f)
	wantMinAvailable := func(n int32) {
		t.Helper()
		eventually(t, time.Minute, fmt.Sprintf("budget with minAvailable %d", n), func(ctx context.Context) error {
			pdb, err := env.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "tuned", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(n) {
				return fmt.Errorf("minAvailable %v", pdb.Spec.MinAvailable)
			}
			return nil
		})
	}
	// A Flock of no members, made with the other: no budget (it would
	// protect nothing), though the other's, made after its member pods,
	// exists; with its first member pod, its budget comes.
	empty := createFlock(t, newFlock("empty", ns, 0))
	wantMinAvailable(1) // 3 replicas, maxUnavailable 2
	if _, err := env.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctxFor(t), empty.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Flock of no members has a budget (err %v), want none", err)
	}
	// Nor a headless Service (it would publish no name), once the
	// controller has synced it: its ServiceReady says NoMembers.
	eventually(t, time.Minute, "ServiceReady NoMembers on a Flock of no members", func(ctx context.Context) error {
		got, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, empty.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, flockv1alpha1.FlockServiceReady); c == nil || c.Status != metav1.ConditionTrue || c.Reason != flockcontroller.ReasonServiceNotNeeded {
			return fmt.Errorf("ServiceReady %+v", c)
		}
		return nil
	})
	if _, err := env.Kube.CoreV1().Services(ns).Get(ctxFor(t), empty.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Flock of no members has a Service (err %v), want none", err)
	}
	if _, err := env.Kube.CoreV1().Services(ns).Get(ctxFor(t), "tuned", metav1.GetOptions{}); err != nil {
		t.Errorf("the Flock of 3 members has no Service: %v", err)
	}
	if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Patch(ctxFor(t), empty.Name, types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "a budget once the Flock has a member", func(ctx context.Context) error {
		pdb, err := env.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, empty.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(0) {
			return fmt.Errorf("minAvailable %v, want 0 (1 replica, maxUnavailable 1)", pdb.Spec.MinAvailable)
		}
		return nil
	})
	eventually(t, time.Minute, "a headless Service once the Flock has a member", func(ctx context.Context) error {
		svc, err := env.Kube.CoreV1().Services(ns).Get(ctx, empty.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || !metav1.IsControlledBy(svc, empty) {
			return fmt.Errorf("Service clusterIP %q, owners %v; want headless, controlled by the Flock", svc.Spec.ClusterIP, svc.OwnerReferences)
		}
		got, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, empty.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, flockv1alpha1.FlockServiceReady); c == nil || c.Reason != flockcontroller.ReasonServiceReady {
			return fmt.Errorf("ServiceReady %+v", c)
		}
		return nil
	})
	patch := func(p string) error {
		_, err := env.Flock.FlockV1alpha1().Flocks(ns).Patch(ctxFor(t), "tuned", types.MergePatchType, []byte(p), metav1.PatchOptions{})
		return err
	}
	if err := patch(`{"spec":{"replicas":2}}`); err != nil {
		t.Fatal(err)
	}
	wantMinAvailable(0) // 2 replicas
	// The budget followed the scale without a failed sync: its spec is
	// patched, not updated from a cache that kube-controller-manager's
	// status writes leave behind.
	if lines, err := logLinesFrom(logFile, logStart); err != nil {
		t.Error(err)
	} else {
		for _, l := range lines {
			if strings.Contains(l, "disruption budget of a Flock failed") && strings.Contains(l, ns+"/tuned") {
				t.Errorf("flock-apiserver logged a failed budget sync: %s", l)
			}
		}
	}
	if err := patch(`{"spec":{"disruptionBudget":{"policy":"None","maxUnavailable":null}}}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "budget removed with policy None", func(ctx context.Context) error {
		_, err := env.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "tuned", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	// Bad input: a clear 422 naming the field.
	err := patch(`{"spec":{"disruptionBudget":{"policy":"Managed","maxUnavailable":0}}}`)
	if !apierrors.IsInvalid(err) || !bytes.Contains([]byte(err.Error()), []byte("spec.disruptionBudget.maxUnavailable")) {
		t.Errorf("maxUnavailable 0: %v, want 422 naming spec.disruptionBudget.maxUnavailable", err)
	}
}

// podUID returns the UID of pod name in ns, "" when it does not exist.
func podUID(t *testing.T, ns, name string) string {
	t.Helper()
	p, err := env.Kube.CoreV1().Pods(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(p.UID)
}

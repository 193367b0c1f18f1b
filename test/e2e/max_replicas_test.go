package e2e

// Issue 16, the size bound: spec.replicas is at most 500 (the status of
// the largest Flock, measured in validation's TestMaxReplicasStatusFits,
// stays under half of etcd's 1.5 MiB limit); kubectl explain says so, a
// larger Flock is refused naming the field and why, and a Flock at the
// bound records every member on 500 kwok nodes.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockvalidation "flock.dev/flock/pkg/apis/flock/validation"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
)

func TestMaxReplicas(t *testing.T) {
	const max = flockvalidation.MaxReplicas
	k := env.KubectlBuilt()
	waitFlockOpenAPI(t)
	if out := kubectl(t, k, "explain", "flocks.spec.replicas"); !strings.Contains(out, fmt.Sprintf("At most %d", max)) ||
		!strings.Contains(out, "1.5 MiB") {
		t.Errorf("kubectl explain flocks.spec.replicas does not state the bound:\n%s", out)
	}

	ns := newNamespace(t)
	const name = "big"
	f := newFlock(name, ns, max+1)
	f.Spec.Placement.NodeSelector = map[string]string{lcPoolLabel: ns}
	f.APIVersion, f.Kind = "flock.dev/v1alpha1", "Flock"
	body, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	res := kubectlFails(t, k, string(body), "create", "-f", "-")
	want := fmt.Sprintf("spec.replicas: Invalid value: %d: must be no more than %d: the status records every member, and a larger Flock's status could pass etcd's 1.5 MiB object limit", max+1, max)
	if !strings.Contains(res.Stderr, want) {
		t.Errorf("kubectl create of %d replicas: %s, want %q", max+1, res.Stderr, want)
	}

	// At the bound, on as many kwok nodes: every member is recorded.
	maxAddNodes(t, ns, max)
	f.Spec.Replicas = ptr.To(int32(max))
	createFlock(t, f)
	start := time.Now()
	eventually(t, 5*time.Minute, fmt.Sprintf("all %d members recorded in status", max), func(ctx context.Context) error {
		got, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		nodes := map[string]bool{}
		for _, m := range got.Status.Members {
			nodes[m.Node] = true
		}
		if len(got.Status.Members) != max || len(nodes) != max {
			return fmt.Errorf("%d members on %d nodes", len(got.Status.Members), len(nodes))
		}
		return nil
	})
	raw, err := env.Kube.Discovery().RESTClient().Get().AbsPath("/apis/flock.dev/v1alpha1/namespaces/" + ns + "/flocks/" + name).DoRaw(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d members recorded after %v; the stored Flock is %d bytes", max, time.Since(start).Round(time.Second), len(raw))
	ctlDeleteFlock(t, ns, name, false)
}

// maxAddNodes adds n kwok nodes labelled for ns's pool (eight at a time)
// and waits until they are Ready and untainted.
func maxAddNodes(t *testing.T, ns string, max int) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make([]error, max)
	for i := range max {
		node := fmt.Sprintf("%s-m%03d", ns, i)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			_ = env.Kube.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
		})
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_, errs[i] = env.AddNode(ctxFor(t), node, map[string]string{lcPoolLabel: ns}, nil)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, fmt.Sprintf("%d new nodes Ready and untainted", max), func(ctx context.Context) error {
		nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: lcPoolLabel + "=" + ns})
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes.Items {
			if len(n.Spec.Taints) == 0 && capNodeReady(&n) {
				ready++
			}
		}
		if ready != max {
			return fmt.Errorf("%d of %d nodes Ready and untainted", ready, len(nodes.Items))
		}
		return nil
	})
}

// A Flock of 500 members that can never start (its template's nodeSelector
// matches no node, on 500 kwok nodes) keeps a current status (its
// MembersBlocked message bounded, observedGeneration following a spec
// change), and with whenDeleted Delete it and its namespace can be deleted.
func TestBlockedMaxFlockDeletes(t *testing.T) {
	const max = flockvalidation.MaxReplicas
	ns := newNamespace(t)
	maxAddNodes(t, ns, max)
	const name = "stuck"
	f := newFlock(name, ns, max)
	f.Spec.Placement.NodeSelector = map[string]string{lcPoolLabel: ns}
	f.Spec.Template.Spec.NodeSelector = map[string]string{"flock.dev/e2e-matches-nothing": "true"}
	f.Spec.Storage.Retention.WhenDeleted = flockv1alpha1.DeleteRetentionPolicy
	f.Spec.PodManagementPolicy = flockv1alpha1.ParallelPodManagement
	createFlock(t, f)
	current := func(what string, gen int64) {
		eventually(t, 5*time.Minute, what, func(ctx context.Context) error {
			got, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(got.Status.Conditions, flockv1alpha1.FlockMembersBlocked)
			if got.Status.ObservedGeneration < gen || c == nil || c.Status != metav1.ConditionTrue || c.Reason != flockcontroller.ReasonUnschedulable ||
				len(got.Status.Members) != max {
				return fmt.Errorf("observedGeneration %d (want %d), %d members, MembersBlocked %+v", got.Status.ObservedGeneration, gen, len(got.Status.Members), c)
			}
			if len(c.Message) > 4096 {
				return fmt.Errorf("MembersBlocked message of %d bytes", len(c.Message))
			}
			t.Logf("%s: MembersBlocked %s: %.200s", what, c.Reason, c.Message)
			return nil
		})
	}
	current("status of the blocked Flock current", 1)
	upd := lcUpdate(t, ns, name, func(f *flockv1alpha1.Flock) { f.Spec.MinReadySeconds++ })
	current("status current after a spec change", upd.Generation)

	start := time.Now()
	if err := env.Kube.CoreV1().Namespaces().Delete(ctxFor(t), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 8*time.Minute, "the namespace and the Flock gone", func(ctx context.Context) error {
		if _, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			n, _ := env.Flock.FlockV1alpha1().Flocks(ns).List(ctx, metav1.ListOptions{})
			pods, _ := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return fmt.Errorf("namespace %s still there (%v); %d Flocks, %d pods", ns, err, len(n.Items), len(pods.Items))
		}
		return nil
	})
	t.Logf("namespace with the blocked %d-member Flock deleted in %v", max, time.Since(start).Round(time.Second))
}

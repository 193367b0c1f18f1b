package e2e

// Issue 4 end to end: flock-apiserver refuses a Flock the cluster cannot
// hold (FlockCapacity admission), judged against the kwok nodes as they are
// changed with real kubectl: cordon, labels, taints, a new node, a NotReady
// node.
//
// The admission plugin reads nodes from an informer, so after changing a
// node a test first waits (with server-side dry runs through the clientset)
// until flock-apiserver judges as the change requires, then checks what
// kubectl prints.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/test/cluster"
)

// capAdmissionTimeout bounds the wait until flock-apiserver's node informer
// reflects a node change.
const capAdmissionTimeout = 30 * time.Second

// 3 nodes: 4 replicas are refused with a message naming 4 and 3 and nothing
// is stored; 3 are accepted; `kubectl scale --replicas=4` is refused through
// the scale subresource and leaves the stored Flock as it was.
func TestCapacityReplicasAndScale(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		want := "spec.replicas: Invalid value: 4: only 3 of 3 nodes are eligible"
		capWaitAdmission(t, newFlock("big", ns, 4), want)

		res := kubectlFails(t, k, flockManifest("big", ns, 4), "create", "-f", "-")
		capExpectRefusal(t, res, "big", want)
		if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "big", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a refused Flock was stored (get: %v)", err)
		}

		out := kubectlInput(t, k, flockManifest("big", ns, 3), "create", "-f", "-")
		if strings.TrimSpace(out) != "flock.flock.dev/big created" {
			t.Errorf("create with 3 replicas printed %q", out)
		}
		before, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "big", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}

		res = kubectlFails(t, k, "", "scale", "fl/big", "-n", ns, "--replicas=4")
		capExpectRefusal(t, res, "big", want)
		after, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "big", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.Generation != before.Generation || after.Spec.Replicas == nil || *after.Spec.Replicas != 3 {
			t.Errorf("after a refused scale: generation %d -> %d, spec.replicas %v; want the stored Flock unchanged (3)",
				before.Generation, after.Generation, after.Spec.Replicas)
		}
		scale, err := env.Flock.FlockV1alpha1().Flocks(ns).GetScale(ctxFor(t), "big", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if scale.Spec.Replicas != 3 {
			t.Errorf("scale subresource after a refused scale: spec.replicas %d, want 3", scale.Spec.Replicas)
		}
		ctlDeleteFlock(t, ns, "big", false)
	})
}

// A cordoned node does not count: a new Flock of 3 is refused while one of
// the 3 nodes is cordoned and accepted once it is uncordoned.
func TestCapacityCordon(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		node := env.NodeNames[len(env.NodeNames)-1]
		t.Cleanup(func() { capRestoreNode(t, node, func(n *corev1.Node) { n.Spec.Unschedulable = false }) })

		if out := kubectl(t, k, "cordon", node); strings.TrimSpace(out) != "node/"+node+" cordoned" {
			t.Errorf("cordon printed %q", out)
		}
		want := "spec.replicas: Invalid value: 3: only 2 of 3 nodes are eligible (1 cordoned)"
		capWaitAdmission(t, newFlock("db", ns, 3), want)
		res := kubectlFails(t, k, flockManifest("db", ns, 3), "create", "-f", "-")
		capExpectRefusal(t, res, "db", want)

		if out := kubectl(t, k, "uncordon", node); strings.TrimSpace(out) != "node/"+node+" uncordoned" {
			t.Errorf("uncordon printed %q", out)
		}
		capWaitAdmission(t, newFlock("db", ns, 3), "")
		if out := kubectlInput(t, k, flockManifest("db", ns, 3), "create", "-f", "-"); strings.TrimSpace(out) != "flock.flock.dev/db created" {
			t.Errorf("create after uncordon printed %q", out)
		}
		ctlDeleteFlock(t, ns, "db", false)
	})
}

// spec.placement.nodeSelector makes a pool: with 2 of the 3 nodes labelled,
// 3 replicas are refused (on create and on scale) and 2 are accepted and
// placed on exactly the labelled nodes.
func TestCapacityNodeSelectorPool(t *testing.T) {
	k := env.KubectlBuilt()
	ns := newNamespace(t)
	const key = "flock.dev/e2e-pool"
	pool := env.NodeNames[:2]
	t.Cleanup(func() {
		for _, n := range pool {
			capRestoreNode(t, n, func(n *corev1.Node) { delete(n.Labels, key) })
		}
	})
	out := kubectl(t, k, append([]string{"label", "nodes"}, append(slices.Clone(pool), key+"="+ns)...)...)
	if want := fmt.Sprintf("node/%s labeled\nnode/%s labeled", pool[0], pool[1]); strings.TrimSpace(out) != want {
		t.Errorf("label printed %q, want %q", out, want)
	}
	inPool := func(f *flockv1alpha1.Flock) *flockv1alpha1.Flock {
		f.Spec.Placement.NodeSelector = map[string]string{key: ns}
		return f
	}

	want := fmt.Sprintf("spec.replicas: Invalid value: 3: only 2 of 3 nodes are eligible (nodeSelector %s=%s excludes 1)", key, ns)
	capWaitAdmission(t, inPool(newFlock("pool", ns, 3)), want)
	res := kubectlFails(t, k, capFlockJSON(t, inPool(newFlock("pool", ns, 3))), "create", "-f", "-")
	capExpectRefusal(t, res, "pool", want)

	if out := kubectlInput(t, k, capFlockJSON(t, inPool(newFlock("pool", ns, 2))), "create", "-f", "-"); strings.TrimSpace(out) != "flock.flock.dev/pool created" {
		t.Errorf("create with 2 replicas printed %q", out)
	}
	res = kubectlFails(t, k, "", "scale", "fl/pool", "-n", ns, "--replicas=3")
	capExpectRefusal(t, res, "pool", want)

	// What admission accepted, the controller places: on the pool.
	f := waitFlockAvailable(t, ns, "pool")
	if got := memberNodes(f); !slices.Equal(capSorted(got), pool) {
		t.Errorf("members on nodes %v, want the pool %v", got, pool)
	}
	ctlDeleteFlock(t, ns, "pool", false)
}

// A NoSchedule taint excludes its node unless the template tolerates it; a
// toleration of another value does not count.
func TestCapacityTaintToleration(t *testing.T) {
	k := env.KubectlBuilt()
	ns := newNamespace(t)
	node := env.NodeNames[len(env.NodeNames)-1]
	const key = "flock.dev/e2e-dedicated"
	t.Cleanup(func() {
		capRestoreNode(t, node, func(n *corev1.Node) {
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == key })
		})
	})
	if out := kubectl(t, k, "taint", "nodes", node, key+"=db:NoSchedule"); strings.TrimSpace(out) != "node/"+node+" tainted" {
		t.Errorf("taint printed %q", out)
	}
	tolerating := func(f *flockv1alpha1.Flock, value string) *flockv1alpha1.Flock {
		f.Spec.Template.Spec.Tolerations = []corev1.Toleration{{
			Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: corev1.TaintEffectNoSchedule,
		}}
		return f
	}

	want := "spec.replicas: Invalid value: 3: only 2 of 3 nodes are eligible (1 has untolerated taint " + key + "=db:NoSchedule)"
	capWaitAdmission(t, newFlock("db", ns, 3), want)
	res := kubectlFails(t, k, flockManifest("db", ns, 3), "create", "-f", "-")
	capExpectRefusal(t, res, "db", want)
	res = kubectlFails(t, k, capFlockJSON(t, tolerating(newFlock("db", ns, 3), "web")), "create", "-f", "-")
	capExpectRefusal(t, res, "db", want)

	if out := kubectlInput(t, k, capFlockJSON(t, tolerating(newFlock("db", ns, 3), "db")), "create", "-f", "-"); strings.TrimSpace(out) != "flock.flock.dev/db created" {
		t.Errorf("create with the toleration printed %q", out)
	}
	// The scheduler agrees: the tolerating member runs on the tainted node.
	f := waitFlockAvailable(t, ns, "db")
	if !slices.Contains(memberNodes(f), node) {
		t.Errorf("members on %v, want one on the tainted node %s", memberNodes(f), node)
	}
	ctlDeleteFlock(t, ns, "db", false)
}

// A fourth node makes a Flock of 4 acceptable, and the controller places a
// member on it.
func TestCapacityAddNode(t *testing.T) {
	k := env.KubectlBuilt()
	ns := newNamespace(t)
	want := "spec.replicas: Invalid value: 4: only 3 of 3 nodes are eligible"
	capWaitAdmission(t, newFlock("four", ns, 4), want)
	res := kubectlFails(t, k, flockManifest("four", ns, 4), "create", "-f", "-")
	capExpectRefusal(t, res, "four", want)

	const name = "kwok-capacity-4"
	addNode(t, name, nil, nil)
	capWaitAdmission(t, newFlock("four", ns, 4), "")
	if out := kubectlInput(t, k, flockManifest("four", ns, 4), "create", "-f", "-"); strings.TrimSpace(out) != "flock.flock.dev/four created" {
		t.Errorf("create after adding a node printed %q", out)
	}
	f := waitFlockAvailable(t, ns, "four")
	if nodes := memberNodes(f); !slices.Contains(nodes, name) {
		t.Errorf("members on %v, want one on the new node %s", nodes, name)
	}
	// Before the node goes (addNode's cleanup).
	ctlDeleteFlock(t, ns, "four", false)
}

// A NotReady node: the node lifecycle controller taints it
// (node.kubernetes.io/not-ready, NoSchedule and NoExecute), so by the rule
// it is excluded unless tolerated. A Flock tolerating not-ready counts it and
// is accepted with an admission warning that kubectl prints.
func TestCapacityNotReadyNode(t *testing.T) {
	node := env.NodeNames[len(env.NodeNames)-1]
	nodes := env.Kube.CoreV1().Nodes()
	t.Cleanup(func() {
		capRestoreNode(t, node, func(n *corev1.Node) { delete(n.Labels, cluster.NodeNotReadyLabel) })
		// The next tests need the node Ready and untainted again.
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		for {
			n, err := nodes.Get(ctx, node, metav1.GetOptions{})
			if err == nil && capNodeReady(n) && !slices.ContainsFunc(n.Spec.Taints, capIsNotReadyTaint) {
				return
			}
			select {
			case <-ctx.Done():
				t.Errorf("node %s not Ready and untainted 90s after the test (err %v)", node, err)
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	if _, err := nodes.Patch(ctxFor(t), node, types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, cluster.NodeNotReadyLabel), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// Both taints, so that the first untolerated one (the one a refusal
	// names) no longer changes.
	var first corev1.Taint
	eventually(t, 60*time.Second, "node "+node+" NotReady and tainted by the node lifecycle controller", func(ctx context.Context) error {
		n, err := nodes.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		effects := map[corev1.TaintEffect]bool{}
		for _, tn := range n.Spec.Taints {
			if capIsNotReadyTaint(tn) {
				effects[tn.Effect] = true
			}
		}
		if capNodeReady(n) || !effects[corev1.TaintEffectNoSchedule] || !effects[corev1.TaintEffectNoExecute] {
			return fmt.Errorf("ready %v, taints %v", capNodeReady(n), n.Spec.Taints)
		}
		for _, tn := range n.Spec.Taints {
			if tn.Effect == corev1.TaintEffectNoSchedule || tn.Effect == corev1.TaintEffectNoExecute {
				first = tn
				break
			}
		}
		return nil
	})
	if first.Key != corev1.TaintNodeNotReady {
		t.Fatalf("the first NoSchedule/NoExecute taint of %s is %s, want a %s taint", node, first.ToString(), corev1.TaintNodeNotReady)
	}

	want := "spec.replicas: Invalid value: 3: only 2 of 3 nodes are eligible (1 has untolerated taint " + first.ToString() + ")"
	capWaitAdmission(t, newFlock("plain", "default", 3), want)
	tolerating := func(f *flockv1alpha1.Flock) *flockv1alpha1.Flock {
		f.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}}
		return f
	}
	wantWarning := fmt.Sprintf("Warning: 1 of 3 eligible nodes is NotReady (%s): members placed there wait until their node is Ready", node)

	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		res := kubectlFails(t, k, flockManifest("plain", ns, 3), "create", "-f", "-")
		capExpectRefusal(t, res, "plain", want)

		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		ok, err := env.KubectlInput(ctx, k, capFlockJSON(t, tolerating(newFlock("tolerant", ns, 3))), "create", "-f", "-")
		if err != nil {
			t.Fatalf("a Flock tolerating not-ready was refused: %v", err)
		}
		if strings.TrimSpace(ok.Stdout) != "flock.flock.dev/tolerant created" {
			t.Errorf("create printed %q", ok.Stdout)
		}
		if strings.TrimSpace(ok.Stderr) != wantWarning {
			t.Errorf("kubectl printed on stderr:\n%s\nwant the admission warning:\n%s", ok.Stderr, wantWarning)
		}
		ctlDeleteFlock(t, ns, "tolerant", false)
	})
}

// capWaitAdmission waits until flock-apiserver judges a server-side dry-run
// create of f as wanted: refused as Invalid with a message containing
// wantRefusal, or accepted when wantRefusal is "".
func capWaitAdmission(t *testing.T, f *flockv1alpha1.Flock, wantRefusal string) {
	t.Helper()
	what := "flock-apiserver accepts " + f.Name
	if wantRefusal != "" {
		what = fmt.Sprintf("flock-apiserver refuses %s with %q", f.Name, wantRefusal)
	}
	eventually(t, capAdmissionTimeout, what, func(ctx context.Context) error {
		_, err := env.Flock.FlockV1alpha1().Flocks(f.Namespace).Create(ctx, f.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case wantRefusal == "" && err != nil:
			return fmt.Errorf("refused: %w", err)
		case wantRefusal == "":
			return nil
		case err == nil:
			return errors.New("accepted")
		case !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), wantRefusal):
			return fmt.Errorf("refused with %q (422: %v)", err, apierrors.IsInvalid(err))
		}
		return nil
	})
}

// capExpectRefusal checks that kubectl printed exactly the refusal of Flock
// name with message want, as it prints a 422 Invalid.
func capExpectRefusal(t *testing.T, res *cluster.KubectlResult, name, want string) {
	t.Helper()
	full := fmt.Sprintf("The Flock %q is invalid: %s", name, want)
	if got := strings.TrimSpace(res.Stderr); got != full {
		t.Errorf("kubectl printed:\n%s\nwant:\n%s", got, full)
	}
}

// capFlockJSON is f as a JSON manifest for kubectl.
func capFlockJSON(t *testing.T, f *flockv1alpha1.Flock) string {
	t.Helper()
	f = f.DeepCopy()
	f.APIVersion, f.Kind = flockv1alpha1.SchemeGroupVersion.String(), "Flock"
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// capRestoreNode applies change to node (with retries on conflict) in a
// cleanup: it uses its own context and reports failures without stopping.
func capRestoreNode(t *testing.T, node string, change func(*corev1.Node)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := env.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		_, err = env.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Errorf("restoring node %s: %v", node, err)
	}
}

func capNodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func capIsNotReadyTaint(tn corev1.Taint) bool { return tn.Key == corev1.TaintNodeNotReady }

func capSorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// Planned member moves (issue 19.1/19.2): `kubectl flock move` through the
// Flock's move subresource refuses an ineligible or occupied target with the
// server's 422 text and moves a member to a free node while the others stay
// available; `kubectl flock drain-node` moves the members of two Flocks off
// one node, one at a time.
package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
	"flock.dev/flock/test/cluster"
)

// movePool adds kwok nodes <pool>-<i> for each i in names, labelled
// flock-e2e-pool=<pool> plus the labels given per node.
func movePool(t *testing.T, pool string, nodes map[string]map[string]string) {
	t.Helper()
	for name, extra := range nodes {
		labels := map[string]string{"flock-e2e-pool": pool}
		for k, v := range extra {
			labels[k] = v
		}
		addNode(t, name, labels, nil)
	}
}

// kubectlFlockFails runs `kubectl flock args...`, which must exit 1, and
// returns its stderr.
func kubectlFlockFails(t *testing.T, k cluster.Kubectl, path string, args ...string) string {
	t.Helper()
	res, err := kubectlWithEnv(t, k, []string{path}, "", append([]string{"flock"}, args...)...)
	if err == nil || res.ExitCode != 1 {
		t.Fatalf("kubectl flock %s: exit %d, %v, stdout %q; want exit 1", strings.Join(args, " "), res.ExitCode, err, res.Stdout)
	}
	return res.Stderr
}

// availability replays recorded pod events of the named pods, all
// available when the watch started, and returns the largest number of them
// unavailable at once, and which pods were ever unavailable. A pod is
// unavailable from its deletion (or the Added event of a not yet Ready
// replacement) until a Ready, not deleting copy is seen.
func availability(events []podEvent, pods []string) (most int, ever map[string]bool) {
	down := map[string]bool{}
	ever = map[string]bool{}
	watched := map[string]bool{}
	for _, p := range pods {
		watched[p] = true
	}
	for _, e := range events {
		name := e.Pod.Name
		if !watched[name] {
			continue
		}
		down[name] = e.Type == watch.Deleted || e.Pod.DeletionTimestamp != nil || !podReady(e.Pod)
		if down[name] {
			ever[name] = true
		}
		n := 0
		for _, d := range down {
			if d {
				n++
			}
		}
		most = max(most, n)
	}
	return most, ever
}

func TestKubectlFlockMove(t *testing.T) {
	ns := newNamespace(t)
	path := pluginPath(t)
	k := env.KubectlBuilt()
	pool := "move-" + ns
	nodes := map[string]map[string]string{}
	for i := range 4 {
		nodes[fmt.Sprintf("%s-%d", pool, i)] = nil
	}
	movePool(t, pool, nodes)
	// Outside the Flock's nodeSelector: not eligible.
	outside := pool + "-outside"
	addNode(t, outside, nil, nil)

	f := createPooledAvailable(t, "web", ns, 3, pool)
	free := freeNode(f, nodes)
	from := f.Status.Members[1].Node
	uids := map[string]string{}
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		uids[p.Name] = string(p.UID)
	}
	rec := watchPods(t, ns, "app=web")

	// Refused: a node outside the nodeSelector (admission, 422 on node).
	stderr := kubectlFlockFails(t, k, path, "move", "web", "1", "--to", outside, "-n", ns)
	if want := fmt.Sprintf(`FlockMove.flock.dev "web" is invalid: node: Invalid value: %q: node %s is not eligible for this Flock: does not match nodeSelector flock-e2e-pool=%s`, outside, outside, pool); !strings.Contains(stderr, want) {
		t.Errorf("move to an ineligible node: stderr %q, want %q", stderr, want)
	}
	// Refused: member 2's node (the registry, 422 on node), through the
	// plugin and through plain kubectl on the subresource.
	occupied := f.Status.Members[2].Node
	stderr = kubectlFlockFails(t, k, path, "move", "web", "1", "--to", occupied, "-n", ns)
	wantOccupied := fmt.Sprintf(`FlockMove.flock.dev "web" is invalid: node: Invalid value: %q: node %s holds member 2 of this Flock; two members never share a node`, occupied, occupied)
	if !strings.Contains(stderr, wantOccupied) {
		t.Errorf("move to an occupied node: stderr %q, want %q", stderr, wantOccupied)
	}
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		body := fmt.Sprintf(`{"apiVersion":"flock.dev/v1alpha1","kind":"FlockMove","ordinal":1,"node":%q}`, occupied)
		res := kubectlFails(t, k, body, "create", "--raw", "/apis/flock.dev/v1alpha1/namespaces/"+ns+"/flocks/web/move", "-f", "-")
		if !strings.Contains(res.Stderr, "holds member 2 of this Flock") || !strings.Contains(res.Stderr, "Invalid") {
			t.Errorf("kubectl create --raw of an occupied move: stderr %q", res.Stderr)
		}
	})
	if got, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "web", metav1.GetOptions{}); err != nil || got.Status.Members[1].Node != from || got.Status.Members[1].Move != nil {
		t.Fatalf("after refusals: %v, member 1 = %+v", err, got.Status.Members[1])
	}

	// Accepted: a free node.
	out := kubectlFlock(t, k, path, "move", "web", "1", "--to", free, "--wait", "--timeout", "50s", "-n", ns)
	if want := fmt.Sprintf("flock.flock.dev/web: member 1 moves from node %s to node %s", from, free); !strings.Contains(out, want) ||
		!strings.Contains(out, fmt.Sprintf("member 1 is Ready on node %s", free)) {
		t.Errorf("move output %q", out)
	}
	f, err = env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := env.Kube.CoreV1().Pods(ns).Get(ctxFor(t), "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := f.Status.Members[1]; m.Node != free || m.Move != nil || pod.Spec.NodeName != free || string(pod.UID) == uids["web-1"] {
		t.Errorf("member 1 = %+v, pod web-1 on %q (uid %s, was %s); want both on %s", m, pod.Spec.NodeName, pod.UID, uids["web-1"], free)
	}
	lcWaitEvent(t, ns, "web", "MemberMoved", fmt.Sprintf("member 1 (pod web-1) moved from node %s to node %s (planned move)", from, free))
	// Its data: a fresh PersistentVolume on the new node.
	pv, err := env.Kube.CoreV1().PersistentVolumes().Get(ctxFor(t), f.Status.Members[1].PersistentVolume, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("member 1's PersistentVolume %q: %v", f.Status.Members[1].PersistentVolume, err)
	}
	if terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms; len(terms) != 1 || terms[0].MatchExpressions[0].Values[0] != free {
		t.Errorf("member 1's PersistentVolume is pinned to %+v, want %s", terms, free)
	}

	expectMemberData(t, f, free)

	// Members 0 and 2 never went unavailable, from the watch.
	events := rec.events(t)
	for _, e := range events {
		if e.Pod.Name == "web-1" {
			continue
		}
		if e.Type == watch.Deleted || e.Pod.DeletionTimestamp != nil || !podReady(e.Pod) || string(e.Pod.UID) != uids[e.Pod.Name] {
			t.Errorf("%s went unavailable during the move:\n%s", e.Pod.Name, rec)
			break
		}
	}
	if _, ever := availability(events, []string{"web-1"}); !ever["web-1"] {
		t.Errorf("the watch never saw web-1 go down:\n%s", rec)
	}
}

// expectMemberData checks that Flock f has one PersistentVolume and one
// claim per member and no other (nothing orphaned by a move), and that
// member 1's volume is on node.
func expectMemberData(t *testing.T, f *flockv1alpha1.Flock, node string) {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: flockcontroller.LabelFlockUID + "=" + string(f.UID)}
	eventually(t, lcTimeout, "one PersistentVolume and claim per member", func(ctx context.Context) error {
		pvs, err := env.Kube.CoreV1().PersistentVolumes().List(ctx, sel)
		if err != nil {
			return err
		}
		claims, err := env.Kube.CoreV1().PersistentVolumeClaims(f.Namespace).List(ctx, sel)
		if err != nil {
			return err
		}
		var onNode []string
		for _, pv := range pvs.Items {
			if pv.Name == flockcontroller.PersistentVolumeName(f.UID, 1) {
				onNode = pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values
			}
		}
		if len(pvs.Items) != len(f.Status.Members) || len(claims.Items) != len(f.Status.Members) || len(onNode) != 1 || onNode[0] != node {
			return fmt.Errorf("%d PersistentVolumes, %d claims for %d members; member 1's volume on %v, want %s",
				len(pvs.Items), len(claims.Items), len(f.Status.Members), onNode, node)
		}
		return nil
	})
}

// TestFlockMoveDeleteRetention: with whenScaled Delete, the directory a
// moved member leaves is removed by the cleanup helper on the old node
// before fresh data is made on the new one; nothing is left behind.
func TestFlockMoveDeleteRetention(t *testing.T) {
	ns := newNamespace(t)
	pool := "movedel-" + ns
	nodes := map[string]map[string]string{}
	for i := range 3 {
		nodes[fmt.Sprintf("%s-%d", pool, i)] = nil
	}
	movePool(t, pool, nodes)
	f := newFlock("web", ns, 2)
	f.Spec.Placement.NodeSelector = map[string]string{"flock-e2e-pool": pool}
	f.Spec.Storage.Retention.WhenScaled = flockv1alpha1.DeleteRetentionPolicy
	createFlock(t, f)
	f = waitFlockAvailable(t, ns, "web")
	free := freeNode(f, nodes)
	from := f.Status.Members[1].Node
	if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Move(ctxFor(t), "web", &flockv1alpha1.FlockMove{Ordinal: 1, Node: free}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("move: %v", err)
	}
	lcWaitEvent(t, ns, "web", "MemberMoved", "moved from node "+from+" to node "+free, "the old one on node "+from+" is removed")
	lcWaitEvent(t, ns, "web", "VolumeReplaced", "member 1: its data directory was removed")
	f = waitFlockAvailable(t, ns, "web")
	if m := f.Status.Members[1]; m.Node != free {
		t.Fatalf("member 1 = %+v, want on %s", m, free)
	}
	expectMemberData(t, f, free)
}

func TestKubectlFlockDrainNode(t *testing.T) {
	ns := newNamespace(t)
	path := pluginPath(t)
	k := env.KubectlBuilt()
	pool := "drain-" + ns
	node := func(i int) string { return fmt.Sprintf("%s-%d", pool, i) }
	// a fits on nodes 1 and 2 only, b on nodes 2 and 3 only: both have a
	// member on node 2.
	movePool(t, pool, map[string]map[string]string{
		node(1): {"fa": "yes"}, node(2): {"fa": "yes", "fb": "yes"}, node(3): {"fb": "yes"},
	})
	for _, name := range []string{"a", "b"} {
		f := newFlock(name, ns, 2)
		f.Spec.Placement.NodeSelector = map[string]string{"flock-e2e-pool": pool, "f" + name: "yes"}
		createFlock(t, f)
	}
	for _, name := range []string{"a", "b"} {
		waitFlockAvailable(t, ns, name)
	}
	// Room to move to.
	movePool(t, pool, map[string]map[string]string{node(4): {"fa": "yes", "fb": "yes"}, node(5): {"fa": "yes", "fb": "yes"}})
	onNode2 := func() []string {
		var on []string
		for _, name := range []string{"a", "b"} {
			f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range f.Status.Members {
				if m.Node == node(2) {
					on = append(on, m.Pod)
				}
			}
		}
		return on
	}
	moving := onNode2()
	if len(moving) != 2 {
		t.Fatalf("members on %s: %v, want one of each Flock", node(2), moving)
	}

	// --dry-run: the server checks each move; nothing moves.
	out := kubectlFlock(t, k, path, "drain-node", node(2), "--dry-run", "-n", ns)
	if strings.Count(out, "(server dry run)") != 2 {
		t.Errorf("dry run output %q, want two checked moves", out)
	}
	if got := onNode2(); len(got) != 2 {
		t.Fatalf("after a dry run, members on %s: %v", node(2), got)
	}

	rec := watchPods(t, ns, "")
	out = kubectlFlock(t, k, path, "drain-node", node(2), "--timeout", "25s", "-n", ns)
	for _, want := range []string{"[1/2] " + ns + "/a member", "[2/2] " + ns + "/b member", "is Ready on node", "node " + node(2) + " drained: 2 member(s) moved"} {
		if !strings.Contains(out, want) {
			t.Errorf("drain-node output lacks %q:\n%s", want, out)
		}
	}
	if got := onNode2(); len(got) != 0 {
		t.Errorf("members still on %s: %v", node(2), got)
	}
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == node(2) {
			t.Errorf("pod %s is still on %s", p.Name, node(2))
		}
	}
	if out := kubectlFlock(t, k, path, "where", node(2), "-n", ns, "-o", "json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("where %s: %s", node(2), out)
	}
	// One at a time, from the watch: both moved members went down, never
	// both at once (nor any other member).
	most, ever := availability(rec.events(t), []string{"a-0", "a-1", "b-0", "b-1"})
	if most != 1 || !ever[moving[0]] || !ever[moving[1]] || len(ever) != 2 {
		t.Errorf("at most %d members unavailable at once, down were %v; want 1 at a time, exactly %v:\n%s", most, ever, moving, rec)
	}
	for _, name := range []string{"a", "b"} {
		lcWaitEvent(t, ns, name, "MemberMoved", "from node "+node(2)+" to node ")
	}
}

// TestFlockMoveSurvivesRestart: a move accepted while the other members
// are not yet available (minReadySeconds) waits in
// status.members[1].move; flock-apiserver (and with it the controller)
// restarts; the restarted controller carries the move out.
func TestFlockMoveSurvivesRestart(t *testing.T) {
	ns := newNamespace(t)
	pool := "restart-" + ns
	nodes := map[string]map[string]string{}
	for i := range 4 {
		nodes[fmt.Sprintf("%s-%d", pool, i)] = nil
	}
	movePool(t, pool, nodes)
	f := newFlock("web", ns, 3)
	f.Spec.Placement.NodeSelector = map[string]string{"flock-e2e-pool": pool}
	f.Spec.PodManagementPolicy = "Parallel"
	f.Spec.MinReadySeconds = 40
	createFlock(t, f)
	eventually(t, lcTimeout, "every member Ready", func(ctx context.Context) error {
		got, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.ReadyReplicas != 3 || len(got.Status.Members) != 3 {
			return fmt.Errorf("readyReplicas %d, members %d", got.Status.ReadyReplicas, len(got.Status.Members))
		}
		f = got
		return nil
	})
	free := freeNode(f, nodes)
	from := f.Status.Members[1].Node
	if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Move(ctxFor(t), "web", &flockv1alpha1.FlockMove{Ordinal: 1, Node: free}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("move: %v", err)
	}
	lcWaitEvent(t, ns, "web", "MoveWaiting", "member 1 waits to move from node "+from+" to node "+free, "is unavailable")
	got, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Status.Members[1]; m.Node != from || m.Move == nil || m.Move.Node != free {
		t.Fatalf("before the restart member 1 = %+v, want a pending move to %s", m, free)
	}

	if _, err := env.RestartFlockAPIServer(ctxFor(t), flockArgs()); err != nil {
		t.Fatalf("restart flock-apiserver: %v", err)
	}
	restarted := time.Now()
	eventually(t, 2*time.Minute, "member 1 moved by the restarted controller", func(ctx context.Context) error {
		got, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if m := got.Status.Members[1]; m.Node != free || m.Move != nil {
			return fmt.Errorf("member 1 = %+v", m)
		}
		pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "web-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Spec.NodeName != free {
			return fmt.Errorf("pod web-1 on %q", pod.Spec.NodeName)
		}
		return nil
	})
	msg := lcWaitEvent(t, ns, "web", "MemberMoved", fmt.Sprintf("member 1 (pod web-1) moved from node %s to node %s", from, free))
	t.Logf("restarted at %s; %s", restarted.Format(time.RFC3339), msg)
}

// freeNode is a node of nodes that holds no member of f.
func freeNode[V any](f *flockv1alpha1.Flock, nodes map[string]V) string {
	used := map[string]bool{}
	for _, m := range f.Status.Members {
		used[m.Node] = true
	}
	for n := range nodes {
		if !used[n] {
			return n
		}
	}
	return ""
}

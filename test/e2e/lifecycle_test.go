package e2e

// Issue 6 end to end: what happens to members after first placement —
// rolling updates (order, partition, a halted rollout resumed by a fixed
// template), data cleanup under whenDeleted: Delete, and node loss under
// Reassign and Wait — on kwok nodes with the real scheduler, garbage
// collector and pod GC. Every test brings its own nodes (labelled with a
// pool only its Flock selects), so deleting one disturbs no other test.

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
	"flock.dev/flock/test/cluster"
)

// lcTimeout bounds one lifecycle step (a rollout of three members, a
// cleanup, a reassignment).
const lcTimeout = 120 * time.Second

// lcPoolLabel marks the nodes a lifecycle test adds for its Flock.
const lcPoolLabel = "flock.dev/e2e-pool"

// lcNodes adds n kwok nodes labelled with a pool of their own, named after
// the namespace, waits until they can take members, and returns their
// names; they are deleted when the test ends (unless the test deleted
// them).
func lcNodes(t *testing.T, ns string, n int) []string {
	t.Helper()
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-n%d", ns, i)
		addNode(t, name, map[string]string{lcPoolLabel: ns}, nil)
		names = append(names, name)
	}
	// Until the node lifecycle controller lifts the not-ready taint of a
	// new node, the capacity check does not count it.
	eventually(t, lcTimeout, fmt.Sprintf("nodes %v without the not-ready taint", names), func(ctx context.Context) error {
		for _, name := range names {
			node, err := env.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, taint := range node.Spec.Taints {
				if taint.Key == corev1.TaintNodeNotReady {
					return fmt.Errorf("node %s has taint %s", name, taint.ToString())
				}
			}
		}
		return nil
	})
	return names
}

// lcFlock is a Flock of replicas members on the test's node pool.
func lcFlock(name, ns string, replicas int32) *flockv1alpha1.Flock {
	f := newFlock(name, ns, replicas)
	f.Spec.Placement.NodeSelector = map[string]string{lcPoolLabel: ns}
	return f
}

// lcUpdate changes Flock ns/name with mutate, retrying on conflicts (the
// controller writes status all the time).
func lcUpdate(t *testing.T, ns, name string, mutate func(*flockv1alpha1.Flock)) *flockv1alpha1.Flock {
	t.Helper()
	var out *flockv1alpha1.Flock
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(f)
		out, err = env.Flock.FlockV1alpha1().Flocks(ns).Update(ctxFor(t), f, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update Flock %s/%s: %v", ns, name, err)
	}
	return out
}

// lcGet reads Flock ns/name.
func lcGet(ctx context.Context, ns, name string) (*flockv1alpha1.Flock, error) {
	return env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
}

// lcWaitRolledOut waits until every member of Flock ns/name runs revision
// rev (status and pods agree), is Ready, and the Flock is Available.
func lcWaitRolledOut(t *testing.T, ns, name, rev string) *flockv1alpha1.Flock {
	t.Helper()
	var got *flockv1alpha1.Flock
	eventually(t, lcTimeout, fmt.Sprintf("Flock %s/%s rolled out to %s", ns, name, rev), func(ctx context.Context) error {
		f, err := lcGet(ctx, ns, name)
		if err != nil {
			return err
		}
		if err := flockAvailableErr(f); err != nil {
			return err
		}
		st := f.Status
		if st.UpdateRevision != rev || st.CurrentRevision != rev || st.UpdatedReplicas != *f.Spec.Replicas {
			return fmt.Errorf("revisions: update %s, current %s, %d updated", st.UpdateRevision, st.CurrentRevision, st.UpdatedReplicas)
		}
		for _, p := range ctlMemberPods(t, ns, name) {
			if p.Labels[flockv1alpha1.LabelRevision] != rev {
				return fmt.Errorf("pod %s at revision %s", p.Name, p.Labels[flockv1alpha1.LabelRevision])
			}
		}
		got = f
		return nil
	})
	return got
}

// lcWaitEvent waits for an event on Flock ns/name with the given reason
// whose message contains every one of parts, and returns its message.
func lcWaitEvent(t *testing.T, ns, name, reason string, parts ...string) string {
	t.Helper()
	var msg string
	eventually(t, lcTimeout, fmt.Sprintf("event %s on Flock %s/%s", reason, ns, name), func(ctx context.Context) error {
		list, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.String(),
		})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			ok := e.InvolvedObject.Kind == "Flock"
			for _, p := range parts {
				ok = ok && strings.Contains(e.Message, p)
			}
			if ok {
				msg = e.Message
				return nil
			}
			seen = append(seen, e.Message)
		}
		return fmt.Errorf("events with reason %s: %q", reason, seen)
	})
	return msg
}

// A template change rolls x-2, x-1, x-0 in that order, one at a time, each
// back on its own node; the template of each revision is kept in a
// ControllerRevision. Then, with partition 1, a second change leaves x-0 on
// the previous revision.
func TestLifecycleRollingUpdate(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 3)
	const name = "x"
	created := createFlock(t, lcFlock(name, ns, 3))
	before := waitFlockAvailable(t, ns, name)
	nodes := memberNodes(before)
	rev1 := before.Status.UpdateRevision
	rec := watchPods(t, ns, flockv1alpha1.LabelFlockName+"="+name)

	f := lcUpdate(t, ns, name, func(f *flockv1alpha1.Flock) { f.Spec.Template.Spec.Containers[0].Image = "busybox:1.37" })
	rev2 := flockcontroller.Revision(&f.Spec.Template)
	if rev2 == rev1 {
		t.Fatal("the template change made no new revision")
	}
	lcWaitRolledOut(t, ns, name, rev2)

	// Order: each old pod is deleted only after the new pod above it is
	// Ready, from the highest ordinal down; every new pod is on its node.
	events := rec.events(t)
	var order []string
	readyAt := map[string]int{}
	for i, e := range events {
		p := e.Pod
		if e.Type == watch.Deleted && p.Labels[flockv1alpha1.LabelRevision] == rev1 {
			order = append(order, p.Name)
		}
		if p.Labels[flockv1alpha1.LabelRevision] == rev2 && podReady(p) {
			if _, ok := readyAt[p.Name]; !ok {
				readyAt[p.Name] = i
			}
			if want := nodes[ctlOrdinalOf(p.Name)]; p.Spec.NodeName != want {
				t.Errorf("%s at %s runs on %s, want its node %s", p.Name, rev2, p.Spec.NodeName, want)
			}
		}
	}
	if want := []string{"x-2", "x-1", "x-0"}; !slices.Equal(order, want) {
		t.Fatalf("old pods deleted in order %v, want %v; events:\n%s", order, want, rec)
	}
	for i := 1; i < 3; i++ {
		upper, lower := ctlMemberPodName(name, 3-i), ctlMemberPodName(name, 2-i)
		del := slices.IndexFunc(events, func(e podEvent) bool {
			return e.Pod.Name == lower && (e.Pod.DeletionTimestamp != nil || e.Type == watch.Deleted) && e.Pod.Labels[flockv1alpha1.LabelRevision] == rev1
		})
		if ready, ok := readyAt[upper]; !ok || del < ready {
			t.Errorf("%s deleted (event %d) before %s was Ready at %s (event %d); events:\n%s", lower, del, upper, rev2, ready, rec)
		}
	}

	// Both templates are recorded in ControllerRevisions owned by the Flock.
	crs, err := env.Kube.AppsV1().ControllerRevisions(ns).List(ctxFor(t), metav1.ListOptions{LabelSelector: flockv1alpha1.LabelFlockName + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var crNames []string
	for i := range crs.Items {
		cr := &crs.Items[i]
		crNames = append(crNames, cr.Name)
		ctlCheckControllerRef(t, "ControllerRevision "+cr.Name, cr.OwnerReferences, created)
		lcCheckRevision(t, cr)
	}
	slices.Sort(crNames)
	want := []string{name + "-" + rev1, name + "-" + rev2}
	slices.Sort(want)
	if !slices.Equal(crNames, want) {
		t.Errorf("ControllerRevisions %v, want %v", crNames, want)
	}

	// Partition 1: x-2 and x-1 move to the next revision, x-0 stays.
	x0 := ctlMemberPods(t, ns, name)[0]
	f = lcUpdate(t, ns, name, func(f *flockv1alpha1.Flock) {
		one := int32(1)
		f.Spec.UpdateStrategy.RollingUpdate.Partition = &one
		f.Spec.Template.Spec.Containers[0].Image = "busybox:1.36"
	})
	rev3 := flockcontroller.Revision(&f.Spec.Template)
	eventually(t, lcTimeout, "x-2 and x-1 at the new revision", func(ctx context.Context) error {
		f, err := lcGet(ctx, ns, name)
		if err != nil {
			return err
		}
		st := f.Status
		c := meta.FindStatusCondition(f.Status.Conditions, flockv1alpha1.FlockProgressing)
		if st.ObservedGeneration != f.Generation || st.UpdatedReplicas != 2 || st.ReadyReplicas != 3 || st.CurrentRevision != rev2 ||
			c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("status %+v", st)
		}
		if !strings.Contains(c.Message, "below partition 1 stay at revision "+rev2) {
			return fmt.Errorf("Progressing %+v", c)
		}
		return nil
	})
	pods := ctlMemberPods(t, ns, name)
	for _, p := range pods {
		wantRev := rev3
		if p.Name == "x-0" {
			wantRev = rev2
		}
		if got := p.Labels[flockv1alpha1.LabelRevision]; got != wantRev || !podReady(p) || p.Spec.NodeName != nodes[ctlOrdinalOf(p.Name)] {
			t.Errorf("%s: revision %s (want %s), ready %v, node %s", p.Name, got, wantRev, podReady(p), p.Spec.NodeName)
		}
	}
	if pods[0].UID != x0.UID {
		t.Errorf("x-0 was replaced below the partition")
	}
}

// lcCheckRevision checks that a ControllerRevision's data is the template of
// the revision it is named after.
func lcCheckRevision(t *testing.T, cr *appsv1.ControllerRevision) {
	t.Helper()
	tmpl, err := flockcontroller.TemplateOf(cr)
	if err != nil {
		t.Error(err)
		return
	}
	if rev := flockcontroller.Revision(tmpl); cr.Name != "x-"+rev || cr.Labels[flockv1alpha1.LabelRevision] != rev {
		t.Errorf("ControllerRevision %s records revision %s (labels %v)", cr.Name, rev, cr.Labels)
	}
}

// A template whose pods never become Ready halts the rollout at x-2, with a
// condition and an event; the members below keep running the old
// revision. A fixed template resumes the rollout without anyone deleting
// the stuck pod.
func TestLifecycleHaltedRollout(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 3)
	const name = "x"
	createFlock(t, lcFlock(name, ns, 3))
	before := waitFlockAvailable(t, ns, name)
	rev1 := before.Status.UpdateRevision
	old := ctlMemberPods(t, ns, name)

	f := lcUpdate(t, ns, name, func(f *flockv1alpha1.Flock) {
		f.Spec.Template.Annotations = map[string]string{cluster.NeverReadyMarker: "true"}
	})
	broken := flockcontroller.Revision(&f.Spec.Template)
	eventually(t, lcTimeout, "the rollout halted at x-2", func(ctx context.Context) error {
		f, err := lcGet(ctx, ns, name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(f.Status.Conditions, flockv1alpha1.FlockProgressing)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != flockcontroller.ReasonRolloutHalted {
			return fmt.Errorf("Progressing %+v", c)
		}
		if !strings.Contains(c.Message, "halted at pod x-2") || !strings.Contains(c.Message, broken) {
			return fmt.Errorf("Progressing %+v", c)
		}
		return nil
	})
	lcWaitEvent(t, ns, name, "RolloutHalted", "x-2", broken)
	// `kubectl flock rollout status` says so, and does not wait.
	if stderr := kubectlFlockFails(t, env.KubectlBuilt(), pluginPath(t), "rollout", "status", name, "-n", ns, "--timeout=30s"); !strings.Contains(stderr, "rollout of Flock x halted: ") || !strings.Contains(stderr, "halted at pod x-2") {
		t.Errorf("rollout status of the halted rollout: %q", stderr)
	}
	pods := ctlMemberPods(t, ns, name)
	if len(pods) != 3 {
		t.Fatalf("pods %v", ctlPodNames(pods))
	}
	if p := pods[2]; p.Labels[flockv1alpha1.LabelRevision] != broken || podReady(p) || p.Status.Phase != corev1.PodRunning {
		t.Errorf("x-2: revision %s, phase %s, ready %v", p.Labels[flockv1alpha1.LabelRevision], p.Status.Phase, podReady(p))
	}
	for i := range 2 {
		if p := pods[i]; p.UID != old[i].UID || p.Labels[flockv1alpha1.LabelRevision] != rev1 || !podReady(p) {
			t.Errorf("%s was touched by the halted rollout: uid %s (was %s), revision %s, ready %v",
				p.Name, p.UID, old[i].UID, p.Labels[flockv1alpha1.LabelRevision], podReady(p))
		}
	}

	// Fix the template: no pod is deleted by hand.
	f = lcUpdate(t, ns, name, func(f *flockv1alpha1.Flock) {
		f.Spec.Template.Annotations = nil
		f.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
	})
	fixed := flockcontroller.Revision(&f.Spec.Template)
	got := lcWaitRolledOut(t, ns, name, fixed)
	if c := meta.FindStatusCondition(got.Status.Conditions, flockv1alpha1.FlockProgressing); c == nil || c.Reason != flockcontroller.ReasonComplete {
		t.Errorf("Progressing %+v", c)
	}
}

// Deleting a Flock with whenDeleted: Delete: the finalizer holds it while
// the controller deletes the member pods, then runs a helper on each
// member's node, in the server's namespace (never while that member's pod is
// still there), then deletes its claim and volume; the Flock
// goes once every helper has succeeded and is deleted.
func TestLifecycleDeleteRemovesData(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 2)
	const name = "x"
	f := lcFlock(name, ns, 2)
	f.Spec.Storage.Retention.WhenDeleted = flockv1alpha1.DeleteRetentionPolicy
	createFlock(t, f)
	before := waitFlockAvailable(t, ns, name)
	if !slices.Contains(before.Finalizers, flockv1alpha1.FinalizerDataCleanup) {
		t.Fatalf("finalizers %v, want %s", before.Finalizers, flockv1alpha1.FinalizerDataCleanup)
	}
	rec := watchPods(t, ns, "")
	helpers := watchPods(t, stHelperNamespace, flockcontroller.LabelFlockUID+"="+string(before.UID))
	volumes := stCheckMemberData(t, before)

	if err := env.Flock.FlockV1alpha1().Flocks(ns).Delete(ctxFor(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, lcTimeout, "the Flock, its pods, claims and volumes gone", func(ctx context.Context) error {
		if _, err := lcGet(ctx, ns, name); err == nil {
			return fmt.Errorf("the Flock is still there")
		}
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		for _, pv := range volumes {
			if _, err := stVolume(ctx, pv.Name); err == nil {
				return fmt.Errorf("volume %s left", pv.Name)
			}
		}
		return nil
	})

	// Each member's helper (in the server's namespace) started only once
	// the member's pod was gone, on the member's node, and succeeded.
	memberEvents, helperEvents := rec.events(t), helpers.events(t)
	for _, m := range before.Status.Members {
		helper, member := flockcontroller.HelperPodName(flockcontroller.HelperCleanup, before.UID, m.Ordinal), fmt.Sprintf("x-%d", m.Ordinal)
		gone := slices.IndexFunc(memberEvents, func(e podEvent) bool { return e.Type == watch.Deleted && e.Pod.Name == member })
		added := slices.IndexFunc(helperEvents, func(e podEvent) bool { return e.Type == watch.Added && e.Pod.Name == helper })
		succeeded := slices.IndexFunc(helperEvents, func(e podEvent) bool { return e.Pod.Name == helper && e.Pod.Status.Phase == corev1.PodSucceeded })
		if added < 0 || succeeded < 0 || gone < 0 || helperEvents[added].At.Before(memberEvents[gone].At) {
			t.Errorf("member %d: pod deleted at event %d, helper added at %d, succeeded at %d; events:\n%s\nhelpers:\n%s", m.Ordinal, gone, added, succeeded, rec, helpers)
			continue
		}
		if p := helperEvents[added].Pod; p.Spec.NodeName != m.Node || p.Spec.Volumes[0].HostPath == nil || p.Spec.Volumes[0].HostPath.Path != filepath.Join(env.DataRoot(), ns) {
			t.Errorf("%s on %s mounting %+v, want node %s and %s", helper, p.Spec.NodeName, p.Spec.Volumes, m.Node, filepath.Join(env.DataRoot(), ns))
		}
	}

	// In a namespace being deleted the cleanup still runs (its helpers are
	// in the server's namespace), and neither the Flock nor the namespace
	// is stuck.
	t.Run("namespace deleted", func(t *testing.T) {
		ns2 := newNamespace(t)
		f := lcFlock(name, ns2, 1)
		f.Spec.Placement.NodeSelector = map[string]string{lcPoolLabel: ns}
		f.Spec.Storage.Retention.WhenDeleted = flockv1alpha1.DeleteRetentionPolicy
		createFlock(t, f)
		waitFlockAvailable(t, ns2, name)
		if err := env.Kube.CoreV1().Namespaces().Delete(ctxFor(t), ns2, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, lcTimeout, "namespace "+ns2+" gone", func(ctx context.Context) error {
			n, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns2, metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("namespace %s: %+v", n.Status.Phase, n.Status.Conditions)
			}
			return nil
		})
	})
}

// A namespace whose finalizer an administrator removed while it was stuck
// Terminating because flock-apiserver was down (kube-controller-manager could
// not discover flock.dev, so it could not delete the namespace's Flocks):
// once flock-apiserver is back, the Flock left behind in its own etcd is
// deleted, as the namespace controller would have done, and its data goes
// as whenDeleted: Delete says; no Flock of a gone namespace lingers, to be
// retried forever or to come back with a namespace of the same name.
func TestLifecycleNamespaceFinalizedByHandDeletesItsFlock(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 1)
	const name = "left"
	f := lcFlock(name, ns, 1)
	f.Spec.Storage.Retention.WhenDeleted = flockv1alpha1.DeleteRetentionPolicy
	_, volumes := stStart(t, f)

	if err := env.FlockProcess().Stop(cluster.DefaultStopGrace); err != nil {
		t.Fatalf("stop flock-apiserver: %v", err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if _, err := env.RestartFlockAPIServer(context.Background(), flockArgs()); err != nil {
				t.Errorf("start flock-apiserver again: %v", err)
			}
		}
	})
	if err := env.Kube.CoreV1().Namespaces().Delete(ctxFor(t), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// What kube-controller-manager can delete goes; the namespace then waits
	// for flock.dev to be discovered again.
	eventually(t, lcTimeout, "namespace "+ns+" stuck Terminating on flock.dev, its pods, claims and Services gone", func(ctx context.Context) error {
		return lcStuckOnFlockDev(ctx, ns)
	})
	// The administrator's way out: the namespace finalized by hand (read
	// again on a conflict: kube-controller-manager keeps writing its
	// conditions).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := env.Kube.CoreV1().Namespaces().Get(ctxFor(t), ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Finalizers = nil
		_, err = env.Kube.CoreV1().Namespaces().Finalize(ctxFor(t), n, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("finalize namespace %s: %v", ns, err)
	}
	eventually(t, lcTimeout, "namespace "+ns+" gone", func(ctx context.Context) error {
		if _, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s: %v", ns, err)
		}
		return nil
	})

	restarted = true
	logFile := filepath.Join(env.LogDir(), "flock-apiserver.log")
	logStart := fileSize(logFile)
	if _, err := env.RestartFlockAPIServer(ctxFor(t), flockArgs()); err != nil {
		t.Fatalf("start flock-apiserver again: %v", err)
	}
	defer func() {
		// Until it was deleted, the controller's writes for the Flock
		// were refused ("namespaces ... not found"): retried quietly,
		// not failures to log.
		lines, err := logLinesFrom(logFile, logStart)
		if err != nil {
			t.Error(err)
		}
		key := ns + "/" + name
		for _, l := range lines {
			if strings.Contains(l, "Error syncing Flock") && strings.Contains(l, key) {
				t.Errorf("flock-apiserver logged a failed sync of the Flock of the gone namespace: %s", l)
				break
			}
		}
	}()
	eventually(t, lcTimeout, "the Flock of the gone namespace and its volumes gone", func(ctx context.Context) error {
		if got, err := lcGet(ctx, ns, name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Flock: %v (deletionTimestamp %v)", err, deletionOf(got))
		}
		for _, pv := range volumes {
			if _, err := stVolume(ctx, pv.Name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("volume %s: %v", pv.Name, err)
			}
		}
		return nil
	})
}

// While a namespace is being deleted and its Flock is not yet (flock.dev
// cannot be discovered: the APIService points at a closed port, while
// flock-apiserver runs on), kube-controller-manager deletes the namespace's
// pods, claims and Service, and the Flock controller makes none of them
// again: its namespace cache shows the namespace Terminating, and its syncs
// create nothing, where they used to send creates that kube-apiserver
// refused, again at each event of the teardown. Once the APIService is
// back, the Flock and the namespace go.
func TestLifecycleNamespaceBeingDeletedGetsNothingNew(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 2)
	const name = "frozen"
	// The controller logs what its syncs skip at verbosity 2.
	logFile := filepath.Join(env.LogDir(), "flock-apiserver.log")
	logStart := fileSize(logFile)
	if _, err := env.RestartFlockAPIServer(ctxFor(t), append(flockArgs(), "--v=2")); err != nil {
		t.Fatalf("start flock-apiserver at verbosity 2: %v", err)
	}
	t.Cleanup(func() {
		if _, err := env.RestartFlockAPIServer(context.Background(), flockArgs()); err != nil {
			t.Errorf("start flock-apiserver again: %v", err)
		}
	})
	createFlock(t, lcFlock(name, ns, 2))
	waitFlockAvailable(t, ns, name)

	restore := lcDivertAPIService(t)
	if err := env.Kube.CoreV1().Namespaces().Delete(ctxFor(t), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	key := `flock="` + ns + "/" + name + `"`
	frozen := func(l string) bool {
		return strings.Contains(l, "nothing is created for it") && strings.Contains(l, key)
	}
	eventually(t, lcTimeout, "namespace "+ns+" Terminating on flock.dev, its pods, claims and Service gone, the Flock's syncs creating nothing", func(ctx context.Context) error {
		if err := lcStuckOnFlockDev(ctx, ns); err != nil {
			return err
		}
		lines, err := logLinesFrom(logFile, logStart)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(lines, frozen) {
			return fmt.Errorf("flock-apiserver has not logged a sync of %s/%s that creates nothing", ns, name)
		}
		return nil
	})
	// Every sync since the controller saw the namespace Terminating made
	// nothing: no create was refused after that.
	lines, err := logLinesFrom(logFile, logStart)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines[slices.IndexFunc(lines, frozen):] {
		if strings.Contains(l, "its writes are refused") && strings.Contains(l, key) {
			t.Errorf("a create for the Flock refused after its namespace was seen Terminating: %s", l)
		}
	}

	restore()
	eventually(t, lcTimeout, "the Flock and namespace "+ns+" gone", func(ctx context.Context) error {
		if _, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s: %v", ns, err)
		}
		if got, err := lcGet(ctx, ns, name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Flock: %v (deletionTimestamp %v)", err, deletionOf(got))
		}
		return nil
	})
}

// lcDivertAPIService points the APIService at a closed port, waits until
// kube-apiserver holds it unavailable, and returns the function that points
// it back and waits until it is Available again (also run when the test
// ends, if the test did not).
func lcDivertAPIService(t *testing.T) (restore func()) {
	t.Helper()
	path := "/apis/apiregistration.k8s.io/v1/apiservices/" + cluster.APIServiceName
	rc := env.Kube.Discovery().RESTClient()
	raw, err := rc.Get().AbsPath(path).DoRaw(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	var svc struct {
		Spec struct {
			Service struct {
				Port int32 `json:"port"`
			} `json:"service"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &svc); err != nil || svc.Spec.Service.Port == 0 {
		t.Fatalf("APIService %s: port %d, %v", cluster.APIServiceName, svc.Spec.Service.Port, err)
	}
	setPort := func(ctx context.Context, port int32) error {
		return rc.Patch(types.MergePatchType).AbsPath(path).
			Body([]byte(fmt.Sprintf(`{"spec":{"service":{"port":%d}}}`, port))).Do(ctx).Error()
	}
	restored := false
	restore = func() {
		t.Helper()
		if restored {
			return
		}
		restored = true
		ctx, cancel := context.WithTimeout(context.Background(), lcTimeout)
		defer cancel()
		if err := setPort(ctx, svc.Spec.Service.Port); err != nil {
			t.Errorf("point the APIService back at port %d: %v", svc.Spec.Service.Port, err)
			return
		}
		// Not eventually: this may run as the test ends, its context done.
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			ok, _ := env.APIServiceAvailable(ctx)
			return ok, nil
		})
		if err != nil {
			t.Errorf("APIService %s not Available again within %v", cluster.APIServiceName, lcTimeout)
		}
	}
	t.Cleanup(restore)
	if err := setPort(ctxFor(t), 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, lcTimeout, "APIService "+cluster.APIServiceName+" unavailable", func(ctx context.Context) error {
		if ok, _ := env.APIServiceAvailable(ctx); ok {
			return fmt.Errorf("still Available")
		}
		return nil
	})
	return restore
}

// lcStuckOnFlockDev returns nil once namespace ns is Terminating, waiting
// for flock.dev to be discovered, and has no pods, claims or Services left:
// what kube-controller-manager deletes while flock.dev cannot be discovered.
func lcStuckOnFlockDev(ctx context.Context, ns string) error {
	n, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		return err
	}
	c := namespaceCondition(n, corev1.NamespaceDeletionDiscoveryFailure)
	if c == nil || c.Status != corev1.ConditionTrue || !strings.Contains(c.Message, "flock.dev") {
		return fmt.Errorf("namespace %s, conditions %+v", n.Status.Phase, n.Status.Conditions)
	}
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	claims, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	services, err := env.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(pods.Items)+len(claims.Items)+len(services.Items) != 0 {
		return fmt.Errorf("%d pods, %d claims, %d Services left", len(pods.Items), len(claims.Items), len(services.Items))
	}
	return nil
}

// namespaceCondition returns n's condition of type ct, or nil.
func namespaceCondition(n *corev1.Namespace, ct corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ct {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// deletionOf is f's deletionTimestamp, for messages (nil for no Flock).
func deletionOf(f *flockv1alpha1.Flock) *metav1.Time {
	if f == nil {
		return nil
	}
	return f.DeletionTimestamp
}

// lcReassignFlock creates Flock ns/name of two members on a pool of three
// nodes under memberRecovery Reassign after afterSeconds, and returns it
// once Available, the node of member 1 (the one the test loses) and the
// spare node.
func lcReassignFlock(t *testing.T, ns, name string, afterSeconds int32) (before *flockv1alpha1.Flock, lost, spare string) {
	t.Helper()
	pool := lcNodes(t, ns, 3)
	f := lcFlock(name, ns, 2)
	f.Spec.MemberRecovery = flockv1alpha1.MemberRecovery{Policy: flockv1alpha1.ReassignMemberRecovery, AfterSeconds: &afterSeconds}
	createFlock(t, f)
	before = waitFlockAvailable(t, ns, name)
	for _, n := range pool {
		if !slices.Contains(memberNodes(before), n) {
			spare = n
		}
	}
	return before, before.Status.Members[1].Node, spare
}

// Deleting a member's node: under Reassign (afterSeconds 10) the member
// moves to the spare node, not before 10s, records it in status and an
// event; under Wait it stays, and status says why and since when.
func TestLifecycleNodeLoss(t *testing.T) {
	t.Run("Reassign", func(t *testing.T) {
		ns := newNamespace(t)
		const name = "y"
		before, lost, spare := lcReassignFlock(t, ns, name, 10)
		rec := watchPods(t, ns, flockv1alpha1.LabelFlockName+"="+name)

		deletedAt := time.Now()
		kubectl(t, env.KubectlBuilt(), "delete", "node", lost)
		// At once: member 1 is blocked, the Flock not Available.
		eventually(t, lcTimeout, "member 1 blocked", func(ctx context.Context) error {
			f, err := lcGet(ctx, ns, name)
			if err != nil {
				return err
			}
			c, a := meta.FindStatusCondition(f.Status.Conditions, flockv1alpha1.FlockMembersBlocked), meta.FindStatusCondition(f.Status.Conditions, flockv1alpha1.FlockAvailable)
			if c == nil || c.Reason != flockcontroller.ReasonNodeGone || !strings.Contains(c.Message, "memberRecovery Reassign moves it to another node at ") ||
				a == nil || a.Status != metav1.ConditionFalse {
				return fmt.Errorf("MembersBlocked %+v, Available %+v", c, a)
			}
			return nil
		})
		eventually(t, lcTimeout, "member 1 moved to the spare node", func(ctx context.Context) error {
			f, err := lcGet(ctx, ns, name)
			if err != nil {
				return err
			}
			if f.Status.Members[1].Node != spare {
				return fmt.Errorf("members %+v", f.Status.Members)
			}
			return nil
		})
		got := waitFlockAvailable(t, ns, name)
		if got.Status.Members[1].Node != spare || got.Status.Members[0].Node != before.Status.Members[0].Node {
			t.Fatalf("members %+v, want member 1 on the spare node %s", got.Status.Members, spare)
		}
		if msg := got.Status.Members[1].Message; !strings.HasPrefix(msg, "reassigned from node "+lost+" (gone since ") ||
			!strings.Contains(msg, "to node "+spare) {
			t.Errorf("member 1 message %q", msg)
		}
		lcWaitEvent(t, ns, name, "MemberReassigned", "member 1", "from node "+lost+" to node "+spare)
		// Not before afterSeconds: the new pod came at least 10s after the
		// node went (less a second for clock granularity).
		for _, e := range rec.events(t) {
			if e.Type == watch.Added && e.Pod.Name == "y-1" {
				if d := e.At.Sub(deletedAt); d < 9*time.Second {
					t.Errorf("y-1 was recreated %v after its node was deleted, before afterSeconds", d)
				}
				if node := flockcontroller.PinnedNode(e.Pod); node != spare {
					t.Errorf("y-1 recreated pinned to %s, want %s", node, spare)
				}
			}
		}
		if p := ctlMemberPods(t, ns, name)[1]; p.Spec.NodeName != spare || !podReady(p) {
			t.Errorf("y-1 on %s, ready %v", p.Spec.NodeName, podReady(p))
		}
	})

	// A node that is only NotReady may be partitioned and still run its
	// member: Reassign neither moves the member nor deletes its pod, and
	// says why (event, condition); once the node is tainted
	// out-of-service (known down), the member moves.
	t.Run("ReassignNotReady", func(t *testing.T) {
		ns := newNamespace(t)
		const name = "p"
		before, lost, spare := lcReassignFlock(t, ns, name, 3)
		old := ctlMemberPods(t, ns, name)[1]
		if _, err := env.Kube.CoreV1().Nodes().Patch(ctxFor(t), lost, types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, cluster.NodeNotReadyLabel), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		msg := lcWaitEvent(t, ns, name, "ReassignWaiting", "member 1", "node "+lost+" is NotReady but not known to be down", corev1.TaintNodeOutOfService)
		t.Logf("event: %s", msg)
		eventually(t, lcTimeout, "MembersBlocked says why member 1 is not reassigned", func(ctx context.Context) error {
			f, err := lcGet(ctx, ns, name)
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(f.Status.Conditions, flockv1alpha1.FlockMembersBlocked)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != flockcontroller.ReasonNodeNotReady ||
				!strings.Contains(c.Message, "memberRecovery Reassign does not move it: node "+lost+" is NotReady but not known to be down") {
				return fmt.Errorf("MembersBlocked %+v", c)
			}
			return nil
		})
		// Well past afterSeconds: member 1 stays, its pod is neither
		// deleted nor replaced.
		consistently(t, 10*time.Second, "member 1 and its pod stay on the NotReady node", func(ctx context.Context) error {
			f, err := lcGet(ctx, ns, name)
			if err != nil {
				return err
			}
			if got := memberNodes(f); !slices.Equal(got, memberNodes(before)) {
				return fmt.Errorf("members moved: %v, were %v", got, memberNodes(before))
			}
			p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.UID != old.UID || p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s: uid %s (was %s), deletionTimestamp %v", p.Name, p.UID, old.UID, p.DeletionTimestamp)
			}
			return nil
		})

		// The node is known down: the member moves to the spare node.
		kubectl(t, env.KubectlBuilt(), "taint", "node", lost, corev1.TaintNodeOutOfService+"=nodeshutdown:NoExecute")
		got := waitFlockAvailable(t, ns, name)
		if got.Status.Members[1].Node != spare {
			t.Fatalf("members %+v, want member 1 on the spare node %s", got.Status.Members, spare)
		}
		if msg := got.Status.Members[1].Message; !strings.HasPrefix(msg, "reassigned from node "+lost+" (NotReady since ") {
			t.Errorf("member 1 message %q", msg)
		}
		if p := ctlMemberPods(t, ns, name)[1]; p.UID == old.UID || p.Spec.NodeName != spare {
			t.Errorf("%s: uid %s on %s, want a new pod on %s", p.Name, p.UID, p.Spec.NodeName, spare)
		}
	})

	t.Run("Wait", func(t *testing.T) {
		ns := newNamespace(t)
		pool := lcNodes(t, ns, 3)
		const name = "z"
		createFlock(t, lcFlock(name, ns, 2))
		before := waitFlockAvailable(t, ns, name)
		lost := before.Status.Members[1].Node
		kubectl(t, env.KubectlBuilt(), "delete", "node", lost)
		want := "member 1 waits for node " + lost + ", which is gone since "
		eventually(t, lcTimeout, "status says why member 1 waits", func(ctx context.Context) error {
			f, err := lcGet(ctx, ns, name)
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(f.Status.Conditions, flockv1alpha1.FlockMembersBlocked)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != flockcontroller.ReasonNodeGone ||
				!strings.HasPrefix(c.Message, want) || !strings.HasSuffix(c.Message, "memberRecovery Wait keeps it on that node until the node is back") {
				return fmt.Errorf("MembersBlocked %+v", c)
			}
			if m := f.Status.Members[1]; m.Node != lost || !strings.HasPrefix(m.Message, want) {
				return fmt.Errorf("member 1 %+v", m)
			}
			return nil
		})
		// Longer than a Reassign would have waited: still there, and
		// nothing on the spare node.
		consistently(t, 15*time.Second, "member 1 stays on its lost node", func(ctx context.Context) error {
			f, err := lcGet(ctx, ns, name)
			if err != nil {
				return err
			}
			if got := memberNodes(f); !slices.Equal(got, memberNodes(before)) {
				return fmt.Errorf("members moved: %v, were %v", got, memberNodes(before))
			}
			pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				if node := flockcontroller.PinnedNode(&p); node != "" && !slices.Contains(pool, node) {
					return fmt.Errorf("pod %s pinned to %s, outside the pool", p.Name, node)
				} else if node != "" && node != before.Status.Members[0].Node && node != lost {
					return fmt.Errorf("pod %s pinned to the spare node %s", p.Name, node)
				}
			}
			return nil
		})
	})
}

// A member records since when its node is lost (status.members[i].
// nodeLostSince): a flock-apiserver restart in the middle of the wait
// changes neither the recorded time nor the deadline, and the member
// moves afterSeconds after the loss, never sooner.
func TestLifecycleNodeLossRestart(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 3)
	const name = "r"
	f := lcFlock(name, ns, 2)
	after := int32(25)
	f.Spec.MemberRecovery = flockv1alpha1.MemberRecovery{Policy: flockv1alpha1.ReassignMemberRecovery, AfterSeconds: &after}
	createFlock(t, f)
	before := waitFlockAvailable(t, ns, name)
	lost := before.Status.Members[1].Node
	rec := watchPods(t, ns, flockv1alpha1.LabelFlockName+"="+name)
	kubectl(t, env.KubectlBuilt(), "delete", "node", lost)

	// lostAt and the deadline the condition states, before the restart.
	var lostAt time.Time
	var deadline string
	blockedMessage := func(ctx context.Context) (string, time.Time, error) {
		f, err := lcGet(ctx, ns, name)
		if err != nil {
			return "", time.Time{}, err
		}
		m := f.Status.Members[1]
		c := meta.FindStatusCondition(f.Status.Conditions, flockv1alpha1.FlockMembersBlocked)
		if m.Node != lost || m.NodeLostSince == nil || c == nil || c.Status != metav1.ConditionTrue {
			return "", time.Time{}, fmt.Errorf("member 1 %+v, MembersBlocked %+v", m, c)
		}
		return c.Message, m.NodeLostSince.Time, nil
	}
	eventually(t, lcTimeout, "member 1 records nodeLostSince", func(ctx context.Context) error {
		msg, since, err := blockedMessage(ctx)
		if err != nil {
			return err
		}
		deadline = "memberRecovery Reassign moves it to another node at " + since.Add(time.Duration(after)*time.Second).UTC().Format(time.RFC3339)
		if !strings.Contains(msg, deadline) {
			return fmt.Errorf("MembersBlocked %q, want %q", msg, deadline)
		}
		lostAt = since
		return nil
	})
	t.Logf("member 1's node %s lost since %s; %s", lost, lostAt.UTC().Format(time.RFC3339), deadline)

	if _, err := env.RestartFlockAPIServer(ctxFor(t), flockArgs()); err != nil {
		t.Fatalf("restart flock-apiserver: %v", err)
	}
	// A spec change makes the restarted controller write status (a new
	// observedGeneration), so what is read next is its record, not the one
	// from before the restart. Whether the deadline has passed by then
	// (a slow restart) or not, the record keeps the loss time: either the
	// member still waits with the same nodeLostSince and deadline, or it
	// moved and says it was gone since that time.
	bumped := lcUpdate(t, ns, name, func(f *flockv1alpha1.Flock) { f.Spec.MinReadySeconds = 1 })
	eventually(t, lcTimeout, "the restarted controller keeps the recorded loss time", func(ctx context.Context) error {
		f, err := lcGet(ctx, ns, name)
		if err != nil {
			return err
		}
		if f.Status.ObservedGeneration < bumped.Generation {
			return fmt.Errorf("observedGeneration %d, want %d", f.Status.ObservedGeneration, bumped.Generation)
		}
		if m := f.Status.Members[1]; m.Node != lost {
			if want := "reassigned from node " + lost + " (gone since " + lostAt.UTC().Format(time.RFC3339) + ") to node "; !strings.HasPrefix(m.Message, want) {
				return fmt.Errorf("member 1 moved: %+v, want message %q...", m, want)
			}
			return nil
		}
		msg, since, err := blockedMessage(ctx)
		if err != nil {
			return err
		}
		if !since.Equal(lostAt) || !strings.Contains(msg, deadline) {
			return fmt.Errorf("nodeLostSince %s (was %s), MembersBlocked %q; want %q", since, lostAt, msg, deadline)
		}
		return nil
	})
	got := waitFlockAvailable(t, ns, name)
	if m := got.Status.Members[1]; m.Node == lost || m.NodeLostSince != nil ||
		!strings.HasPrefix(m.Message, "reassigned from node "+lost+" (gone since "+lostAt.UTC().Format(time.RFC3339)+") to node ") {
		t.Errorf("member 1 %+v, want it moved, gone since %s", m, lostAt)
	}
	for _, e := range rec.events(t) {
		if e.Type == watch.Added && e.Pod.Name == name+"-1" {
			if e.At.Before(lostAt.Add(time.Duration(after-1) * time.Second)) {
				t.Errorf("%s-1 was recreated at %s, before afterSeconds from %s", name, e.At, lostAt)
			}
		}
	}
}

package flock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockfake "flock.dev/flock/pkg/generated/clientset/versioned/fake"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
)

// drain returns the keys in the queue, without blocking.
func drain(c *Controller) []string {
	var keys []string
	for c.workQueue().Len() > 0 {
		k, _ := c.workQueue().Get()
		c.workQueue().Done(k)
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestEventHandlers(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	logger := klog.FromContext(f.ctx)
	c := f.controller
	pg := newFlock("pg", 2)
	pg.Status.Members = []v1alpha1.FlockMember{{Ordinal: 0, Node: "n-a"}, {Ordinal: 1, Node: "n-b"}}
	kv := newFlock("kv", 1)
	kv.Spec.ServiceName = "shared"
	kv.Status.Members = []v1alpha1.FlockMember{{Ordinal: 0, Node: "n-a"}}
	idle := newFlock("idle", 0)
	f.createFlock(pg)
	f.createFlock(kv)
	f.createFlock(idle)
	drain(c)

	owned := NewMemberPod(pg, pg.Status.Members[0], "")
	owned.ResourceVersion = "1"
	c.addPod(logger, owned)
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("owned pod added: %v", got)
	}
	// A ControllerRef to a Flock with another UID resolves to nothing.
	stale := owned.DeepCopy()
	stale.OwnerReferences[0].UID = "old"
	c.addPod(logger, stale)
	if got := drain(c); len(got) != 0 {
		t.Errorf("pod of a replaced Flock: %v", got)
	}
	// An orphan wakes up the Flocks that select it.
	orphan := owned.DeepCopy()
	orphan.OwnerReferences = nil
	c.addPod(logger, orphan)
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("orphan added: %v", got)
	}
	// Resyncs (same resourceVersion) are ignored; a change is not.
	c.updatePod(logger, owned, owned.DeepCopy())
	if got := drain(c); len(got) != 0 {
		t.Errorf("resync: %v", got)
	}
	moved := owned.DeepCopy()
	moved.ResourceVersion = "2"
	moved.OwnerReferences = nil
	c.updatePod(logger, owned, moved)
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("released pod: %v", got)
	}
	c.deletePod(logger, owned)
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("owned pod deleted: %v", got)
	}

	// Services: by controller and by serviceName.
	c.serviceChanged(logger, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: testNamespace}})
	if got := drain(c); !slices.Equal(got, []string{"db/kv"}) {
		t.Errorf("service by name: %v", got)
	}
	c.serviceChanged(logger, NewService(pg))
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("owned service: %v", got)
	}

	// Nodes: a heartbeat is ignored; a readiness change wakes the Flocks
	// with a member there, and Flocks with unplaced ordinals.
	nodeB := newNode("n-b")
	beat := nodeB.DeepCopy()
	beat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	c.updateNode(logger, nodeB, beat)
	if got := drain(c); len(got) != 0 {
		t.Errorf("heartbeat: %v", got)
	}
	down := nodeB.DeepCopy()
	down.Status.Conditions[0].Status = corev1.ConditionFalse
	c.updateNode(logger, nodeB, down)
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("node n-b down: %v", got)
	}
	f.scale("kv", 2)
	drain(c)
	c.nodeChanged(logger, newNode("n-new"))
	if got := drain(c); !slices.Equal(got, []string{"db/kv"}) {
		t.Errorf("new node: %v", got)
	}
}

// TestRunOverFakeClientsets wires the real MemberControl and StatusUpdater
// to fake clientsets, starts the informers and the controller, and plays
// kubelet until a two-member Flock is Available.
func TestRunOverFakeClientsets(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	kubeClient := k8sfake.NewClientset(newNode("n-a"), newNode("n-b"))
	// The controller's data and helper clients are clientsets of their
	// own over the same objects, recording their own actions.
	sharing := func() *k8sfake.Clientset {
		c := &k8sfake.Clientset{}
		c.AddReactor("*", "*", clienttesting.ObjectReaction(kubeClient.Tracker()))
		return c
	}
	dataClient, helperClient := sharing(), sharing()
	// The API server gives every claim a UID (the fake does not): a
	// member's volume is made bound to it.
	var claims atomic.Int32
	dataClient.PrependReactor("create", "persistentvolumeclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if pvc, ok := a.(clienttesting.CreateAction).GetObject().(*corev1.PersistentVolumeClaim); ok {
			pvc.UID = types.UID(fmt.Sprintf("claim-uid-%d", claims.Add(1)))
		}
		return false, nil, nil
	})
	flockClient := flockfake.NewSimpleClientset(newFlock("pg", 2))
	kubeFactory := informers.NewSharedInformerFactory(kubeClient, 0)
	flockFactory := flockinformers.NewSharedInformerFactory(flockClient, 0)
	recorder := record.NewFakeRecorder(1000)
	c, err := NewController(ctx, Clients{Members: kubeClient, Data: dataClient, Helpers: helperClient}, flockClient, flockFactory.Flock().V1alpha1().Flocks(),
		kubeFactory.Core().V1().Pods(), kubeFactory.Core().V1().Nodes(), kubeFactory.Core().V1().Services(),
		kubeFactory.Apps().V1().ControllerRevisions(), kubeFactory.Core().V1().PersistentVolumes(),
		kubeFactory.Core().V1().PersistentVolumeClaims(), kubeFactory.Core().V1().Namespaces(), recorder, Options{ClusterDomain: "example.org"})
	if err != nil {
		t.Fatal(err)
	}
	if c.HasSynced() {
		t.Fatal("synced before the informers started")
	}
	kubeFactory.Start(ctx.Done())
	flockFactory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, 2)
	}()

	// Play kubelet: bind and start every pod, until the Flock is Available;
	// and the PersistentVolume controller: take up every volume made bound
	// to a claim (its phase Bound); the controller completes the claim's
	// binding. (The fake clientset sets no resourceVersions; they do, or the
	// update would look like a resync.)
	rv := 100
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		volumes, err := kubeClient.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range volumes.Items {
			pv := &volumes.Items[i]
			if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "" || pv.Status.Phase == corev1.VolumeBound {
				continue
			}
			rv++
			pv.ResourceVersion = strconv.Itoa(rv)
			pv.Status.Phase = corev1.VolumeBound
			if _, err := kubeClient.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
				return false, err
			}
		}
		pods, err := kubeClient.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if isRunningAndReady(p) || isTerminal(p) {
				continue
			}
			rv++
			p.ResourceVersion = strconv.Itoa(rv)
			p.Spec.NodeName = PinnedNode(p)
			p.Status.Phase = corev1.PodRunning
			if p.Spec.RestartPolicy == corev1.RestartPolicyNever {
				p.Status.Phase = corev1.PodSucceeded // a data helper
			}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
			if _, err := kubeClient.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				return false, err
			}
		}
		fl, err := flockClient.FlockV1alpha1().Flocks(testNamespace).Get(ctx, "pg", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range fl.Status.Conditions {
			if cond.Type == v1alpha1.FlockAvailable && cond.Status == metav1.ConditionTrue && fl.Status.ReadyReplicas == 2 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("flock never became Available: %v", err)
	}
	if !c.HasSynced() {
		t.Error("HasSynced is false while running")
	}
	fl, _ := flockClient.FlockV1alpha1().Flocks(testNamespace).Get(ctx, "pg", metav1.GetOptions{})
	if len(fl.Status.Members) != 2 || fl.Status.Members[0].Node == fl.Status.Members[1].Node ||
		fl.Status.Members[1].Hostname != "pg-1.pg.db.svc.example.org" {
		t.Errorf("members = %+v", fl.Status.Members)
	}
	if _, err := kubeClient.CoreV1().Services(testNamespace).Get(ctx, "pg", metav1.GetOptions{}); err != nil {
		t.Errorf("service: %v", err)
	}
	// Each kind of write went through its own client.
	writes := func(c *k8sfake.Clientset) map[string]int {
		out := map[string]int{}
		for _, a := range c.Actions() {
			if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
				out[v+" "+a.GetResource().Resource+" in "+a.GetNamespace()]++
			}
		}
		return out
	}
	dataWrites, helperWrites := writes(dataClient), writes(helperClient)
	for w := range dataWrites {
		if !strings.Contains(w, "persistentvolume") {
			t.Errorf("the data client wrote %q", w)
		}
	}
	// (A create whose cache was behind is retried and logged again.)
	if dataWrites["create persistentvolumeclaims in "+testNamespace] < 2 || dataWrites["create persistentvolumes in "] < 2 {
		t.Errorf("data client writes %v, want both members' claims and volumes created", dataWrites)
	}
	for w := range helperWrites {
		if w != "create pods in "+DefaultHelperNamespace && w != "delete pods in "+DefaultHelperNamespace {
			t.Errorf("the helper client wrote %q", w)
		}
	}
	if helperWrites["create pods in "+DefaultHelperNamespace] < 2 {
		t.Errorf("helper client writes %v, want both members' prepare helpers created", helperWrites)
	}
	for w := range writes(kubeClient) {
		if strings.HasPrefix(w, "create persistentvolume") || w == "create pods in "+DefaultHelperNamespace {
			t.Errorf("the members' client wrote %q", w)
		}
	}
	if writes(kubeClient)["create pods in "+testNamespace] < 2 {
		t.Errorf("members' client writes %v, want both member pods created", writes(kubeClient))
	}

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the context was cancelled")
	}
}

func TestNewControllerRejectsBadOptions(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kubeFactory := informers.NewSharedInformerFactory(k8sfake.NewClientset(), 0)
	flockFactory := flockinformers.NewSharedInformerFactory(flockfake.NewSimpleClientset(), 0)
	_, err := NewController(ctx, OneClient(k8sfake.NewClientset()), flockfake.NewSimpleClientset(), flockFactory.Flock().V1alpha1().Flocks(),
		kubeFactory.Core().V1().Pods(), kubeFactory.Core().V1().Nodes(), kubeFactory.Core().V1().Services(),
		kubeFactory.Apps().V1().ControllerRevisions(), kubeFactory.Core().V1().PersistentVolumes(),
		kubeFactory.Core().V1().PersistentVolumeClaims(), kubeFactory.Core().V1().Namespaces(), record.NewFakeRecorder(1), Options{DataRoot: "relative/path"})
	if err == nil {
		t.Fatal("no error for a relative data root")
	}
}

func TestHelperDataAndRevisionHandlers(t *testing.T) {
	f := newFixture(t, "n-a")
	logger := klog.FromContext(f.ctx)
	c := f.controller
	pg := newFlock("pg", 1)
	f.createFlock(pg)
	drain(c)

	// A data helper's changes wake up its Flock (it is in the server's
	// namespace, has no controller and does not match the selector).
	h := NewHelperPod(pg, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, HelperCleanup, DefaultHelperNamespace, "busybox", DefaultDataRoot)
	h.ResourceVersion = "1"
	c.addPod(logger, h)
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("helper added: %v", got)
	}
	done := h.DeepCopy()
	done.ResourceVersion = "2"
	done.Status.Phase = corev1.PodSucceeded
	c.updatePod(logger, h, done)
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("helper updated: %v", got)
	}
	c.deletePod(logger, done)
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("helper deleted: %v", got)
	}

	// A member's PersistentVolume by its labels, its claim by controller.
	c.volumeChanged(logger, NewMemberVolume(pg, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, "n-a", DefaultDataRoot, ""))
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("volume changed: %v", got)
	}
	c.claimChanged(logger, cache.DeletedFinalStateUnknown{Key: "db/data-pg-0", Obj: NewMemberClaim(pg, 0, "pv")})
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("claim deleted: %v", got)
	}
	foreign := NewMemberClaim(pg, 0, "pv")
	foreign.OwnerReferences[0].UID = "someone-else"
	c.claimChanged(logger, foreign)
	if got := drain(c); len(got) != 0 {
		t.Errorf("claim of another owner: %v", got)
	}
	// A claim nobody controls with a member's claim name blocks that
	// member: its deletion (or any change) wakes the Flock up; one with
	// another name does not.
	unowned := NewMemberClaim(pg, 0, "")
	unowned.OwnerReferences = nil
	c.claimChanged(logger, cache.DeletedFinalStateUnknown{Key: "db/data-pg-0", Obj: unowned})
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("unowned claim of a member's name deleted: %v", got)
	}
	unowned.Name = "data-pgx-0"
	c.claimChanged(logger, unowned)
	if got := drain(c); len(got) != 0 {
		t.Errorf("unowned claim of another name: %v", got)
	}

	// Revisions: by controller, and orphans by their flock.dev/name label.
	cr := NewControllerRevision(pg, &pg.Spec.Template, "abc", 1)
	c.revisionChanged(logger, cache.DeletedFinalStateUnknown{Key: "db/pg-abc", Obj: cr})
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("revision deleted: %v", got)
	}
	orphan := cr.DeepCopy()
	orphan.OwnerReferences = nil
	c.revisionChanged(logger, orphan)
	if got := drain(c); !slices.Equal(got, []string{"db/pg"}) {
		t.Errorf("orphan revision: %v", got)
	}
	other := cr.DeepCopy()
	other.OwnerReferences[0].UID = "someone-else"
	c.revisionChanged(logger, other)
	if got := drain(c); len(got) != 0 {
		t.Errorf("revision of another owner: %v", got)
	}
}

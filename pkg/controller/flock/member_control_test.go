package flock

import (
	"context"
	"errors"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockfake "flock.dev/flock/pkg/generated/clientset/versioned/fake"
)

// TestRealMemberControl checks the writes of the real MemberControl
// against a fake clientset: field manager, UID precondition on delete,
// strategic merge patches that adopt and release.
func TestRealMemberControl(t *testing.T) {
	ctx := context.Background()
	fl := newFlock("pg", 1)
	client := k8sfake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	mc := NewMemberControl(client, factory.Core().V1().Pods(), factory.Core().V1().Services().Lister())

	pod := NewMemberPod(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, "rev")
	if err := mc.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := mc.CreateService(ctx, NewService(fl)); err != nil {
		t.Fatal(err)
	}
	created, err := client.CoreV1().Pods(testNamespace).Get(ctx, "pg-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Release, then adopt again, by strategic merge patch.
	if err := mc.PatchPod(ctx, testNamespace, "pg-0", releasePatch(fl.UID, created.UID)); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().Pods(testNamespace).Get(ctx, "pg-0", metav1.GetOptions{})
	if len(got.OwnerReferences) != 0 {
		t.Fatalf("after release: %+v", got.OwnerReferences)
	}
	if err := mc.PatchPod(ctx, testNamespace, "pg-0", adoptPatch(fl, created.UID)); err != nil {
		t.Fatal(err)
	}
	got, _ = client.CoreV1().Pods(testNamespace).Get(ctx, "pg-0", metav1.GetOptions{})
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != fl.UID || ref.Kind != "Flock" || !*ref.BlockOwnerDeletion {
		t.Fatalf("after adoption: %+v", got.OwnerReferences)
	}

	if err := mc.DeletePod(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := mc.DeletePod(ctx, got); err != nil {
		t.Fatalf("deleting a pod that is gone: %v", err)
	}

	var writes int
	for _, a := range client.Actions() {
		var fm string
		switch a := a.(type) {
		case clienttesting.CreateActionImpl:
			fm = a.CreateOptions.FieldManager
		case clienttesting.UpdateActionImpl:
			fm = a.UpdateOptions.FieldManager
		case clienttesting.PatchActionImpl:
			fm = a.PatchOptions.FieldManager
			if a.PatchType != types.StrategicMergePatchType {
				t.Errorf("patch type %s", a.PatchType)
			}
		case clienttesting.DeleteActionImpl:
			writes++
			if p := a.DeleteOptions.Preconditions; p == nil || p.UID == nil || *p.UID != got.UID {
				t.Errorf("delete without the UID precondition: %+v", a.DeleteOptions)
			}
			continue
		default:
			continue
		}
		writes++
		if fm != FieldManager {
			t.Errorf("%s %s with field manager %q", a.GetVerb(), a.GetResource().Resource, fm)
		}
	}
	if writes != 6 {
		t.Errorf("%d writes, want 6", writes)
	}
}

func TestStatusUpdaterRetriesOnConflictWithFreshObject(t *testing.T) {
	ctx := context.Background()
	fl := newFlock("pg", 1)
	client := flockfake.NewSimpleClientset(fl)
	conflicts := 1
	client.PrependReactor("update", "flocks", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(flockResource, "pg", errors.New("stale"))
		}
		return false, nil, nil
	})
	// The caller's copy is stale; the server has another member by now.
	server := fl.DeepCopy()
	server.Status.Members = []v1alpha1.FlockMember{{Ordinal: 0, Node: "n-a"}}
	if err := client.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("flocks"), server, testNamespace); err != nil {
		t.Fatal(err)
	}
	calls := 0
	out, err := NewStatusUpdater(client).UpdateStatus(ctx, fl, func(st *v1alpha1.FlockStatus) {
		calls++
		recordMembers(st, map[int32]string{0: "n-b"}, func(o int32, n string) v1alpha1.FlockMember {
			return v1alpha1.FlockMember{Ordinal: o, Node: n}
		})
		st.Replicas = 5
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("mutate called %d times, want 2", calls)
	}
	if len(out.Status.Members) != 1 || out.Status.Members[0].Node != "n-a" || out.Status.Replicas != 5 {
		t.Errorf("status = %+v", out.Status)
	}
	var fm string
	for _, a := range client.Actions() {
		if u, ok := a.(clienttesting.UpdateActionImpl); ok && u.Subresource == "status" {
			fm = u.UpdateOptions.FieldManager
		}
	}
	if fm != FieldManager {
		t.Errorf("field manager %q", fm)
	}

	// Nothing to change: nothing written.
	before := len(client.Actions())
	if _, err := NewStatusUpdater(client).UpdateStatus(ctx, out, func(*v1alpha1.FlockStatus) {}); err != nil {
		t.Fatal(err)
	}
	if n := len(client.Actions()) - before; n != 0 {
		t.Errorf("%d calls for a no-op update", n)
	}

	// A replaced Flock (same name, new UID) is not written to.
	replaced := fl.DeepCopy()
	replaced.UID = "other"
	conflicts = 1
	if err := client.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("flocks"), replaced, testNamespace); err != nil {
		t.Fatal(err)
	}
	if _, err := NewStatusUpdater(client).UpdateStatus(ctx, fl, func(st *v1alpha1.FlockStatus) { st.Replicas = 9 }); err == nil {
		t.Fatal("no error for a replaced Flock")
	}
	cur, _ := client.FlockV1alpha1().Flocks(testNamespace).Get(ctx, "pg", metav1.GetOptions{})
	if cur.Status.Replicas == 9 {
		t.Fatal("wrote the status of a replaced Flock")
	}
}

func TestRealMemberControlForceDeleteAndList(t *testing.T) {
	ctx := context.Background()
	fl := newFlock("pg", 1)
	client := k8sfake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods()
	mc := NewMemberControl(client, podInformer, factory.Core().V1().Services().Lister())

	helper := NewHelperPod(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, HelperCleanup, testNamespace, "busybox", DefaultDataRoot)
	helper.UID = "h-uid"
	member := NewMemberPod(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, "rev")
	for _, p := range []*corev1.Pod{helper, member} {
		if err := podInformer.Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := mc.ListPods(testNamespace, labels.SelectorFromSet(labels.Set{LabelHelper: HelperCleanup}))
	if err != nil || len(got) != 1 || got[0].Name != helper.Name {
		t.Fatalf("ListPods = %v, %v", got, err)
	}

	if _, err := client.CoreV1().Pods(testNamespace).Create(ctx, helper, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mc.ForceDeletePod(ctx, helper); err != nil {
		t.Fatal(err)
	}
	if err := mc.ForceDeletePod(ctx, helper); err != nil {
		t.Fatalf("force-deleting a pod that is gone: %v", err)
	}
	var deletes int
	for _, a := range client.Actions() {
		d, ok := a.(clienttesting.DeleteActionImpl)
		if !ok {
			continue
		}
		deletes++
		o := d.DeleteOptions
		if o.GracePeriodSeconds == nil || *o.GracePeriodSeconds != 0 || o.Preconditions == nil || *o.Preconditions.UID != "h-uid" {
			t.Errorf("delete options = %+v", o)
		}
	}
	if deletes != 2 {
		t.Errorf("%d deletes", deletes)
	}
}

// TestRealRevisionControl checks the writes of the real RevisionControl
// against a fake clientset: field manager, UID precondition, adoption patch.
func TestRealRevisionControl(t *testing.T) {
	ctx := context.Background()
	fl := newFlock("pg", 1)
	client := k8sfake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Apps().V1().ControllerRevisions()
	rc, err := NewRevisionControl(client, informer.Informer())
	if err != nil {
		t.Fatal(err)
	}

	cr := NewControllerRevision(fl, &fl.Spec.Template, "abc", 1)
	cr.OwnerReferences = nil
	if err := rc.CreateRevision(ctx, cr); err != nil {
		t.Fatal(err)
	}
	created, err := client.AppsV1().ControllerRevisions(testNamespace).Get(ctx, "pg-abc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.UID = "cr-uid"
	if _, err := client.AppsV1().ControllerRevisions(testNamespace).Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rc.PatchRevision(ctx, testNamespace, "pg-abc", adoptPatch(fl, "cr-uid")); err != nil {
		t.Fatal(err)
	}
	adopted, _ := client.AppsV1().ControllerRevisions(testNamespace).Get(ctx, "pg-abc", metav1.GetOptions{})
	if !isControlledBy(adopted, fl) {
		t.Fatalf("owners = %+v", adopted.OwnerReferences)
	}
	adopted.Revision = 2
	if err := rc.UpdateRevision(ctx, adopted); err != nil {
		t.Fatal(err)
	}
	if err := informer.Informer().GetIndexer().Add(adopted); err != nil {
		t.Fatal(err)
	}
	list, err := rc.ListRevisions(testNamespace, "pg")
	if err != nil || len(list) != 1 || list[0].Revision != 2 {
		t.Fatalf("ListRevisions = %v, %v", list, err)
	}
	if err := rc.DeleteRevision(ctx, adopted); err != nil {
		t.Fatal(err)
	}
	if err := rc.DeleteRevision(ctx, adopted); err != nil {
		t.Fatalf("deleting a revision that is gone: %v", err)
	}

	for _, a := range client.Actions() {
		var fm string
		switch a := a.(type) {
		case clienttesting.CreateActionImpl:
			fm = a.CreateOptions.FieldManager
		case clienttesting.UpdateActionImpl:
			if a.GetObject().(*appsv1.ControllerRevision).Revision != 2 {
				continue // the test's own update
			}
			fm = a.UpdateOptions.FieldManager
		case clienttesting.PatchActionImpl:
			fm = a.PatchOptions.FieldManager
		case clienttesting.DeleteActionImpl:
			if p := a.DeleteOptions.Preconditions; p == nil || p.UID == nil || *p.UID != "cr-uid" {
				t.Errorf("delete without the UID precondition: %+v", a.DeleteOptions)
			}
			continue
		default:
			continue
		}
		if fm != FieldManager {
			t.Errorf("%s with field manager %q", a.GetVerb(), fm)
		}
	}
}

// TestListHelperPodsFromTheIndex: a Flock's helper pods come from the pod
// index, only that Flock's and only in the namespace asked; helpers stay
// orphans of their namespace for adoption's purposes, as before.
func TestListHelperPodsFromTheIndex(t *testing.T) {
	a, b := newFlock("a", 1), newFlock("b", 1)
	a.UID, b.UID = "uid-a", "uid-b"
	client := k8sfake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods()
	if err := podInformer.Informer().AddIndexers(cache.Indexers{podControllerUIDIndex: indexByFlockController}); err != nil {
		t.Fatal(err)
	}
	mc := NewMemberControl(client, podInformer, factory.Core().V1().Services().Lister())
	m := v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}
	helperA := NewHelperPod(a, m, HelperPrepare, "flock-system", "busybox", DefaultDataRoot)
	helperA2 := NewHelperPod(a, v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}, HelperCleanup, "flock-system", "busybox", DefaultDataRoot)
	helperB := NewHelperPod(b, m, HelperPrepare, "flock-system", "busybox", DefaultDataRoot)
	member := NewMemberPod(a, m, "rev")
	for _, p := range []*corev1.Pod{helperA, helperA2, helperB, member} {
		if err := podInformer.Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := mc.ListHelperPods("flock-system", a.UID)
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	want := []string{helperA.Name, helperA2.Name}
	slices.Sort(want)
	if err != nil || !slices.Equal(names, want) {
		t.Errorf("ListHelperPods(a) = %v, %v; want %v", names, err, want)
	}
	if got, err := mc.ListHelperPods(testNamespace, a.UID); err != nil || len(got) != 0 {
		t.Errorf("ListHelperPods in the Flock's namespace = %d pods, %v; want none", len(got), err)
	}
	orphans, err := podInformer.Informer().GetIndexer().ByIndex(podControllerUIDIndex, orphanIndexKey("flock-system"))
	if err != nil || len(orphans) != 3 {
		t.Errorf("orphans of flock-system: %d, %v; want the 3 helpers", len(orphans), err)
	}
}

// GetPodLive reads one pod from the API server by a list of its name (the
// controller's ClusterRole has no get of pods), never from the cache.
func TestGetPodLiveListsThePodByName(t *testing.T) {
	ctx := context.Background()
	fl := newFlock("pg", 2)
	client := k8sfake.NewClientset(
		NewMemberPod(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, "rev"),
		NewMemberPod(fl, v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}, "rev"))
	factory := informers.NewSharedInformerFactory(client, 0)
	mc := NewMemberControl(client, factory.Core().V1().Pods(), factory.Core().V1().Services().Lister())
	var verbs []string
	client.PrependReactor("*", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		verbs = append(verbs, a.GetVerb())
		if l, ok := a.(clienttesting.ListAction); ok {
			if got := l.GetListRestrictions().Fields.String(); got != "metadata.name=pg-1" && got != "metadata.name=pg-2" {
				t.Errorf("field selector %q", got)
			}
		}
		return false, nil, nil
	})
	pod, err := mc.GetPodLive(ctx, testNamespace, "pg-1")
	if err != nil || pod.Name != "pg-1" || PinnedNode(pod) != "n-b" {
		t.Fatalf("GetPodLive(pg-1) = %v, %v", pod, err)
	}
	if _, err := mc.GetPodLive(ctx, testNamespace, "pg-2"); !apierrors.IsNotFound(err) {
		t.Fatalf("GetPodLive(pg-2): %v, want NotFound", err)
	}
	if !slices.Equal(verbs, []string{"list", "list"}) {
		t.Fatalf("verbs %v, want two lists", verbs)
	}
}

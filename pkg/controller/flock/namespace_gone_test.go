package flock

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockfake "flock.dev/flock/pkg/generated/clientset/versioned/fake"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
)

// namespaceGoneFixture is the controller over fake clients whose caches
// the test fills: cached namespaces, namespaces kube-apiserver has, Flocks.
type namespaceGoneFixture struct {
	c     *NamespaceGoneController
	kube  *kubefake.Clientset
	flock *flockfake.Clientset
}

func newNamespaceGoneFixture(t *testing.T, cachedNS, liveNS []string, flocks ...*v1alpha1.Flock) *namespaceGoneFixture {
	t.Helper()
	var live []runtime.Object
	for _, ns := range liveNS {
		live = append(live, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	var stored []runtime.Object
	for _, f := range flocks {
		stored = append(stored, f)
	}
	fx := &namespaceGoneFixture{kube: kubefake.NewClientset(live...), flock: flockfake.NewSimpleClientset(stored...)}
	kf := kubeinformers.NewSharedInformerFactory(fx.kube, 0)
	ff := flockinformers.NewSharedInformerFactory(fx.flock, 0)
	c, err := NewNamespaceGoneController(context.Background(), fx.kube, fx.flock, ff.Flock().V1alpha1().Flocks(), kf.Core().V1().Namespaces())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range cachedNS {
		if err := kf.Core().V1().Namespaces().Informer().GetIndexer().Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range flocks {
		if err := ff.Flock().V1alpha1().Flocks().Informer().GetIndexer().Add(f); err != nil {
			t.Fatal(err)
		}
	}
	fx.kube.ClearActions()
	fx.flock.ClearActions()
	fx.c = c
	return fx
}

// counterValue is flock_controller_namespace_gone_deletes_total.
func counterValue(t *testing.T) float64 {
	t.Helper()
	registerMetrics()
	v, err := testutil.GetCounterMetricValue(namespaceGoneDeletes)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func orphanFlock(ns, name, uid string) *v1alpha1.Flock {
	return &v1alpha1.Flock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
}

// deletes returns the Flock deletes the controller sent, with the UID each
// named.
func (fx *namespaceGoneFixture) deletes() map[string]string {
	out := map[string]string{}
	for _, a := range fx.flock.Actions() {
		d, ok := a.(clienttesting.DeleteActionImpl)
		if !ok {
			continue
		}
		uid := ""
		if p := d.DeleteOptions.Preconditions; p != nil && p.UID != nil {
			uid = string(*p.UID)
		}
		out[d.Namespace+"/"+d.Name] = uid
	}
	return out
}

// TestNamespaceGoneDeletesOnlyWhenKubeAPIServerSaysSo: a Flock is deleted,
// with its UID as precondition, only when its namespace is neither cached
// nor known to kube-apiserver; a namespace only the cache lacks (a
// namespace just made) keeps its Flocks, and so does one kube-apiserver
// cannot be asked about (retried).
func TestNamespaceGoneDeletesOnlyWhenKubeAPIServerSaysSo(t *testing.T) {
	tests := []struct {
		name       string
		cached     []string
		live       []string
		getFails   bool
		wantDelete bool
		wantErr    bool
	}{
		{name: "namespace cached", cached: []string{"db"}, live: []string{"db"}},
		{name: "only kube-apiserver has it (cache behind)", live: []string{"db"}},
		{name: "gone", wantDelete: true},
		{name: "kube-apiserver not answering", getFails: true, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx := newNamespaceGoneFixture(t, tc.cached, tc.live, orphanFlock("db", "pg", "uid-1"))
			if tc.getFails {
				fx.kube.PrependReactor("get", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewServiceUnavailable("kube-apiserver is starting")
				})
			}
			before := counterValue(t)
			err := fx.c.sync(context.Background(), "db/pg")
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync: %v, want error %v", err, tc.wantErr)
			}
			got := fx.deletes()
			if !tc.wantDelete {
				if len(got) != 0 {
					t.Fatalf("deleted %v, want nothing deleted", got)
				}
				return
			}
			if uid, ok := got["db/pg"]; !ok || uid != "uid-1" || len(got) != 1 {
				t.Fatalf("deletes %v, want db/pg with precondition uid-1", got)
			}
			if _, err := fx.flock.FlockV1alpha1().Flocks("db").Get(context.Background(), "pg", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("Flock after the sync: %v, want NotFound", err)
			}
			if after := counterValue(t); after != before+1 {
				t.Errorf("%s went %v -> %v, want one more", "flock_controller_namespace_gone_deletes_total", before, after)
			}
		})
	}
}

// TestNamespaceGoneLeavesFlocksBeingDeletedAndTakenNames: a Flock already
// being deleted is left to its finalizer, and a delete refused for its UID
// (another Flock of that name now) or NotFound is no error.
func TestNamespaceGoneLeavesFlocksBeingDeletedAndTakenNames(t *testing.T) {
	deleting := orphanFlock("db", "pg", "uid-1")
	deleting.DeletionTimestamp = &metav1.Time{}
	fx := newNamespaceGoneFixture(t, nil, nil, deleting)
	if err := fx.c.sync(context.Background(), "db/pg"); err != nil || len(fx.deletes()) != 0 {
		t.Fatalf("sync of a Flock being deleted: err %v, deletes %v; want neither", err, fx.deletes())
	}
	for _, refusal := range []error{
		apierrors.NewConflict(v1alpha1.Resource("flocks"), "pg", errors.New("precondition failed: UID in precondition: uid-1, UID in object meta: uid-2")),
		apierrors.NewNotFound(v1alpha1.Resource("flocks"), "pg"),
	} {
		fx := newNamespaceGoneFixture(t, nil, nil, orphanFlock("db", "pg", "uid-1"))
		fx.flock.PrependReactor("delete", "flocks", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, refusal
		})
		if err := fx.c.sync(context.Background(), "db/pg"); err != nil {
			t.Errorf("sync with the delete refused (%v): %v, want no error", refusal, err)
		}
	}
}

// TestNamespaceGoneQueuesFlocksOfAGoneNamespace: a Flock that appears in a
// namespace the cache does not hold, and every Flock of a namespace that
// goes, are queued; a Flock whose namespace is cached is not.
func TestNamespaceGoneQueuesFlocksOfAGoneNamespace(t *testing.T) {
	kube := kubefake.NewClientset()
	flocks := flockfake.NewSimpleClientset()
	kf := kubeinformers.NewSharedInformerFactory(kube, 0)
	ff := flockinformers.NewSharedInformerFactory(flocks, 0)
	c, err := NewNamespaceGoneController(context.Background(), kube, flocks, ff.Flock().V1alpha1().Flocks(), kf.Core().V1().Namespaces())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "goes"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kf.Start(ctx.Done())
	kf.WaitForCacheSync(ctx.Done())
	for _, f := range []*v1alpha1.Flock{orphanFlock("kept", "a", "1"), orphanFlock("goes", "b", "2"), orphanFlock("goes", "c", "3"), orphanFlock("never", "d", "4")} {
		if _, err := flocks.FlockV1alpha1().Flocks(f.Namespace).Create(ctx, f, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ff.Start(ctx.Done())
	ff.WaitForCacheSync(ctx.Done())
	q := c.queue.current()
	waitQueued := func(want ...string) {
		t.Helper()
		for range 200 {
			if q.Len() >= len(want) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		got := map[string]bool{}
		for q.Len() > 0 {
			k, _ := q.Get()
			got[k] = true
			q.Done(k)
		}
		if len(got) != len(want) {
			t.Fatalf("queued %v, want %v", got, want)
		}
		for _, k := range want {
			if !got[k] {
				t.Fatalf("queued %v, want %v", got, want)
			}
		}
	}
	waitQueued("never/d")
	if err := kube.CoreV1().Namespaces().Delete(ctx, "goes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitQueued("goes/b", "goes/c")
}

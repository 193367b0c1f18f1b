package flock

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// benchNamespaceSize is the namespace of the read benchmarks: this many
// Flocks of three members, each with two revisions, in one namespace.
const benchNamespaceSize = 1000

// readsBench is a Controller's pod cache and a RevisionControl filled with
// benchNamespaceSize Flocks in one namespace, and one of the Flocks.
type readsBench struct {
	c         *Controller
	revisions RevisionControl
	revLister appslisters.ControllerRevisionLister
	flock     *v1alpha1.Flock
}

func newReadsBench(b *testing.B) *readsBench {
	b.Helper()
	client := k8sfake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	pods, revs := factory.Core().V1().Pods(), factory.Apps().V1().ControllerRevisions()
	if err := pods.Informer().AddIndexers(cache.Indexers{podControllerUIDIndex: indexByFlockController}); err != nil {
		b.Fatal(err)
	}
	rc, err := NewRevisionControl(client, revs.Informer())
	if err != nil {
		b.Fatal(err)
	}
	var last *v1alpha1.Flock
	for i := range benchNamespaceSize {
		f := newFlock(fmt.Sprintf("f%d", i), 3)
		f.UID = types.UID(fmt.Sprintf("uid-%d", i))
		for ord := range int32(3) {
			pod := NewMemberPod(f, v1alpha1.FlockMember{Ordinal: ord, Node: fmt.Sprintf("n-%d", ord)}, "r1")
			if err := pods.Informer().GetIndexer().Add(pod); err != nil {
				b.Fatal(err)
			}
		}
		for n, r := range []string{"r1", "r2"} {
			if err := revs.Informer().GetIndexer().Add(NewControllerRevision(f, &f.Spec.Template, r, int64(n+1))); err != nil {
				b.Fatal(err)
			}
		}
		last = f
	}
	c := &Controller{podLister: pods.Lister(), podIndexer: pods.Informer().GetIndexer()}
	return &readsBench{c: c, revisions: rc, revLister: revs.Lister(), flock: last}
}

// BenchmarkSyncReads is what a sync reads of the cache about its Flock's
// pods (its own and its namespace's orphans) and revisions, by index.
func BenchmarkSyncReads(b *testing.B) {
	r := newReadsBench(b)
	b.ResetTimer()
	for b.Loop() {
		pods, err := r.c.candidatePods(r.flock)
		if err != nil || len(pods) != 3 {
			b.Fatalf("pods %d, %v", len(pods), err)
		}
		revs, err := r.revisions.ListRevisions(r.flock.Namespace, r.flock.Name)
		if err != nil || len(revs) != 2 {
			b.Fatalf("revisions %d, %v", len(revs), err)
		}
	}
}

// BenchmarkAnchorSyncReadsByNamespaceWalk is the anchor: the same reads as
// label selections over the whole namespace (what a sync did before the
// indexes).
func BenchmarkAnchorSyncReadsByNamespaceWalk(b *testing.B) {
	r := newReadsBench(b)
	selector := labels.SelectorFromSet(r.flock.Spec.Selector.MatchLabels)
	byName := labels.SelectorFromSet(labels.Set{v1alpha1.LabelFlockName: r.flock.Name})
	b.ResetTimer()
	for b.Loop() {
		pods, err := r.c.podLister.Pods(r.flock.Namespace).List(selector)
		if err != nil || len(pods) != 3 {
			b.Fatalf("pods %d, %v", len(pods), err)
		}
		revs, err := r.revLister.ControllerRevisions(r.flock.Namespace).List(byName)
		if err != nil || len(revs) != 2 {
			b.Fatalf("revisions %d, %v", len(revs), err)
		}
	}
}

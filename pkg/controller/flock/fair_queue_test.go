// File fair_queue_test.go: the fair queue's order: urgent before catch-up
// (but catch-up never starved), namespaces in turn, and its use under
// client-go's workqueue.

package flock

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flocklisters "flock.dev/flock/pkg/generated/listers/flock/v1alpha1"
)

// popAll drains q.
func popAll(q *fairQueue) []string {
	var out []string
	for q.Len() > 0 {
		out = append(out, q.Pop())
	}
	return out
}

func TestFairQueueNamespacesTakeTurns(t *testing.T) {
	q := newFairQueue(func(string) bool { return true })
	for i := range 1000 {
		q.Push(fmt.Sprintf("flood/f-%d", i))
	}
	q.Push("quiet/new")
	q.Push("other/a")
	q.Push("other/b")
	got := popAll(q)
	if len(got) != 1003 {
		t.Fatalf("popped %d keys, want 1003", len(got))
	}
	// The flood's namespace was first in the ring; the others get the
	// second and third turns, not the 1001st.
	if i := slices.Index(got, "quiet/new"); i != 1 {
		t.Errorf("quiet/new popped %dth behind a 1000-Flock flood, want 2nd (order starts %v)", i+1, got[:6])
	}
	if i, j := slices.Index(got, "other/a"), slices.Index(got, "other/b"); i != 2 || j != 4 {
		t.Errorf("other/a, other/b popped at %d, %d; want 2 and 4 (turns alternate)", i, j)
	}
	// Within a namespace, first in first out.
	var flood []string
	for _, k := range got {
		if namespaceOf(k) == "flood" {
			flood = append(flood, k)
		}
	}
	for i, k := range flood {
		if want := fmt.Sprintf("flood/f-%d", i); k != want {
			t.Fatalf("flood key %d = %s, want %s", i, k, want)
		}
	}
}

func TestFairQueueUrgentFirstCatchUpNotStarved(t *testing.T) {
	urgent := sets.New[string]()
	q := newFairQueue(urgent.Has)
	for i := range 50 {
		q.Push(fmt.Sprintf("ns/settled-%d", i)) // resyncs of converged Flocks
	}
	for i := range 100 {
		k := fmt.Sprintf("ns/new-%d", i)
		urgent.Insert(k)
		q.Push(k)
	}
	got := popAll(q)
	var firstTen int
	for _, k := range got[:10] {
		if urgent.Has(k) {
			firstTen++
		}
	}
	if firstTen != 9 {
		t.Errorf("%d of the first 10 pops were urgent, want 9 (one turn in %d for catch-up): %v", firstTen, catchUpEvery, got[:10])
	}
	if i := slices.Index(got, "ns/new-99"); i >= 115 {
		t.Errorf("the last urgent key popped at %d, want before the catch-up backlog (< 115)", i)
	}

	// A queued catch-up key that becomes urgent moves up on Touch.
	urgent = sets.New[string]()
	q = newFairQueue(urgent.Has)
	for i := range 20 {
		q.Push(fmt.Sprintf("ns/settled-%d", i))
	}
	q.Push("ns/other-urgent")
	urgent.Insert("ns/other-urgent")
	q.Touch("ns/other-urgent") // queued as catch-up, urgent since: moves up
	urgent.Insert("ns/settled-19")
	q.Touch("ns/settled-19")
	got = popAll(q)
	if got[0] != "ns/other-urgent" || got[1] != "ns/settled-19" {
		t.Errorf("after Touch, order starts %v; want ns/other-urgent, ns/settled-19", got[:3])
	}
	if len(got) != 21 || len(sets.New(got...)) != 21 {
		t.Errorf("popped %d keys (%d distinct), want 21", len(got), len(sets.New(got...)))
	}
}

func TestWorkQueueUsesFairOrder(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	lister := flocklisters.NewFlockLister(indexer)
	settled := newFlock("settled", 1)
	settled.Status = v1alpha1.FlockStatus{ObservedGeneration: settled.Generation, Replicas: 1, ReadyReplicas: 1, UpdatedReplicas: 1, CurrentRevision: "r", UpdateRevision: "r"}
	fresh := newFlock("fresh", 1)
	for _, f := range []*v1alpha1.Flock{settled, fresh} {
		if err := indexer.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	if !converged(settled) || converged(fresh) {
		t.Fatalf("converged(settled)=%v converged(fresh)=%v, want true, false", converged(settled), converged(fresh))
	}
	q := newWorkQueue(lister)
	defer q.ShutDown()
	q.Add(testNamespace + "/settled")
	q.Add(testNamespace + "/gone") // deleted Flocks are urgent: their cleanup
	q.Add(testNamespace + "/fresh")
	q.Add(testNamespace + "/fresh") // deduplicated by the workqueue
	var got []string
	deadline := time.After(5 * time.Second)
	for q.Len() > 0 {
		select {
		case <-deadline:
			t.Fatal("queue did not drain")
		default:
		}
		k, _ := q.Get()
		got = append(got, k)
		q.Done(k)
	}
	want := []string{testNamespace + "/gone", testNamespace + "/fresh", testNamespace + "/settled"}
	if !slices.Equal(got, want) {
		t.Errorf("work queue order %v, want %v", got, want)
	}
}

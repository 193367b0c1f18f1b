// File fair_queue.go: the order in which queued Flocks are synced (issue
// 17): Flocks that are new, changed or not yet converged come before the
// catch-up of converged ones (resyncs), and within each of the two tiers
// namespaces take turns, so one namespace's burst of Flocks does not
// starve the others. It is the storage under client-go's workqueue, which
// keeps its guarantees (an item is queued once, never synced twice at once).

package flock

import (
	"container/list"
	"strings"

	"k8s.io/client-go/util/workqueue"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flocklisters "flock.dev/flock/pkg/generated/listers/flock/v1alpha1"
)

const (
	tierUrgent  = 0 // new, changed or unconverged Flocks, and deleted ones
	tierCatchUp = 1 // converged Flocks
	// catchUpEvery: while urgent work is queued, one pop in catchUpEvery
	// still serves the catch-up tier, so it is delayed, never starved.
	catchUpEvery = 10
)

// fairQueue implements workqueue.Queue[string] over keys namespace/name.
// The workqueue calls it under its own lock.
type fairQueue struct {
	// urgent classifies a key when it is queued or queued again.
	urgent func(key string) bool
	tiers  [2]tier
	where  map[string]queued
	pops   int
}

// queued is where a key waits.
type queued struct {
	tier int
	elem *list.Element
}

// tier holds a FIFO per namespace and the namespaces' round-robin ring.
type tier struct {
	byNamespace map[string]*list.List
	ring        *list.List // of namespaces with queued keys
	inRing      map[string]*list.Element
	n           int
}

var _ workqueue.Queue[string] = &fairQueue{}

// newFairQueue returns an empty queue that asks urgent which tier a key
// belongs in.
func newFairQueue(urgent func(key string) bool) *fairQueue {
	q := &fairQueue{urgent: urgent, where: map[string]queued{}}
	for i := range q.tiers {
		q.tiers[i] = tier{byNamespace: map[string]*list.List{}, ring: list.New(), inRing: map[string]*list.Element{}}
	}
	return q
}

func (q *fairQueue) tierOf(key string) int {
	if q.urgent(key) {
		return tierUrgent
	}
	return tierCatchUp
}

// Push queues a key that is not queued yet.
func (q *fairQueue) Push(key string) {
	t := q.tierOf(key)
	q.where[key] = queued{tier: t, elem: q.tiers[t].push(key)}
}

// Touch is called when a queued key is added again: a catch-up key that
// has become urgent moves to the end of its namespace's urgent FIFO.
func (q *fairQueue) Touch(key string) {
	w, ok := q.where[key]
	if !ok || w.tier == tierUrgent || !q.urgent(key) {
		return
	}
	q.tiers[w.tier].remove(key, w.elem)
	q.where[key] = queued{tier: tierUrgent, elem: q.tiers[tierUrgent].push(key)}
}

// Len is the number of queued keys.
func (q *fairQueue) Len() int {
	return q.tiers[tierUrgent].n + q.tiers[tierCatchUp].n
}

// Pop returns the next key: from the urgent tier unless it is empty or it
// is the catch-up tier's turn, and within a tier from the namespace whose
// turn it is.
func (q *fairQueue) Pop() string {
	q.pops++
	t := tierUrgent
	if q.tiers[tierUrgent].n == 0 || (q.tiers[tierCatchUp].n > 0 && q.pops%catchUpEvery == 0) {
		t = tierCatchUp
	}
	key := q.tiers[t].pop()
	delete(q.where, key)
	return key
}

func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

func (t *tier) push(key string) *list.Element {
	ns := namespaceOf(key)
	l := t.byNamespace[ns]
	if l == nil {
		l = list.New()
		t.byNamespace[ns] = l
		t.inRing[ns] = t.ring.PushBack(ns)
	}
	t.n++
	return l.PushBack(key)
}

func (t *tier) remove(key string, e *list.Element) {
	ns := namespaceOf(key)
	l := t.byNamespace[ns]
	l.Remove(e)
	t.n--
	if l.Len() == 0 {
		t.dropNamespace(ns)
	}
}

// pop takes the oldest key of the namespace at the head of the ring and
// sends that namespace to the back. The tier must not be empty.
func (t *tier) pop() string {
	front := t.ring.Front()
	ns := front.Value.(string)
	l := t.byNamespace[ns]
	key := l.Remove(l.Front()).(string)
	t.n--
	if l.Len() == 0 {
		t.dropNamespace(ns)
	} else {
		t.ring.MoveToBack(front)
	}
	return key
}

func (t *tier) dropNamespace(ns string) {
	t.ring.Remove(t.inRing[ns])
	delete(t.inRing, ns)
	delete(t.byNamespace, ns)
}

// flockNeedsWork reports whether the Flock with key is gone or not yet
// converged: its spec not yet observed, or members not all updated and
// ready. Such a Flock goes in the urgent tier.
func flockNeedsWork(lister flocklisters.FlockLister) func(key string) bool {
	return func(key string) bool {
		ns, name, _ := strings.Cut(key, "/")
		f, err := lister.Flocks(ns).Get(name)
		if err != nil {
			return true
		}
		return !converged(f)
	}
}

// converged reports whether the status shows the current spec reached.
func converged(f *v1alpha1.Flock) bool {
	st := f.Status
	want := replicasOf(f)
	return f.DeletionTimestamp == nil && st.ObservedGeneration == f.Generation &&
		st.Replicas == want && st.ReadyReplicas == want && st.UpdatedReplicas == want &&
		st.CurrentRevision == st.UpdateRevision
}

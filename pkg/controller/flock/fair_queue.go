// File fair_queue.go: the order in which queued Flocks are synced (issue 17). Namespaces take
// turns, so that one namespace's burst of Flocks does not starve the Flocks of the others; within
// a namespace, new and changed Flocks (a create, a spec change, a deletion) go before catch-up
// work (pod, node and status events, requeues, the Flocks of a new leadership term), each of the
// two first in, first out, as client-go's default queue. The namespaces' first keys are served in
// the order they came. It is the storage under client-go's workqueue, which keeps its guarantees
// (a key is queued once, never synced twice at once) and its rate limiting and delays.
//
// Precedence stays inside a namespace on purpose: a burst of creates in one namespace would
// otherwise hold back every later sync of every other namespace's Flocks (their pods come from
// those later syncs) until the burst was placed.

package flock

import (
	"container/list"
	"strings"
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// precedenceMarks are the keys whose next sync goes before their
// namespace's catch-up work: the Flock event handlers mark a key just
// before they queue it. A mark is taken when the key is queued (or found
// queued already). Safe for concurrent use.
type precedenceMarks struct {
	mu     sync.Mutex
	marked map[string]bool
}

func newPrecedenceMarks() *precedenceMarks { return &precedenceMarks{marked: map[string]bool{}} }

// mark gives key's next sync precedence.
func (m *precedenceMarks) mark(key string) {
	m.mu.Lock()
	m.marked[key] = true
	m.mu.Unlock()
}

// clear drops every mark (a new term queues every Flock afresh; marks made
// while no queue took keys would stay otherwise).
func (m *precedenceMarks) clear() {
	m.mu.Lock()
	clear(m.marked)
	m.mu.Unlock()
}

// take reports whether key was marked, and unmarks it.
func (m *precedenceMarks) take(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.marked[key] {
		return false
	}
	delete(m.marked, key)
	return true
}

// namespaceLanes are one namespace's queued keys, oldest first: first the
// marked ones, then the rest.
type namespaceLanes struct {
	first, rest list.List
}

func (l *namespaceLanes) len() int { return l.first.Len() + l.rest.Len() }

// queuedKey is a queued key's place.
type queuedKey struct {
	elem  *list.Element
	first bool
}

// namespaceRoundRobin implements workqueue.Queue[string] over keys
// namespace/name. The workqueue calls it under its own lock.
type namespaceRoundRobin struct {
	// marks says which keys go first in their namespace (none when nil).
	marks *precedenceMarks
	// byNamespace holds each namespace's queued keys.
	byNamespace map[string]*namespaceLanes
	// ring holds the namespaces with queued keys, the next one to serve
	// first.
	ring *list.List
	// inRing is each namespace's element of ring.
	inRing map[string]*list.Element
	// queued is each queued key's place in its namespace's lanes.
	queued map[string]queuedKey
}

var _ workqueue.Queue[string] = &namespaceRoundRobin{}

// newNamespaceRoundRobin returns an empty queue in which the keys marks
// marks go first in their namespace (marks may be nil).
func newNamespaceRoundRobin(marks *precedenceMarks) *namespaceRoundRobin {
	return &namespaceRoundRobin{marks: marks, byNamespace: map[string]*namespaceLanes{}, ring: list.New(),
		inRing: map[string]*list.Element{}, queued: map[string]queuedKey{}}
}

// taken reports whether key is marked, taking the mark.
func (q *namespaceRoundRobin) taken(key string) bool {
	return q.marks != nil && q.marks.take(key)
}

// Push queues a key that is not queued yet, last in its namespace's first
// lane when it is marked, else last in the rest; a namespace with no key
// queued joins the end of the ring.
func (q *namespaceRoundRobin) Push(key string) {
	ns := namespaceOf(key)
	l := q.byNamespace[ns]
	if l == nil {
		l = &namespaceLanes{}
		q.byNamespace[ns] = l
		q.inRing[ns] = q.ring.PushBack(ns)
	}
	if q.taken(key) {
		q.queued[key] = queuedKey{elem: l.first.PushBack(key), first: true}
		return
	}
	q.queued[key] = queuedKey{elem: l.rest.PushBack(key)}
}

// Touch is called when a queued key is added again: a key marked since it
// was queued moves to the end of its namespace's first lane; otherwise it
// keeps its place.
func (q *namespaceRoundRobin) Touch(key string) {
	at, ok := q.queued[key]
	if !ok || at.first || !q.taken(key) {
		return
	}
	l := q.byNamespace[namespaceOf(key)]
	l.rest.Remove(at.elem)
	q.queued[key] = queuedKey{elem: l.first.PushBack(key), first: true}
}

// Len is the number of queued keys.
func (q *namespaceRoundRobin) Len() int { return len(q.queued) }

// Pop returns the next key of the namespace whose turn it is (its first
// lane's oldest, else its oldest), and sends that namespace to the end of
// the ring. The queue must not be empty (the workqueue pops only then).
func (q *namespaceRoundRobin) Pop() string {
	front := q.ring.Front()
	ns := front.Value.(string)
	l := q.byNamespace[ns]
	lane := &l.first
	if lane.Len() == 0 {
		lane = &l.rest
	}
	key := lane.Remove(lane.Front()).(string)
	delete(q.queued, key)
	if l.len() == 0 {
		q.ring.Remove(front)
		delete(q.inRing, ns)
		delete(q.byNamespace, ns)
	} else {
		q.ring.MoveToBack(front)
	}
	return key
}

// namespaceOf returns the namespace of a key namespace/name.
func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

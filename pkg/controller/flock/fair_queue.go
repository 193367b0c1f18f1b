// File fair_queue.go: the order in which queued Flocks are synced (issue 17): namespaces take
// turns, each with its own FIFO, so that one namespace's burst of Flocks does not starve the
// Flocks of the others. Within a namespace the order is first in, first out, as client-go's
// default queue; so is the order of the namespaces' first keys. It is the storage under
// client-go's workqueue, which keeps its guarantees (a key is queued once, never synced twice
// at once) and its rate limiting and delays.

package flock

import (
	"container/list"
	"strings"

	"k8s.io/client-go/util/workqueue"
)

// namespaceRoundRobin implements workqueue.Queue[string] over keys
// namespace/name. The workqueue calls it under its own lock.
type namespaceRoundRobin struct {
	// byNamespace holds each namespace's queued keys, oldest first.
	byNamespace map[string]*list.List
	// ring holds the namespaces with queued keys, the next one to serve
	// first.
	ring *list.List
	// inRing is each namespace's element of ring.
	inRing map[string]*list.Element
	n      int
}

var _ workqueue.Queue[string] = &namespaceRoundRobin{}

// newNamespaceRoundRobin returns an empty queue.
func newNamespaceRoundRobin() *namespaceRoundRobin {
	return &namespaceRoundRobin{byNamespace: map[string]*list.List{}, ring: list.New(), inRing: map[string]*list.Element{}}
}

// Push queues a key that is not queued yet, last in its namespace's FIFO;
// a namespace with no key queued joins the end of the ring.
func (q *namespaceRoundRobin) Push(key string) {
	ns := namespaceOf(key)
	l := q.byNamespace[ns]
	if l == nil {
		l = list.New()
		q.byNamespace[ns] = l
		q.inRing[ns] = q.ring.PushBack(ns)
	}
	l.PushBack(key)
	q.n++
}

// Touch is called when a queued key is added again: it keeps its place.
func (q *namespaceRoundRobin) Touch(string) {}

// Len is the number of queued keys.
func (q *namespaceRoundRobin) Len() int { return q.n }

// Pop returns the oldest key of the namespace whose turn it is, and sends
// that namespace to the end of the ring. The queue must not be empty (the
// workqueue pops only then).
func (q *namespaceRoundRobin) Pop() string {
	front := q.ring.Front()
	ns := front.Value.(string)
	l := q.byNamespace[ns]
	key := l.Remove(l.Front()).(string)
	q.n--
	if l.Len() == 0 {
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

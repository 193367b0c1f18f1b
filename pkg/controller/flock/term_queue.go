// File term_queue.go: the work queue of a small controller that runs beside the
// member loop under leader election, one leadership term at a time (the
// disruption budgets, the kubelet retries). Run shuts its queue down when its
// term ends; a later term starts a fresh one, as the member loop does
// (loop.go's newTerm), or its workers would find the last term's queue shut
// down and never sync again.

package flock

import (
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// termQueue is the current term's rate-limited queue of keys.
type termQueue struct {
	name  string
	mu    sync.Mutex
	q     workqueue.TypedRateLimitingInterface[string]
	terms int
}

func newTermQueue(name string) *termQueue {
	return &termQueue{name: name, q: newNamedQueue(name)}
}

func newNamedQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name},
	)
}

// add adds key to the current term's queue (an event handler's call; in
// between terms the key waits in the shut-down queue and is lost, which the
// next term's refill makes up for).
func (t *termQueue) add(key string) {
	t.mu.Lock()
	q := t.q
	t.mu.Unlock()
	q.Add(key)
}

// newTerm returns the queue of a term that starts: the first term's is the
// queue filled since the controller was made; a later term's is a fresh
// one, into which refill adds what the events in between would have.
func (t *termQueue) newTerm(refill func(add func(string))) workqueue.TypedRateLimitingInterface[string] {
	t.mu.Lock()
	t.terms++
	if t.terms == 1 {
		defer t.mu.Unlock()
		return t.q
	}
	q := newNamedQueue(t.name)
	t.q = q
	t.mu.Unlock()
	refill(q.Add)
	return q
}

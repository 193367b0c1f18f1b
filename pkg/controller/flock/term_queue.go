// File term_queue.go: the work queue of a controller that runs under leader
// election, one leadership term at a time (the member loop, the disruption
// budgets, the kubelet retries). Run shuts its queue down when its term ends;
// a later term starts a fresh one, or its workers would find the last term's
// queue shut down and never sync again.

package flock

import (
	"context"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// termQueue is the current term's rate-limited queue of keys.
type termQueue struct {
	newQueue func() workqueue.TypedRateLimitingInterface[string]
	mu       sync.Mutex
	q        workqueue.TypedRateLimitingInterface[string]
	terms    int
}

// newTermQueue returns a termQueue whose terms' queues newQueue makes.
func newTermQueue(newQueue func() workqueue.TypedRateLimitingInterface[string]) *termQueue {
	return &termQueue{newQueue: newQueue, q: newQueue()}
}

// newNamedTermQueue returns a termQueue of plain rate-limited queues named
// name.
func newNamedTermQueue(name string) *termQueue {
	return newTermQueue(func() workqueue.TypedRateLimitingInterface[string] { return newNamedQueue(name) })
}

func newNamedQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name},
	)
}

// current returns the current term's queue.
func (t *termQueue) current() workqueue.TypedRateLimitingInterface[string] {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.q
}

// add adds key to the current term's queue (an event handler's call; in
// between terms the key waits in the shut-down queue and is lost, which the
// next term's refill makes up for).
func (t *termQueue) add(key string) { t.current().Add(key) }

// addAfter adds key to the current term's queue once d has passed (lost
// like add's in between terms).
func (t *termQueue) addAfter(key string, d time.Duration) { t.current().AddAfter(key, d) }

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
	q := t.newQueue()
	t.q = q
	t.mu.Unlock()
	refill(q.Add)
	return q
}

// work runs workers goroutines that sync the keys of q, a term's queue,
// until ctx ends; then it shuts q down and returns once the workers have
// stopped. A key whose sync fails is retried with backoff and the error
// logged as failed, unless every write the sync could not make was refused
// because the namespace is being deleted (not retried; see Controller.sync)
// or no longer exists (retried without the error log).
func work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], workers int, syncKey func(context.Context, string) error, failed string) {
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for processNext(ctx, q, syncKey, failed) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

func processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error, failed string) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	err := sync(ctx, key)
	if err == nil {
		q.Forget(key)
		return true
	}
	ns, _, _ := cache.SplitMetaNamespaceKey(key)
	switch {
	case ctx.Err() != nil:
		// The term ended (a lost lease or a stop) during the sync; the
		// next term syncs every Flock again.
		klog.FromContext(ctx).V(2).Info("Sync cut short by the end of the controller's term", "key", key, "err", err)
		q.Forget(key)
		return true
	case namespaceGone(err, ns) && namespaceRefused(err, ns):
		// Tried again with backoff, quietly: the controller of Flocks
		// whose namespace is gone deletes the Flock, or the namespace
		// is made again.
		klog.FromContext(ctx).V(2).Info("Namespace does not exist; its writes are refused", "key", key, "err", err)
		q.AddRateLimited(key)
		return true
	case namespaceTerminating(err):
		klog.FromContext(ctx).V(2).Info("Namespace is being deleted; its writes are refused", "key", key, "err", err)
	default:
		utilruntime.HandleErrorWithContext(ctx, err, failed, "key", key)
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}

// File loop.go: the Controller type, what the loop holds: the listers and
// indexer it reads, the workqueue, the clock and the FlockControl it calls.

package flock

import (
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	flocklisters "flock.dev/flock/pkg/generated/listers/flock/v1alpha1"
)

// Controller is the Flock controller: the loop that watches Flocks, their
// pods and Services, and nodes, and syncs each changed Flock through a
// FlockControl.
type Controller struct {
	control FlockControl
	opts    Options

	flockLister   flocklisters.FlockLister
	podLister     corelisters.PodLister
	podIndexer    cache.Indexer
	serviceLister corelisters.ServiceLister

	synced []cache.InformerSynced
	clock  clock.Clock

	// marks are the keys whose next sync goes before catch-up work (new
	// and changed Flocks), shared by every term's queue and cleared when
	// a new term's queue is made (it queues every Flock afresh).
	marks *precedenceMarks
	// queue is the current term's workqueue: Run shuts it down when its
	// term ends, and a later Run (a new leadership term) starts a new one.
	queue *termQueue
}

// workQueue returns the current term's workqueue.
func (c *Controller) workQueue() workqueue.TypedRateLimitingInterface[string] {
	return c.queue.current()
}

// newTerm prepares a Run: the first uses the queue the event handlers
// have been filling since NewController; a later one (after a lost lease)
// starts a fresh queue, as the last one was shut down, and enqueues every
// Flock, since events in between were dropped.
func (c *Controller) newTerm() workqueue.TypedRateLimitingInterface[string] {
	return c.queue.newTerm(func(add func(string)) {
		flocks, _ := c.flockLister.List(labels.Everything())
		for _, f := range flocks {
			add(cache.MetaObjectToName(f).String())
		}
	})
}

// podControllerUIDIndex indexes pods by the UID of their Flock controller,
// and the pods without a controller by namespace (indexByFlockController).
const podControllerUIDIndex = "flock.dev/controller-uid"

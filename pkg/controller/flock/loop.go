// File loop.go: the Controller type, what the loop holds: the listers and
// indexer it reads, the workqueue, the clock and the FlockControl it calls.

package flock

import (
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
	queue  workqueue.TypedRateLimitingInterface[string]
	clock  clock.Clock
}

// podControllerUIDIndex indexes pods by the UID of their Flock controller.
const podControllerUIDIndex = "flock.dev/controller-uid"

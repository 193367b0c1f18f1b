// File created_pods.go: the member pods this controller created that its
// pod cache does not show yet, so that a sync in between does not create
// them again (issue 17: at 50 x 3 one member in five got a second create,
// refused AlreadyExists, each a full pass through kube-apiserver's pod
// admission). A member pod that is not awaited is looked up in the cache
// as well before it is created (syncMember): the informer may have
// delivered it after the sync's snapshot was taken.

package flock

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// createdPodTTL bounds how long a created pod is awaited: should its
// informer never deliver it (a watch gap in which it came and went), the
// member is created again after that.
const createdPodTTL = time.Minute

// createdPods holds, by namespace/name, when each awaited pod's create was
// sent.
type createdPods struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// expect notes that a create of the pod key is about to be sent; call it
// before sending, so that the informer's delivery cannot come first.
func (c *createdPods) expect(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]time.Time{}
	}
	for k, at := range c.m {
		if now.Sub(at) > createdPodTTL {
			delete(c.m, k)
		}
	}
	c.m[key] = now
}

// awaited reports whether a create of the pod key was sent less than
// createdPodTTL before now and the informer has not delivered the pod
// since.
func (c *createdPods) awaited(key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.m[key]
	return ok && now.Sub(at) <= createdPodTTL
}

// memberPodAwaited reports whether the pod of f's member ord was created
// by this controller and its cache has not shown it yet.
func (fc *defaultFlockControl) memberPodAwaited(f *v1alpha1.Flock, ord int32, now time.Time) bool {
	return fc.created.awaited(cache.NewObjectName(f.Namespace, PodName(f.Name, ord)).String(), now)
}

// forget drops key: its create failed, or the informer delivered it.
func (c *createdPods) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// len returns how many pods are awaited.
func (c *createdPods) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// podObserver is a FlockControl that hears the pods its informer delivers,
// added or deleted.
type podObserver interface {
	podSeen(obj any)
}

var _ podObserver = &defaultFlockControl{}

func (fc *defaultFlockControl) podSeen(obj any) {
	if pod, ok := unwrapDeleted[*corev1.Pod](obj); ok {
		fc.created.forget(cache.NewObjectName(pod.Namespace, pod.Name).String())
	}
}

// File created_pods.go: the member pods this controller created that its
// pod cache does not show yet, so that a sync in between does not create
// them again (issue 17: at 50 x 3 one member in five got a second create,
// refused AlreadyExists, each a full pass through kube-apiserver's pod
// admission). A member pod that is not awaited is looked up in the cache
// as well before it is created (syncMember): the informer may have
// delivered it after the sync's snapshot was taken.

package flock

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// createdPodTTL bounds how long a created pod is awaited on trust alone:
// should its informer never deliver it (a watch gap in which it came and
// went), the member is created again after that. Where a pod that may
// exist matters (a member leaving status, its node given to another, its
// data removed), an older create is settled by reading the pod from the
// API server (podAwaited).
const createdPodTTL = time.Minute

// createdPodForgetAfter is when a create the cache never showed and no
// one asked about is forgotten, so that the map stays small.
const createdPodForgetAfter = time.Hour

// createdPod is an awaited create: when it was sent, and to which node.
type createdPod struct {
	at   time.Time
	node string
}

// createdPods holds, by namespace/name, the awaited creates.
type createdPods struct {
	mu sync.Mutex
	m  map[string]createdPod
}

// expect notes that a create of the pod key, pinned to node, is about to be
// sent; call it before sending, so that the informer's delivery cannot come
// first.
func (c *createdPods) expect(key, node string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]createdPod{}
	}
	for k, e := range c.m {
		if now.Sub(e.at) > createdPodForgetAfter {
			delete(c.m, k)
		}
	}
	c.m[key] = createdPod{at: now, node: node}
}

// get returns the awaited create of the pod key, however old.
func (c *createdPods) get(key string) (createdPod, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	return e, ok
}

// podAwaited reports whether the pod of f's member ord was created by this
// controller and its cache has not shown it yet, and on which node. A create
// older than createdPodTTL is settled by a read from the API server: a pod
// that is not there (or is another's) is no longer awaited; one that is
// there is awaited for another createdPodTTL, as the cache is far behind.
// When the read fails the pod is taken to exist.
func (fc *defaultFlockControl) podAwaited(ctx context.Context, f *v1alpha1.Flock, ord int32, now time.Time) (string, bool) {
	name := PodName(f.Name, ord)
	key := cache.NewObjectName(f.Namespace, name).String()
	e, ok := fc.created.get(key)
	if !ok {
		return "", false
	}
	if now.Sub(e.at) <= createdPodTTL {
		return e.node, true
	}
	pod, err := fc.members.GetPodLive(ctx, f.Namespace, name)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && !isControlledBy(pod, f)):
		fc.created.forgetSent(key, e.at)
		return "", false
	case err != nil:
		klog.FromContext(ctx).V(2).Info("Cannot read an awaited member pod; taking it to exist", "pod", klog.KRef(f.Namespace, name), "err", err)
		return e.node, true
	}
	klog.FromContext(ctx).Info("Member pod created long ago is still not in the pod cache", "pod", klog.KRef(f.Namespace, name),
		"createdAt", e.at, "node", PinnedNode(pod))
	fc.created.renew(key, e.at, now)
	return PinnedNode(pod), true
}

// awaitedPods returns podAwaited for every recorded member of f whose
// create is awaited: ordinal -> node.
func (fc *defaultFlockControl) awaitedPods(ctx context.Context, f *v1alpha1.Flock, now time.Time) map[int32]string {
	var out map[int32]string
	for _, m := range f.Status.Members {
		if node, ok := fc.podAwaited(ctx, f, m.Ordinal, now); ok {
			if out == nil {
				out = map[int32]string{}
			}
			out[m.Ordinal] = node
		}
	}
	return out
}

// forget drops key: its create failed, or the informer delivered it.
func (c *createdPods) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// forgetSent drops key if its create is still the one sent at sent.
func (c *createdPods) forgetSent(key string, sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok && e.at.Equal(sent) {
		delete(c.m, key)
	}
}

// renew awaits key's create, still the one sent at sent, from now on.
func (c *createdPods) renew(key string, sent, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok && e.at.Equal(sent) {
		e.at = now
		c.m[key] = e
	}
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

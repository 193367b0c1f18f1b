// File event_handlers.go: the loop's informer event handlers: which Flocks a change of a
// pod, Service, ControllerRevision or node enqueues.

package flock

import (
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

// enqueue adds a Flock (or a tombstone of one) to the queue.
func (c *Controller) enqueue(logger klog.Logger, obj any) {
	c.enqueueFlock(logger, obj, false)
}

// enqueueFlock queues a Flock after an event on it; first gives its sync
// precedence over catch-up work (a new Flock, a changed spec, a deletion).
func (c *Controller) enqueueFlock(logger klog.Logger, obj any, first bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleErrorWithLogger(logger, err, "Couldn't get key for object", "object", obj)
		return
	}
	if first {
		c.marks.mark(key)
	}
	c.workQueue().Add(key)
}

// isNewFlock reports whether an added Flock has never been synced (the
// informer's first list also adds every existing Flock: those that have
// been are catch-up work).
func isNewFlock(obj any) bool {
	f, ok := obj.(*v1alpha1.Flock)
	return ok && f.Status.ObservedGeneration == 0
}

// flockChanged reports whether an update changed what a Flock asks for: its
// spec (generation) or its deletion; status updates (the controller's own)
// do not.
func flockChanged(old, cur any) bool {
	o, ok1 := old.(*v1alpha1.Flock)
	n, ok2 := cur.(*v1alpha1.Flock)
	return ok1 && ok2 && (o.Generation != n.Generation || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil))
}

func (c *Controller) enqueueAfter(f *v1alpha1.Flock, d time.Duration) {
	c.workQueue().AddAfter(cache.MetaObjectToName(f).String(), d)
}

// resolveControllerRef returns the Flock a ControllerRef points to, or nil.
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *v1alpha1.Flock {
	if !IsFlockRef(ref) {
		return nil
	}
	f, err := c.flockLister.Flocks(namespace).Get(ref.Name)
	if err != nil || f.UID != ref.UID {
		return nil
	}
	return f
}

// flocksSelecting returns the Flocks in the pod's namespace whose selector
// matches it.
func (c *Controller) flocksSelecting(pod *corev1.Pod) []*v1alpha1.Flock {
	flocks, err := c.flockLister.Flocks(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*v1alpha1.Flock
	for _, f := range flocks {
		sel, err := metav1.LabelSelectorAsSelector(f.Spec.Selector)
		if err != nil || f.Spec.Selector == nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, f)
		}
	}
	return out
}

// enqueueHelperOwner enqueues the Flock a data helper pod works for (named
// by its labels; the pod is in the server's namespace), and reports whether
// pod is a helper.
func (c *Controller) enqueueHelperOwner(pod *corev1.Pod) bool {
	if pod.Labels[LabelHelper] == "" {
		return false
	}
	c.enqueueLabelled(pod.Labels)
	return true
}

// enqueueLabelled enqueues the Flock that the flock.dev/namespace and
// flock.dev/name labels of a helper pod or PersistentVolume name.
func (c *Controller) enqueueLabelled(l map[string]string) {
	ns, name := l[LabelFlockNamespace], l[v1alpha1.LabelFlockName]
	if ns != "" && name != "" {
		c.workQueue().Add(ns + "/" + name)
	}
}

// volumeChanged enqueues the Flock a PersistentVolume is a member's of.
func (c *Controller) volumeChanged(_ klog.Logger, obj any) {
	if pv, ok := unwrapDeleted[*corev1.PersistentVolume](obj); ok {
		c.enqueueLabelled(pv.Labels)
	}
}

// claimChanged enqueues the Flock that controls a claim.
func (c *Controller) claimChanged(logger klog.Logger, obj any) {
	claim, ok := unwrapDeleted[*corev1.PersistentVolumeClaim](obj)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(claim); ref != nil {
		if f := c.resolveControllerRef(claim.Namespace, ref); f != nil {
			c.enqueue(logger, f)
		}
		return
	}
	// A claim no Flock controls that has a member's claim name blocks that
	// member (DataConflict) until it goes; nothing else of the member may
	// exist yet to bring the sync that lets it start (its claim is made
	// before its volume), so the claim's own events do.
	flocks, err := c.flockLister.Flocks(claim.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, f := range flocks {
		if _, ok := ParseOrdinal(volumeNameOf(f)+"-"+f.Name, claim.Name); ok {
			c.enqueue(logger, f)
		}
	}
}

func (c *Controller) addPod(logger klog.Logger, obj any) {
	pod := obj.(*corev1.Pod)
	if c.enqueueHelperOwner(pod) {
		return
	}
	if c.enqueueController(logger, pod) {
		return
	}
	c.enqueueSelecting(logger, pod)
}

func (c *Controller) updatePod(logger klog.Logger, old, cur any) {
	oldPod, curPod := old.(*corev1.Pod), cur.(*corev1.Pod)
	if oldPod.ResourceVersion == curPod.ResourceVersion {
		return // a resync
	}
	if c.enqueueHelperOwner(curPod) {
		return
	}
	oldRef, curRef := metav1.GetControllerOfNoCopy(oldPod), metav1.GetControllerOfNoCopy(curPod)
	refChanged := !reflect.DeepEqual(oldRef, curRef)
	if refChanged && oldRef != nil {
		if f := c.resolveControllerRef(oldPod.Namespace, oldRef); f != nil {
			c.enqueue(logger, f)
		}
	}
	if curRef != nil {
		f := c.resolveControllerRef(curPod.Namespace, curRef)
		if f == nil {
			return
		}
		c.enqueue(logger, f)
		if f.Spec.MinReadySeconds > 0 && !isRunningAndReady(oldPod) && isRunningAndReady(curPod) {
			// Check again once it has been Ready for minReadySeconds.
			c.enqueueAfter(f, time.Duration(f.Spec.MinReadySeconds)*time.Second)
		}
		return
	}
	if refChanged || !reflect.DeepEqual(oldPod.Labels, curPod.Labels) {
		c.enqueueSelecting(logger, curPod)
	}
}

func (c *Controller) deletePod(logger klog.Logger, obj any) {
	pod, ok := unwrapDeleted[*corev1.Pod](obj)
	if !ok {
		return
	}
	if c.enqueueHelperOwner(pod) {
		return
	}
	if c.enqueueController(logger, pod) {
		return
	}
	// An orphan that went away may have held a member's pod name.
	c.enqueueSelecting(logger, pod)
}

// serviceChanged enqueues the Flock that controls a Service, and the
// Flocks whose serviceName it is.
func (c *Controller) serviceChanged(logger klog.Logger, obj any) {
	svc, ok := unwrapDeleted[*corev1.Service](obj)
	if !ok {
		return
	}
	c.enqueueController(logger, svc)
	flocks, err := c.flockLister.Flocks(svc.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, f := range flocks {
		if serviceNameOf(f) == svc.Name {
			c.enqueue(logger, f)
		}
	}
}

// revisionChanged enqueues the Flock that controls a ControllerRevision
// (a deleted update revision is recreated), or, for an orphan, the Flock it
// is labelled with (it may be adopted).
func (c *Controller) revisionChanged(logger klog.Logger, obj any) {
	cr, ok := unwrapDeleted[*appsv1.ControllerRevision](obj)
	if !ok {
		return
	}
	if c.enqueueController(logger, cr) {
		return
	}
	if name := cr.Labels[v1alpha1.LabelFlockName]; name != "" {
		if f, err := c.flockLister.Flocks(cr.Namespace).Get(name); err == nil {
			c.enqueue(logger, f)
		}
	}
}

// updateNode reacts to node changes that matter to placement or to a
// member's blockage; heartbeats do not.
func (c *Controller) updateNode(logger klog.Logger, old, cur any) {
	oldNode, curNode := old.(*corev1.Node), cur.(*corev1.Node)
	if oldNode.Spec.Unschedulable == curNode.Spec.Unschedulable &&
		placement.IsReady(oldNode) == placement.IsReady(curNode) &&
		reflect.DeepEqual(oldNode.Labels, curNode.Labels) &&
		reflect.DeepEqual(oldNode.Spec.Taints, curNode.Spec.Taints) {
		return
	}
	c.nodeChanged(logger, cur)
}

// nodeChanged enqueues the Flocks with a member on the node, and the
// Flocks that have ordinals without a node (the node may be a new home).
func (c *Controller) nodeChanged(logger klog.Logger, obj any) {
	node, ok := unwrapDeleted[*corev1.Node](obj)
	if !ok {
		return
	}
	flocks, err := c.flockLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, f := range flocks {
		if hasUnplacedOrdinals(f) {
			c.enqueue(logger, f)
			continue
		}
		for _, m := range f.Status.Members {
			if m.Node == node.Name {
				c.enqueue(logger, f)
				break
			}
		}
	}
}

// hasUnplacedOrdinals reports whether an ordinal below replicas has no
// recorded member.
func hasUnplacedOrdinals(f *v1alpha1.Flock) bool {
	placed := make(map[int32]bool, len(f.Status.Members))
	for _, m := range f.Status.Members {
		placed[m.Ordinal] = true
	}
	for ord := range replicasOf(f) {
		if !placed[ord] {
			return true
		}
	}
	return false
}

// unwrapDeleted returns the object of a delete notification, which is either
// the object itself or a tombstone holding its last known state.
func unwrapDeleted[T runtime.Object](obj any) (T, bool) {
	if o, ok := obj.(T); ok {
		return o, true
	}
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		o, ok := tombstone.Obj.(T)
		return o, ok
	}
	var zero T
	return zero, false
}

// enqueueController enqueues the Flock that controls obj, if it still
// exists, and reports whether obj has a controller at all.
func (c *Controller) enqueueController(logger klog.Logger, obj metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return false
	}
	if f := c.resolveControllerRef(obj.GetNamespace(), ref); f != nil {
		c.enqueue(logger, f)
	}
	return true
}

// enqueueSelecting enqueues every Flock whose selector matches an orphan pod:
// one of them may adopt it, or the pod may have held a member's name.
func (c *Controller) enqueueSelecting(logger klog.Logger, pod *corev1.Pod) {
	for _, f := range c.flocksSelecting(pod) {
		c.enqueue(logger, f)
	}
}

package flock

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/generated/clientset/versioned"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions/flock/v1alpha1"
	flocklisters "flock.dev/flock/pkg/generated/listers/flock/v1alpha1"
)

// podControllerUIDIndex indexes pods by the UID of their Flock controller.
const podControllerUIDIndex = "flock.dev/controller-uid"

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

// NewController returns a Flock controller. The informers must not have
// been started yet (an index is added to the pod informer); start them
// after NewController, then call Run. Flocks are read and written through
// flockClient (the loopback client of flock-apiserver); pods, Services and
// the ControllerRevisions that record templates through kubeClient (the
// core cluster). Events are recorded on Flocks through recorder, by
// ObjectReference (its scheme need not know Flocks).
func NewController(ctx context.Context, kubeClient kubernetes.Interface, flockClient versioned.Interface,
	flockInformer flockinformers.FlockInformer, podInformer coreinformers.PodInformer,
	nodeInformer coreinformers.NodeInformer, serviceInformer coreinformers.ServiceInformer,
	revisionInformer appsinformers.ControllerRevisionInformer,
	recorder record.EventRecorder, opts Options) (*Controller, error) {
	opts, err := opts.Complete()
	if err != nil {
		return nil, err
	}
	registerMetrics()
	members := NewMemberControl(kubeClient, podInformer.Lister(), serviceInformer.Lister())
	revisions := NewRevisionControl(kubeClient, revisionInformer.Lister())
	control := NewDefaultFlockControl(members, revisions, NewStatusUpdater(flockClient), flockClient,
		flockInformer.Lister(), nodeInformer.Lister(), recorder, opts)
	return newController(ctx, control, flockInformer, podInformer, nodeInformer, serviceInformer, revisionInformer, opts, clock.RealClock{})
}

// newController wires the loop around any FlockControl.
func newController(ctx context.Context, control FlockControl, flockInformer flockinformers.FlockInformer,
	podInformer coreinformers.PodInformer, nodeInformer coreinformers.NodeInformer,
	serviceInformer coreinformers.ServiceInformer, revisionInformer appsinformers.ControllerRevisionInformer,
	opts Options, clk clock.Clock) (*Controller, error) {
	logger := klog.FromContext(ctx)
	if err := podInformer.Informer().AddIndexers(cache.Indexers{podControllerUIDIndex: indexByFlockController}); err != nil {
		return nil, fmt.Errorf("adding the pod index (start the informers after NewController): %w", err)
	}
	c := &Controller{
		control:       control,
		opts:          opts,
		flockLister:   flockInformer.Lister(),
		podLister:     podInformer.Lister(),
		podIndexer:    podInformer.Informer().GetIndexer(),
		serviceLister: serviceInformer.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "flock"},
		),
		clock: clk,
	}

	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{flockInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.enqueue(logger, obj) },
			UpdateFunc: func(_, cur any) { c.enqueue(logger, cur) },
			DeleteFunc: func(obj any) { c.enqueue(logger, obj) },
		}},
		{podInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.addPod(logger, obj) },
			UpdateFunc: func(old, cur any) { c.updatePod(logger, old, cur) },
			DeleteFunc: func(obj any) { c.deletePod(logger, obj) },
		}},
		{serviceInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.serviceChanged(logger, obj) },
			UpdateFunc: func(old, cur any) { c.serviceChanged(logger, old); c.serviceChanged(logger, cur) },
			DeleteFunc: func(obj any) { c.serviceChanged(logger, obj) },
		}},
		{revisionInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.revisionChanged(logger, obj) },
			UpdateFunc: func(_, cur any) { c.revisionChanged(logger, cur) },
			DeleteFunc: func(obj any) { c.revisionChanged(logger, obj) },
		}},
		{nodeInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.nodeChanged(logger, obj) },
			UpdateFunc: func(old, cur any) { c.updateNode(logger, old, cur) },
			DeleteFunc: func(obj any) { c.nodeChanged(logger, obj) },
		}},
	}
	for _, h := range handlers {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			return nil, err
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return c, nil
}

// indexByFlockController indexes a pod by the UID of its controller, when
// that is a Flock.
func indexByFlockController(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || !isFlockRef(ref) {
		return nil, nil
	}
	return []string{string(ref.UID)}, nil
}

// HasSynced reports whether every informer has synced and has delivered
// its initial objects to the controller.
func (c *Controller) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Run waits for the caches to sync, then syncs Flocks with workers
// goroutines (Options.Workers when workers <= 0) until ctx is done. It
// blocks; a Controller is run once.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	if workers <= 0 {
		workers = c.opts.Workers
	}
	logger.Info("Starting Flock controller", "workers", workers)

	var wg sync.WaitGroup
	defer func() {
		logger.Info("Shutting down Flock controller")
		c.queue.ShutDown()
		wg.Wait()
	}()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.HasSynced) {
		return
	}
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
	}
	<-ctx.Done()
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Error syncing Flock, requeuing", "key", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync syncs the Flock with the given key.
func (c *Controller) sync(ctx context.Context, key string) (err error) {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()
	defer func() {
		syncDuration.Observe(c.clock.Since(start).Seconds())
		result := "success"
		if err != nil {
			result = "error"
		}
		syncTotal.WithLabelValues(result).Inc()
		logger.V(4).Info("Finished syncing Flock", "key", key, "duration", c.clock.Since(start), "err", err)
	}()

	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	f, err := c.flockLister.Flocks(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(2).Info("Flock has been deleted", "flock", klog.KRef(namespace, name))
		deleteMemberMetrics(namespace, name)
		return nil
	}
	if err != nil {
		return err
	}

	pods, err := c.candidatePods(f)
	if err != nil {
		return err
	}
	result, err := c.control.Sync(ctx, f, pods, c.clock.Now())
	if result.Members != nil {
		setMemberMetrics(namespace, name, result.Members)
	}
	if result.RequeueAfter > 0 {
		c.queue.AddAfter(key, result.RequeueAfter)
	}
	return err
}

// candidatePods returns the pods the Flock controls and the orphans in its
// namespace that its selector matches (from the cache; read-only).
func (c *Controller) candidatePods(f *v1alpha1.Flock) ([]*corev1.Pod, error) {
	objs, err := c.podIndexer.ByIndex(podControllerUIDIndex, string(f.UID))
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		pods = append(pods, obj.(*corev1.Pod))
	}
	selector, err := metav1.LabelSelectorAsSelector(f.Spec.Selector)
	if err != nil || f.Spec.Selector == nil || selector.Empty() {
		return pods, nil // the control reports the bad selector
	}
	orphans, err := c.podLister.Pods(f.Namespace).List(selector)
	if err != nil {
		return nil, err
	}
	for _, pod := range orphans {
		if metav1.GetControllerOfNoCopy(pod) == nil {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// enqueue adds a Flock (or a tombstone of one) to the queue.
func (c *Controller) enqueue(logger klog.Logger, obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleErrorWithLogger(logger, err, "Couldn't get key for object", "object", obj)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) enqueueAfter(f *v1alpha1.Flock, d time.Duration) {
	c.queue.AddAfter(cache.MetaObjectToName(f).String(), d)
}

// resolveControllerRef returns the Flock a ControllerRef points to, or nil.
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *v1alpha1.Flock {
	if !isFlockRef(ref) {
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

// enqueueCleanupOwner enqueues the Flock whose data-cleanup helper pod
// is, and reports whether pod is one.
func (c *Controller) enqueueCleanupOwner(pod *corev1.Pod) bool {
	name, ok := pod.Labels[LabelCleanupOf]
	if !ok {
		return false
	}
	c.queue.Add(pod.Namespace + "/" + name)
	return true
}

func (c *Controller) addPod(logger klog.Logger, obj any) {
	pod := obj.(*corev1.Pod)
	if c.enqueueCleanupOwner(pod) {
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
	if c.enqueueCleanupOwner(curPod) {
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
	if c.enqueueCleanupOwner(pod) {
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
		isNodeReady(oldNode) == isNodeReady(curNode) &&
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

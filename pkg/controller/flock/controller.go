// File controller.go: the loop: informers, the workqueue, workers, and sync, which reads
// a Flock and its candidate pods from the caches and calls FlockControl.

package flock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/generated/clientset/versioned"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions/flock/v1alpha1"
	"flock.dev/flock/pkg/nodeagent"
)

// Clients are the controller's clients of the core cluster, one per kind
// of work, as kube-controller-manager gives each of its controllers a client
// (and so a rate limit) of its own: Members writes member pods, the
// headless Service and ControllerRevisions (the StatefulSet controller's
// share); Data writes members' PersistentVolumes and claims (the share of
// the PersistentVolume controller); Helpers writes the data helper pods.
// A nil Data or Helpers uses Members.
type Clients struct {
	Members, Data, Helpers kubernetes.Interface
}

// OneClient returns Clients that all use c.
func OneClient(c kubernetes.Interface) Clients { return Clients{Members: c} }

func (c Clients) complete() Clients {
	if c.Data == nil {
		c.Data = c.Members
	}
	if c.Helpers == nil {
		c.Helpers = c.Members
	}
	return c
}

// NewController returns a Flock controller. The informers must not have
// been started yet (an index is added to the pod informer); start them
// after NewController, then call Run. Flocks are read and written through
// flockClient (the loopback client of flock-apiserver); pods, Services and
// the ControllerRevisions that record templates through kubeClient (the
// core cluster). Events are recorded on Flocks through recorder, by
// ObjectReference (its scheme need not know Flocks). namespaceInformer
// tells which namespaces are being deleted: nothing is created for a Flock
// in one.
func NewController(ctx context.Context, clients Clients, flockClient versioned.Interface,
	flockInformer flockinformers.FlockInformer, podInformer coreinformers.PodInformer,
	nodeInformer coreinformers.NodeInformer, serviceInformer coreinformers.ServiceInformer,
	revisionInformer appsinformers.ControllerRevisionInformer,
	volumeInformer coreinformers.PersistentVolumeInformer, claimInformer coreinformers.PersistentVolumeClaimInformer,
	namespaceInformer coreinformers.NamespaceInformer, recorder record.EventRecorder, opts Options) (*Controller, error) {
	opts, err := opts.Complete()
	if err != nil {
		return nil, err
	}
	registerMetrics()
	clients = clients.complete()
	members := NewMemberControl(clients.Members, podInformer, serviceInformer.Lister())
	helpers := NewMemberControl(clients.Helpers, podInformer, serviceInformer.Lister())
	data, err := NewDataControl(clients.Data, volumeInformer, claimInformer)
	if err != nil {
		return nil, err
	}
	revisions, err := NewRevisionControl(clients.Members, revisionInformer.Informer())
	if err != nil {
		return nil, err
	}
	control := NewDefaultFlockControl(members, helpers, data, revisions, NewStatusUpdater(flockClient), flockClient,
		flockInformer.Lister(), nodeInformer.Lister(), namespaceInformer.Lister(), recorder, opts)
	c, err := newController(ctx, control, flockInformer, podInformer, nodeInformer, serviceInformer, revisionInformer,
		volumeInformer, claimInformer, opts, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	// Namespaces only gate creates (a namespace being deleted gets none);
	// their events bring no syncs.
	c.synced = append(c.synced, namespaceInformer.Informer().HasSynced)
	return c, nil
}

// newController wires the loop around any FlockControl.
func newController(ctx context.Context, control FlockControl, flockInformer flockinformers.FlockInformer,
	podInformer coreinformers.PodInformer, nodeInformer coreinformers.NodeInformer,
	serviceInformer coreinformers.ServiceInformer, revisionInformer appsinformers.ControllerRevisionInformer,
	volumeInformer coreinformers.PersistentVolumeInformer, claimInformer coreinformers.PersistentVolumeClaimInformer,
	opts Options, clk clock.Clock) (*Controller, error) {
	logger := klog.FromContext(ctx)
	if err := podInformer.Informer().AddIndexers(cache.Indexers{podControllerUIDIndex: indexByFlockController}); err != nil {
		return nil, fmt.Errorf("adding the pod index (start the informers after NewController): %w", err)
	}
	marks := newPrecedenceMarks()
	c := &Controller{
		control:       control,
		opts:          opts,
		flockLister:   flockInformer.Lister(),
		podLister:     podInformer.Lister(),
		podIndexer:    podInformer.Informer().GetIndexer(),
		serviceLister: serviceInformer.Lister(),
		marks:         marks,
		queue: newTermQueue(func() workqueue.TypedRateLimitingInterface[string] {
			// A new term's queue: the marks of the last term's keys go.
			marks.clear()
			return newWorkQueue(marks)
		}),
		clock: clk,
	}

	// A control that remembers its own writes of Flocks hears what the
	// cache delivers, so that it forgets each write as soon as the cache
	// shows it (written.go).
	updated, deleted := func(any) {}, func(any) {}
	if o, ok := control.(flockObserver); ok {
		updated, deleted = o.flockUpdated, o.flockDeleted
	}
	// Likewise for the pods it created (created_pods.go).
	podSeen := func(any) {}
	if o, ok := control.(podObserver); ok {
		podSeen = o.podSeen
	}
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{flockInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.enqueueFlock(logger, obj, isNewFlock(obj)) },
			UpdateFunc: func(old, cur any) { updated(cur); c.enqueueFlock(logger, cur, flockChanged(old, cur)) },
			DeleteFunc: func(obj any) { deleted(obj); c.enqueueFlock(logger, obj, true) },
		}},
		{podInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { podSeen(obj); c.addPod(logger, obj) },
			UpdateFunc: func(old, cur any) { c.updatePod(logger, old, cur) },
			DeleteFunc: func(obj any) { podSeen(obj); c.deletePod(logger, obj) },
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
		{volumeInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.volumeChanged(logger, obj) },
			UpdateFunc: func(_, cur any) { c.volumeChanged(logger, cur) },
			DeleteFunc: func(obj any) { c.volumeChanged(logger, obj) },
		}},
		{claimInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.claimChanged(logger, obj) },
			UpdateFunc: func(_, cur any) { c.claimChanged(logger, cur) },
			DeleteFunc: func(obj any) { c.claimChanged(logger, obj) },
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

// newWorkQueue returns the controller's rate-limited queue, named "flock"
// for its metrics, in which namespaces take turns and, within a namespace,
// the keys marked in marks go first (namespaceRoundRobin).
func newWorkQueue(marks *precedenceMarks) workqueue.TypedRateLimitingInterface[string] {
	const name = "flock"
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{
			Name: name,
			DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
				Name: name,
				Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
					Name:  name,
					Queue: newNamespaceRoundRobin(marks),
				}),
			}),
		},
	)
}

// indexByFlockController indexes a pod by the UID of its controller, when
// that is a Flock, and a pod without a controller under orphanIndexKey of
// its namespace (a helper pod under helperIndexKey too): a sync looks at its
// own pods, its namespace's orphans and its helpers, never at every pod of
// a namespace. A node agent's pod (labelled as one, on a node) is indexed
// under nodeAgentIndexKey of its namespace and node.
func indexByFlockController(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if pod.Labels[nodeagent.LabelComponent] == nodeagent.ComponentNodeAgent && pod.Spec.NodeName != "" {
		return []string{nodeAgentIndexKey(pod.Namespace, pod.Spec.NodeName)}, nil
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	switch {
	case ref == nil:
		if uid := pod.Labels[LabelFlockUID]; uid != "" && pod.Labels[LabelHelper] != "" {
			return []string{orphanIndexKey(pod.Namespace), helperIndexKey(pod.Namespace, types.UID(uid))}, nil
		}
		return []string{orphanIndexKey(pod.Namespace)}, nil
	case IsFlockRef(ref):
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

// orphanIndexKey is the podControllerUIDIndex key of the pods without a
// controller in namespace (a UID has no "/").
func orphanIndexKey(namespace string) string { return "orphans/" + namespace }

// helperIndexKey is the podControllerUIDIndex key of the helper pods in
// namespace working for the Flock with UID flockUID.
func helperIndexKey(namespace string, flockUID types.UID) string {
	return "helpers/" + namespace + "/" + string(flockUID)
}

// nodeAgentIndexKey is the podControllerUIDIndex key of the node agent pods
// in namespace on node.
func nodeAgentIndexKey(namespace, node string) string {
	return "node-agents/" + namespace + "/" + node
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
// blocks. Runs follow each other (one per leadership term), never overlap:
// each one after the first starts from every Flock in the cache.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	if workers <= 0 {
		workers = c.opts.Workers
	}
	logger.Info("Starting Flock controller", "workers", workers)

	q := c.newTerm()
	var wg sync.WaitGroup
	defer func() {
		logger.Info("Shutting down Flock controller")
		q.ShutDown()
		wg.Wait()
	}()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.HasSynced) {
		return
	}
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
	}
	wg.Go(func() { c.watchBacklog(ctx, workers) })
	<-ctx.Done()
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	return processNext(ctx, c.workQueue(), c.sync, "Error syncing Flock, requeuing")
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
		deleteMemberMetrics(key)
		return c.control.SweepStrays(ctx, namespace, name)
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
		setMemberMetrics(key, result.Members)
	}
	if result.RequeueAfter > 0 {
		c.workQueue().AddAfter(key, result.RequeueAfter)
	}
	if err != nil && namespaceTerminating(err) {
		// Every write the sync could not make was refused because the
		// Flock's namespace is being deleted: retrying cannot help, and
		// the namespace's deletion takes the Flock with it. The next
		// event brings the next sync, as the built-in controllers do.
		logger.V(2).Info("Flock's namespace is being deleted; its writes are refused", "flock", klog.KObj(f), "err", err)
		return nil
	}
	if err != nil && flockGone(err, f) {
		// The Flock was deleted since the cache showed it: its delete
		// event ends its syncs.
		logger.V(2).Info("Flock was deleted during its sync", "flock", klog.KObj(f), "err", err)
		return nil
	}
	return err
}

// failureToTell reports whether a failed write of a sync of Flock f is
// worth a Warning event on f. It is not when the write was cut short because
// the sync's term ended (a lost lease or a stop: the next term's sync tries
// again), when kube-apiserver refused it because f's namespace is going or
// gone (the event would be refused too), or when f itself is gone.
func failureToTell(ctx context.Context, err error, f *v1alpha1.Flock) bool {
	return ctx.Err() == nil && !namespaceRefused(err, f.Namespace) && !flockGone(err, f)
}

// flockGone reports whether err, and every error it joins or aggregates,
// is flock-apiserver answering a write of Flock f with 404: f was deleted.
func flockGone(err error, f *v1alpha1.Flock) bool {
	return everyError(err, func(e error) bool { return notFound(e, v1alpha1.SchemeGroupVersion.Group, "flocks", f.Name) })
}

// namespaceTerminating reports whether err, and every error it joins or
// aggregates, is kube-apiserver refusing a create because the namespace is
// being deleted.
func namespaceTerminating(err error) bool {
	return everyError(err, terminatingRefusal)
}

// namespaceRefused reports whether err, and every error it joins or
// aggregates, is kube-apiserver refusing a write because namespace ns is
// being deleted or no longer exists: the writes of a Flock in it cannot be
// made, and are not the controller's failures to report.
func namespaceRefused(err error, ns string) bool {
	return everyError(err, func(e error) bool { return terminatingRefusal(e) || namespaceNotFound(e, ns) })
}

// namespaceGone reports whether err, or an error it joins or aggregates, is
// kube-apiserver refusing a write because namespace ns does not exist (the
// NamespaceLifecycle admission plugin's live lookup found no such
// namespace). A 404 of the object written names its own resource, not
// "namespaces".
func namespaceGone(err error, ns string) bool {
	return slices.ContainsFunc(errorLeaves(err), func(e error) bool { return namespaceNotFound(e, ns) })
}

func terminatingRefusal(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

func namespaceNotFound(err error, ns string) bool { return notFound(err, "", "namespaces", ns) }

// notFound reports whether err is an API server's 404 of the object name
// of resource (Details.Kind of a 404 is the resource) in group.
func notFound(err error, group, resource, name string) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Group == group && d.Kind == resource && d.Name == name
}

// everyError reports whether err is not nil and ok holds for it or, when it
// joins or aggregates errors, for each of them (an empty join or aggregate
// holds nothing, so it is false).
func everyError(err error, ok func(error) bool) bool {
	leaves := errorLeaves(err)
	return len(leaves) > 0 && !slices.ContainsFunc(leaves, func(e error) bool { return !ok(e) })
}

// errorLeaves returns err, or the errors it joins or aggregates,
// recursively (none for nil).
func errorLeaves(err error) []error {
	var errs []error
	switch e := err.(type) {
	case nil:
		return nil
	case utilerrors.Aggregate:
		errs = e.Errors()
	case interface{ Unwrap() []error }:
		errs = e.Unwrap()
	default:
		return []error{err}
	}
	var leaves []error
	for _, e := range errs {
		leaves = append(leaves, errorLeaves(e)...)
	}
	return leaves
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
	orphans, err := c.podIndexer.ByIndex(podControllerUIDIndex, orphanIndexKey(f.Namespace))
	if err != nil {
		return nil, err
	}
	for _, obj := range orphans {
		if pod := obj.(*corev1.Pod); selector.Matches(labels.Set(pod.Labels)) {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Event reasons the agent records on a PersistentVolume.
const (
	// ReasonDataPrepared: the directory was prepared and the volume marked.
	ReasonDataPrepared = "DataPrepared"
	// ReasonPrepareRefused: the request is not one the agent may carry out
	// (see RequestOf); it is not retried until the volume changes.
	ReasonPrepareRefused = "PrepareRefused"
	// ReasonPrepareFailed: preparing failed; it is retried with backoff.
	ReasonPrepareFailed = "PrepareFailed"
)

// fieldManager is the agent's field manager and event source component.
const fieldManager = "flock-node-agent"

// DefaultMarkWait is Options.MarkWait when it is not set: longer than the
// PersistentVolume controller took to reach the last of 3,000 new volumes
// on the bench's 2 cores (about 5 minutes), so the mark waits for the
// phase. The Flock controller's grace for the agent counts from that phase.
const DefaultMarkWait = 10 * time.Minute

// DefaultWorkers is the number of workers when Options.Workers is not set.
// Preparing a directory takes a few system calls and a patch; two workers
// keep one slow API call from holding up the rest.
const DefaultWorkers = 2

// Options configure an Agent.
type Options struct {
	// NodeName is the node the agent runs on: it prepares the volumes
	// whose AnnotationNode names it.
	NodeName string
	// DataRoot is the node's data root, mounted in the agent at the same
	// path; every directory the agent prepares is strictly under it.
	DataRoot string
	// Workers is how many volumes are prepared at once (DefaultWorkers if
	// not positive).
	Workers int
	// Resync is the informer's resync period (none if zero).
	Resync time.Duration
	// MarkWait is how long after a volume was made its mark waits for
	// kube-controller-manager's PersistentVolume controller to take the
	// volume up (its first phase), DefaultMarkWait if zero, no wait if
	// negative. The directory is prepared at once; only the mark waits.
	// That controller writes the volume's phase from the copy it read,
	// and a mark written in between makes that write fail with a
	// conflict: the phase then waits for the controller's next sync of
	// the volume, and the member for its phase (issue 17: 0.6 conflicts
	// a member at 5 members on kwok, 0.5 on real nodes; with a wait of
	// 1 s, 0.02-0.28 at 50 x 3, where that controller reached many
	// volumes about a second after they were made). Nothing waits for the
	// mark before the phase: the member's claim is completed only once
	// its volume has it, and the Flock controller's grace for the agent
	// counts from it. A controller that has not taken the volume up after
	// MarkWait gets the mark all the same.
	MarkWait time.Duration
	// AnyNode makes the agent prepare the pending volumes of every node,
	// not only of NodeName: one process on the host standing in for the
	// agents of simulated (kwok) nodes, whose directories are all on that
	// host. Never in a cluster of real nodes.
	AnyNode bool
}

// Agent prepares the data directories of the Flock member volumes of its
// node (see the package comment). Make one with New; Run it once.
type Agent struct {
	client   kubernetes.Interface
	opts     Options
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   corelisters.PersistentVolumeLister
	queue    workqueue.TypedRateLimitingInterface[string]
	// handler is the event handler's registration; its HasSynced is true
	// once the handler has seen every volume of the initial list.
	handler cache.ResourceEventHandlerRegistration
	// err is an error of New, returned by Run.
	err error

	// recorder is set by Run before any worker starts.
	recorder record.EventRecorder
	started  atomic.Bool
	synced   atomic.Bool
}

// New returns an agent using client for opts. Nothing runs before Run.
func New(client kubernetes.Interface, opts Options) *Agent {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.MarkWait == 0 {
		opts.MarkWait = DefaultMarkWait
	}
	// Only member volumes: every one has LabelFlockUID. Volumes of other
	// nodes are cached too (the node is an annotation, which cannot be
	// selected on server side); the transform keeps their cost down.
	factory := informers.NewSharedInformerFactoryWithOptions(client, opts.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelFlockUID }))
	pvs := factory.Core().V1().PersistentVolumes()
	a := &Agent{
		client:   client,
		opts:     opts,
		factory:  factory,
		informer: pvs.Informer(),
		lister:   pvs.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "flock_node_agent"}),
	}
	if err := a.informer.SetTransform(dropManagedFields); err != nil {
		a.err = err
		return a
	}
	a.handler, a.err = a.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.enqueue,
		UpdateFunc: func(_, obj any) { a.enqueue(obj) },
		// A deleted volume has nothing left to prepare.
	})
	return a
}

// Run runs an agent until ctx is done (see Agent.Run).
func Run(ctx context.Context, client kubernetes.Interface, opts Options) error {
	return New(client, opts).Run(ctx)
}

// Synced reports whether the agent's cache of volumes has synced and its
// workers run: from then on it prepares every pending volume of its node.
func (a *Agent) Synced() bool {
	return a.synced.Load()
}

// Run watches the member volumes and prepares those pending for the
// agent's node until ctx is done. It returns nil then, or an error if ctx
// ends before the cache synced or the options are wrong. Run may be called
// once.
func (a *Agent) Run(ctx context.Context) error {
	if a.err != nil {
		return fmt.Errorf("node agent: %w", a.err)
	}
	if a.opts.NodeName == "" {
		return errors.New("node agent: no node name")
	}
	if !filepath.IsAbs(a.opts.DataRoot) || filepath.Clean(a.opts.DataRoot) == "/" {
		return fmt.Errorf("node agent: data root %q is not an absolute path below /", a.opts.DataRoot)
	}
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("node agent: Run called twice")
	}
	logger := klog.FromContext(ctx).WithValues("node", a.opts.NodeName)
	ctx = klog.NewContext(ctx, logger)

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	broadcaster.StartStructuredLogging(0)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.client.CoreV1().Events("")})
	a.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: fieldManager, Host: a.opts.NodeName})

	defer a.queue.ShutDown()
	a.factory.Start(ctx.Done())
	// On return ctx is done, so the informer stops; wait for it.
	defer a.factory.Shutdown()

	logger.Info("Waiting for the cache of member volumes to sync")
	if !cache.WaitForCacheSync(ctx.Done(), a.informer.HasSynced, a.handler.HasSynced) {
		return fmt.Errorf("node agent: cache of PersistentVolumes not synced: %w", context.Cause(ctx))
	}

	var workers sync.WaitGroup
	for range a.opts.Workers {
		workers.Go(func() {
			for a.processNext(ctx) {
			}
		})
	}
	a.synced.Store(true)
	logger.Info("Node agent running", "dataRoot", a.opts.DataRoot, "workers", a.opts.Workers)
	<-ctx.Done()
	a.synced.Store(false)
	a.queue.ShutDown()
	workers.Wait()
	logger.Info("Node agent stopped")
	return nil
}

// enqueue queues a volume that is pending for the agent's node.
func (a *Agent) enqueue(obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if ok && a.pending(pv) {
		a.queue.Add(pv.Name)
	}
}

// pending reports whether pv is pending for this agent: for its node, or
// for any node with Options.AnyNode.
func (a *Agent) pending(pv *corev1.PersistentVolume) bool {
	if a.opts.AnyNode {
		node := pv.Annotations[AnnotationNode]
		return node != "" && Pending(pv, node)
	}
	return Pending(pv, a.opts.NodeName)
}

// processNext prepares the next queued volume; it returns false once the
// queue is shut down.
func (a *Agent) processNext(ctx context.Context) bool {
	name, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(name)
	if ctx.Err() != nil {
		return false
	}
	if a.sync(ctx, name) {
		a.queue.Forget(name)
	} else {
		a.queue.AddRateLimited(name)
	}
	return true
}

// sync prepares the volume called name if it is still pending. It returns
// false if that should be tried again, with backoff.
func (a *Agent) sync(ctx context.Context, name string) bool {
	logger := klog.FromContext(ctx).WithValues("persistentVolume", name)
	pv, err := a.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return true
	} else if err != nil {
		logger.Error(err, "Reading a PersistentVolume from the cache failed")
		return false
	}
	if !a.pending(pv) {
		return true
	}
	req, err := RequestOf(pv, a.opts.DataRoot)
	if err != nil {
		// Trying again would refuse again: only a change of the volume
		// (which brings an event) could make it acceptable.
		logger.V(2).Info("Refused to prepare member data directory", "err", err)
		a.recorder.Event(pv, corev1.EventTypeWarning, ReasonPrepareRefused, err.Error())
		return true
	}
	if err := Prepare(req, a.opts.DataRoot); err != nil {
		logger.V(2).Info("Preparing member data directory failed", "dir", req.Dir, "err", err)
		a.recorder.Eventf(pv, corev1.EventTypeWarning, ReasonPrepareFailed, "preparing data directory %s failed: %v", req.Dir, err)
		return false
	}
	if wait := a.markWait(pv, time.Now()); wait > 0 {
		// The volume's update with its phase brings it back (Prepare
		// then finds the directory prepared and changes nothing), and
		// the end of the wait in any case.
		logger.V(4).Info("Member data directory prepared; its mark waits for the volume's phase", "dir", req.Dir, "wait", wait)
		a.queue.AddAfter(name, wait)
		return true
	}

	// The uid is a precondition: a volume deleted and made again under the
	// same name (for which the directory may mean something else) is not
	// marked; its own events bring it here.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         pv.UID,
		"annotations": map[string]string{AnnotationPrepared: "true"},
	}})
	if err != nil {
		logger.Error(err, "Making the patch failed")
		return false
	}
	_, err = a.client.CoreV1().PersistentVolumes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		logger.V(2).Info("PersistentVolume gone or replaced before it was marked prepared", "err", err)
		return true
	case err != nil:
		if ctx.Err() == nil {
			logger.Error(err, "Marking PersistentVolume prepared failed; will retry")
		}
		return false
	}
	logger.V(2).Info("Prepared member data directory", "dir", req.Dir, "uid", req.UID, "gid", req.GID, "mode", fmt.Sprintf("%#o", uint32(req.Mode)))
	a.recorder.Eventf(pv, corev1.EventTypeNormal, ReasonDataPrepared, "prepared data directory %s on node %s (owner %d:%d, mode %#o)",
		req.Dir, a.opts.NodeName, req.UID, req.GID, uint32(req.Mode))
	return true
}

// markWait returns how much longer the mark of pv, whose directory is
// prepared, waits for the PersistentVolume controller's first phase of it
// (Options.MarkWait): none once the volume has a phase other than Pending,
// or was made MarkWait or more ago. A clock that is behind the server's
// makes the volume look younger, never the wait longer than MarkWait.
func (a *Agent) markWait(pv *corev1.PersistentVolume, now time.Time) time.Duration {
	if a.opts.MarkWait <= 0 || (pv.Status.Phase != "" && pv.Status.Phase != corev1.VolumePending) {
		return 0
	}
	age := max(now.Sub(pv.CreationTimestamp.Time), 0)
	return max(a.opts.MarkWait-age, 0)
}

// dropManagedFields is the informer's transform: thousands of cached
// volumes need not carry their managedFields, which the agent never reads.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	coreinformers "k8s.io/client-go/informers/core/v1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2"

	flockcontroller "flock.dev/flock/pkg/controller/flock"
	"flock.dev/flock/pkg/generated/clientset/versioned"
	flockscheme "flock.dev/flock/pkg/generated/clientset/versioned/scheme"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
)

// ControllerConfig configures the embedded Flock controller.
type ControllerConfig struct {
	// Enabled runs the controller (--controllers).
	Enabled bool
	// Options are handed to the controller.
	Options flockcontroller.Options
	// QPS and Burst limit each of the controller's clients of the core
	// cluster (flockcontroller.Clients: member pods, member data, helpers).
	QPS   float32
	Burst int
	// LeaderElection makes one of several replicas run the controller.
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
}

// embeddedController is the controller with what it needs to run.
type embeddedController struct {
	config     ControllerConfig
	controller *flockcontroller.Controller
	// budgets keeps every Flock's PodDisruptionBudget.
	budgets *flockcontroller.DisruptionBudgetController
	// retries asks a kubelet to sync a member pod again when the node
	// authorizer refused it the pod's claim, and kube-scheduler to try one
	// again when its cache was behind the pod's claim.
	retries *flockcontroller.PodRetryController
	// orphans deletes Flocks whose namespace is gone.
	orphans    *flockcontroller.NamespaceGoneController
	kubeClient kubernetes.Interface
	// leaseClient, not fenced, keeps the leader election lease and records
	// events.
	leaseClient kubernetes.Interface
	// fence refuses the controller's writes while this replica does not
	// hold a freshly renewed lease.
	fence *writeFence
	// informers are the controller's own, on the core cluster.
	informers kubeinformers.SharedInformerFactory
	// namespaces shows the namespaces being deleted, in which no event is
	// written.
	namespaces coreinformers.NamespaceInformer
	recorder   record.EventRecorder
	broadcast  record.EventBroadcaster
}

// controllerResync is the resync period of the controller's informers on
// the core cluster.
const controllerResync = 10 * time.Minute

// newEmbeddedController builds the controller before the informer factories
// start, so that its informers (and their indexes) are registered in time.
// It watches and writes the core cluster as coreConfig, the controller's own
// identity, with informers of its own: the server's identity reads only what
// the server itself needs. Nodes are the exception: admission caches every
// node too, so when the server has a node informer (nodes, not nil) the
// controller reads that one, and a cluster's nodes are cached once. So are
// namespaces (namespaces: the server's, for NamespaceLifecycle admission).
func newEmbeddedController(ctx context.Context, cfg ControllerConfig, coreConfig, loopback *rest.Config,
	flockFactory flockinformers.SharedInformerFactory, nodes coreinformers.NodeInformer, namespaces coreinformers.NamespaceInformer) (*embeddedController, error) {
	if coreConfig == nil {
		return nil, fmt.Errorf("the Flock controller needs a core cluster (--kubeconfig or in-cluster config)")
	}
	fence := &writeFence{}
	registerFenceMetrics()
	if cfg.LeaderElection.LeaderElect {
		fence.set(func() error { return errNoLease }) // until the first term
	}
	kc := rest.CopyConfig(coreConfig)
	kc.QPS, kc.Burst = cfg.QPS, cfg.Burst
	kc.UserAgent = "flock-controller"
	// As kube-controller-manager and kube-scheduler do: no gzip between
	// control-plane components. kube-apiserver compresses the informers'
	// initial lists (WatchList) for clients that accept gzip, which costs
	// both sides CPU on a fast network, and each watch held a gzip reader
	// (1.5 MiB of flock-apiserver's heap at 1,000 x 3, issue 17).
	kc.DisableCompression = true
	leaseClient, err := kubernetes.NewForConfig(kc)
	if err != nil {
		return nil, err
	}
	kc.Wrap(fence.wrap)
	// A client (and a rate limit) per kind of work, as kube-controller-
	// manager gives each of its controllers: member pods, Service and
	// revisions; members' volumes and claims; helper pods.
	var clients [3]kubernetes.Interface
	for i, agent := range []string{"flock-controller", "flock-controller/data", "flock-controller/helpers"} {
		kc.UserAgent = agent
		if clients[i], err = kubernetes.NewForConfig(kc); err != nil {
			return nil, err
		}
	}
	kubeClient := clients[0]
	lc := rest.CopyConfig(loopback)
	lc.UserAgent = "flock-controller"
	lc.Wrap(fence.wrap)
	flockClient, err := versioned.NewForConfig(lc)
	if err != nil {
		return nil, err
	}
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, controllerResync,
		kubeinformers.WithTransform(flockcontroller.CacheTransform))
	if nodes == nil {
		nodes = kubeFactory.Core().V1().Nodes()
	} else if err := nodes.Informer().SetTransform(flockcontroller.TrimNode); err != nil {
		// Started already (admission set the same transform before).
		klog.FromContext(ctx).V(2).Info("Shared node cache: transform not set again", "err", err)
	}
	broadcast := newEventBroadcaster(ctx)
	if namespaces == nil {
		namespaces = kubeFactory.Core().V1().Namespaces()
	}
	recorder := broadcast.NewRecorder(flockscheme.Scheme, corev1.EventSource{Component: "flock-controller"})
	c, err := flockcontroller.NewController(ctx, flockcontroller.Clients{Members: kubeClient, Data: clients[1], Helpers: clients[2]}, flockClient,
		flockFactory.Flock().V1alpha1().Flocks(),
		kubeFactory.Core().V1().Pods(),
		nodes,
		kubeFactory.Core().V1().Services(),
		kubeFactory.Apps().V1().ControllerRevisions(),
		kubeFactory.Core().V1().PersistentVolumes(),
		kubeFactory.Core().V1().PersistentVolumeClaims(),
		namespaces, recorder, cfg.Options)
	if err != nil {
		return nil, err
	}
	budgets, err := flockcontroller.NewDisruptionBudgetController(ctx, kubeClient, flockClient,
		flockFactory.Flock().V1alpha1().Flocks(), kubeFactory.Policy().V1().PodDisruptionBudgets(), namespaces, recorder)
	if err != nil {
		return nil, err
	}
	// Only kubelet's FailedMount events on pods: few, and only those.
	events := kubeFactory.InformerFor(&corev1.Event{}, func(client kubernetes.Interface, _ time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredEventInformer(client, metav1.NamespaceAll, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
			o.FieldSelector = flockcontroller.KubeletRetryEventSelector
		})
	})
	retries, err := flockcontroller.NewPodRetryController(ctx, kubeClient, events, kubeFactory.Core().V1().Pods(),
		kubeFactory.Core().V1().PersistentVolumeClaims(), recorder)
	if err != nil {
		return nil, err
	}
	orphans, err := flockcontroller.NewNamespaceGoneController(ctx, kubeClient, flockClient, flockFactory.Flock().V1alpha1().Flocks(), namespaces)
	if err != nil {
		return nil, err
	}
	return &embeddedController{config: cfg, controller: c, budgets: budgets, retries: retries, orphans: orphans, kubeClient: kubeClient, leaseClient: leaseClient, fence: fence, informers: kubeFactory, namespaces: namespaces, recorder: recorder, broadcast: broadcast}, nil
}

// newEventBroadcaster is the controllers' event broadcaster, with
// eventSpamKey as its spam filter's key.
func newEventBroadcaster(ctx context.Context) record.EventBroadcaster {
	return record.NewBroadcaster(record.WithContext(ctx),
		record.WithCorrelatorOptions(record.CorrelatorOptions{SpamKeyFunc: eventSpamKey, LRUCacheSize: eventCacheSize}))
}

// eventCacheSize bounds each of the event correlator's three caches (spam
// buckets, similar events to aggregate, events to count again), keyed by
// object and reason (and message). client-go's 4,096 held 3-3.5 MiB of
// flock-apiserver's heap after 1,000 Flocks x 3 (issue 17), for keys that
// come back seldom: a Flock's events name their member, so few repeat. An
// evicted key loses nothing: its next event is sent as a new Event (not a
// count) and gets a fresh spam bucket; a key that keeps firing stays cached.
const eventCacheSize = 1024

// eventSpamKey is the key of the event recorder's spam filter: the
// involved object AND the reason. client-go's default keys by the object
// alone, so all of a Flock's events share one bucket of 25 that refills one
// event per 5 minutes; a Flock makes several events per member (volume,
// claim, helper, pod), so a bigger Flock or a few scale steps used up the
// bucket and later events (DataCleanupDone, MemberMoved) were dropped
// silently. Per reason, a chatty reason can still not flood the cluster
// (the correlator aggregates repeats of one reason as before), and a rare
// one is always told.
func eventSpamKey(e *corev1.Event) string {
	o := e.InvolvedObject
	return strings.Join([]string{e.Source.Component, e.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion, e.Reason}, "")
}

// readyz fails until the controller's informers have synced.
func (e *embeddedController) readyz() healthz.HealthChecker {
	return healthz.NamedCheck("flock-controller-informers", func(*http.Request) error {
		if !e.controller.HasSynced() {
			return fmt.Errorf("the Flock controller's informers have not synced")
		}
		return nil
	})
}

// start runs the controller, under leader election when configured, until
// the server stops. It returns at once.
func (e *embeddedController) start(hookCtx genericapiserver.PostStartHookContext) error {
	ctx := hookCtx
	logger := klog.FromContext(ctx).WithName("flock-controller")
	ctx2 := klog.NewContext(ctx, logger)
	e.informers.Start(ctx.Done())
	e.broadcast.StartStructuredLogging(3)
	// Events go without the fence: the sink retries a refused write for
	// minutes, holding back every later event. None goes to a namespace
	// being deleted: kube-apiserver would refuse it.
	e.broadcast.StartRecordingToSink(flockcontroller.NewNamespaceAwareSink(
		&typedcorev1.EventSinkImpl{Interface: e.leaseClient.CoreV1().Events("")}, e.namespaces.Lister()))
	go func() {
		<-ctx.Done()
		e.broadcast.Shutdown()
	}()

	// run runs the controller for one leadership term; terms is held
	// while it runs, so that a new term starts only once the last one's
	// workers have stopped.
	var terms sync.Mutex
	run := func(ctx context.Context) {
		terms.Lock()
		defer terms.Unlock()
		if ctx.Err() != nil {
			return // the term ended before the last one finished
		}
		go flockcontroller.EnsureLocalStorageClass(ctx, e.kubeClient)
		go e.budgets.Run(ctx, 1)
		go e.retries.Run(ctx)
		go e.orphans.Run(ctx)
		e.controller.Run(ctx, e.config.Options.Workers)
	}
	le := e.config.LeaderElection
	if !le.LeaderElect {
		go run(ctx2)
		return nil
	}
	hostname, _ := os.Hostname()
	id := hostname + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
		e.leaseClient.CoreV1(), e.leaseClient.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: e.recorder})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            le.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Became leader; starting the Flock controller", "identity", id)
				run(klog.NewContext(ctx, logger))
			},
			OnStoppedLeading: func() {
				if ctx.Err() != nil {
					return // the server is stopping
				}
				// Another replica may already act on Flocks: the
				// controller stopped with the term's context; the API
				// keeps serving, and campaign campaigns again.
				logger.Error(nil, "Lost the Flock controller lease; the controller stopped, campaigning again", "identity", id)
			},
			OnNewLeader: func(identity string) {
				if identity != id {
					logger.Info("Another replica leads the Flock controller", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	e.fence.set(leaseCheck(elector, le.LeaseDuration.Duration, le.RenewDeadline.Duration))
	go campaign(ctx, elector, le.RetryPeriod.Duration)
	return nil
}

// campaign runs elector until ctx is done: each Run campaigns for the lease
// and returns when a term ends (its context, the controller's, cancelled);
// after one retry period it campaigns again.
func campaign(ctx context.Context, elector *leaderelection.LeaderElector, retry time.Duration) {
	for ctx.Err() == nil {
		elector.Run(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
}

// File disruption.go: the PodDisruptionBudget of each Flock (issue 19.3), kept
// by a small controller of its own beside the member loop: it watches Flocks
// and PodDisruptionBudgets and, per Flock, creates, updates (when replicas
// or the spec change) or deletes the budget named after the Flock, so
// `kubectl drain` never takes more than spec.disruptionBudget.maxUnavailable
// members down at once.

package flock

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/generated/clientset/versioned"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions/flock/v1alpha1"
	flocklisters "flock.dev/flock/pkg/generated/listers/flock/v1alpha1"
)

// NewPodDisruptionBudget returns the PodDisruptionBudget of Flock f, or nil
// when f asks for none: named after f, owned by it, over its member pods
// (the headless Service's selector), with minAvailable replicas minus
// spec.disruptionBudget.maxUnavailable (a percentage of replicas rounded
// down, at least 1). An integer minAvailable, rather than maxUnavailable,
// lets the disruption controller count the pods without looking the Flock's
// scale up (a lookup that fails while kube-controller-manager has not
// discovered flock.dev). Unhealthy members may always be evicted, so a drain
// never waits on a member that is failing anyway.
func NewPodDisruptionBudget(f *v1alpha1.Flock) *policyv1.PodDisruptionBudget {
	db := f.Spec.DisruptionBudget
	if db.Policy == v1alpha1.NoDisruptionBudget {
		return nil
	}
	replicas := replicasOf(f)
	minAvailable := intstr.FromInt32(max(replicas-int32(scaledMaxUnavailable(db.MaxUnavailable, replicas)), 0))
	alwaysAllow := policyv1.AlwaysAllow
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name:            f.Name,
			Namespace:       f.Namespace,
			Labels:          map[string]string{v1alpha1.LabelFlockName: f.Name},
			OwnerReferences: []metav1.OwnerReference{*newControllerRef(f)},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:               &minAvailable,
			Selector:                   &metav1.LabelSelector{MatchLabels: ServiceSelector(f)},
			UnhealthyPodEvictionPolicy: &alwaysAllow,
		},
	}
}

// DisruptionBudgetController keeps every Flock's PodDisruptionBudget.
type DisruptionBudgetController struct {
	kubeClient kubernetes.Interface
	// flockClient makes the live read before a budget is adopted.
	flockClient versioned.Interface
	flockLister flocklisters.FlockLister
	pdbLister   policylisters.PodDisruptionBudgetLister
	// namespaceLister shows the namespaces being deleted, in which no
	// budget is made.
	namespaceLister corelisters.NamespaceLister
	recorder        record.EventRecorder
	queue           *termQueue
	synced          []cache.InformerSynced
	// written holds the budgets written since the cache last showed them.
	written budgetWrites
	now     func() time.Time
}

// budgetWriteTTL bounds how long a write waits for the cache to show it
// before a sync acts on the cache again (a watch gap in which the budget
// changed twice).
const budgetWriteTTL = time.Minute

// budgetWrites remembers, by namespace/name, the cached version of a budget
// (or that there was none) that a write of this controller was based on. While the
// cache still shows that version, a sync would only repeat the write (a
// second create refused AlreadyExists, a delete of a budget already gone, a
// patch already made) and record its event a second time: the sync waits
// for the cache instead, which the write's own watch event brings.
type budgetWrites struct {
	mu sync.Mutex
	m  map[string]budgetWrite
}

type budgetWrite struct {
	base cachedBudget
	at   time.Time
}

// cachedBudget is what the cache showed of a budget: whether it had one,
// and its resourceVersion.
type cachedBudget struct {
	exists  bool
	version string
}

func cachedBudgetOf(pdb *policyv1.PodDisruptionBudget) cachedBudget {
	if pdb == nil {
		return cachedBudget{}
	}
	return cachedBudget{exists: true, version: pdb.ResourceVersion}
}

// wrote notes that key was written from the cached version base.
func (w *budgetWrites) wrote(key string, base cachedBudget, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]budgetWrite{}
	}
	for k, e := range w.m {
		if now.Sub(e.at) > budgetWriteTTL {
			delete(w.m, k)
		}
	}
	w.m[key] = budgetWrite{base: base, at: now}
}

// behind returns how much longer a sync of key should wait for the cache,
// which shows cached: zero once the cache has moved past the last write's
// base or the wait is over, and the entry goes.
func (w *budgetWrites) behind(key string, cached cachedBudget, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[key]
	if !ok {
		return 0
	}
	if left := budgetWriteTTL - now.Sub(e.at); e.base == cached && left > 0 {
		return left
	}
	delete(w.m, key)
	return 0
}

// NewDisruptionBudgetController returns the controller; start the informers
// after it, then call Run. namespaceInformer tells the namespaces being
// deleted: no budget is made in one. flockClient reads a Flock live before
// its orphaned budget is adopted.
func NewDisruptionBudgetController(ctx context.Context, kubeClient kubernetes.Interface, flockClient versioned.Interface,
	flockInformer flockinformers.FlockInformer, pdbInformer policyinformers.PodDisruptionBudgetInformer,
	namespaceInformer coreinformers.NamespaceInformer, recorder record.EventRecorder) (*DisruptionBudgetController, error) {
	logger := klog.FromContext(ctx)
	c := &DisruptionBudgetController{
		kubeClient:      kubeClient,
		flockClient:     flockClient,
		flockLister:     flockInformer.Lister(),
		pdbLister:       pdbInformer.Lister(),
		namespaceLister: namespaceInformer.Lister(),
		recorder:        recorder,
		queue:           newNamedTermQueue("flock-disruption-budget"),
		now:             time.Now,
	}
	enqueueFlock := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.add(key)
		}
	}
	enqueueOwner := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		pdb, ok := obj.(*policyv1.PodDisruptionBudget)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOfNoCopy(pdb); ref != nil && IsFlockRef(ref) {
			c.queue.add(pdb.Namespace + "/" + ref.Name)
		} else if name := pdb.Labels[v1alpha1.LabelFlockName]; name != "" {
			// A budget of a Flock's name that the Flock does not own: its
			// Flock reports the conflict.
			c.queue.add(pdb.Namespace + "/" + name)
		}
	}
	for _, h := range []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{flockInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: enqueueFlock, UpdateFunc: func(_, cur any) { enqueueFlock(cur) }, DeleteFunc: enqueueFlock,
		}},
		{pdbInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: enqueueOwner, UpdateFunc: func(_, cur any) { enqueueOwner(cur) }, DeleteFunc: enqueueOwner,
		}},
	} {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			return nil, err
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	c.synced = append(c.synced, namespaceInformer.Informer().HasSynced)
	logger.V(4).Info("Disruption budget controller set up")
	return c, nil
}

// Run syncs budgets with workers goroutines until ctx ends: one leadership
// term. A later term syncs every Flock's budget again.
func (c *DisruptionBudgetController) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	q := c.queue.newTerm(func(add func(string)) {
		flocks, _ := c.flockLister.List(labels.Everything())
		for _, f := range flocks {
			add(cache.MetaObjectToName(f).String())
		}
	})
	defer q.ShutDown()
	logger := klog.FromContext(ctx)
	if !cache.WaitForNamedCacheSync("flock-disruption-budget", ctx.Done(), c.synced...) {
		return
	}
	logger.Info("Starting the Flock disruption budget controller", "workers", workers)
	work(ctx, q, workers, c.sync, "Syncing the disruption budget of a Flock failed")
}

// sync makes the budget of Flock key what NewPodDisruptionBudget says,
// from the Flock's first member pod on (then kept, at minAvailable 0 when
// scaled to zero). An orphaned budget of that name that was made for a Flock
// of that name (labelled flock.dev/name=<flock>; one a `kubectl delete
// --cascade=orphan` left) is adopted, as the members and the headless
// Service are, after a live read has confirmed the Flock is not being
// deleted. Any other budget of that name the Flock does not control is never
// modified (a Warning event says so); a deleted Flock's budget goes with it
// through the garbage collector.
func (c *DisruptionBudgetController) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	f, err := c.flockLister.Flocks(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	want := NewPodDisruptionBudget(f)
	if f.DeletionTimestamp != nil {
		want = nil
	}
	have, err := c.pdbLister.PodDisruptionBudgets(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		have = nil
	case err != nil:
		return err
	}
	cachedVersion := cachedBudgetOf(have)
	if wait := c.written.behind(key, cachedVersion, c.now()); wait > 0 {
		// The cache has not shown this controller's last write yet: its
		// watch event brings the Flock back (and, should it never come,
		// the wait's end).
		c.queue.addAfter(key, wait)
		return nil
	}
	if have == nil {
		if want == nil {
			return nil
		}
		if namespaceClosing(c.namespaceLister, ns) {
			// The namespace's teardown deleted it; a create would be
			// refused.
			return nil
		}
		if f.Status.Replicas == 0 {
			// No member pod yet, so nothing to protect: the budget is made
			// once the Flock's status counts one (before it can be Ready;
			// and an unhealthy member may be evicted anyway). A budget over
			// no pods would only have kube-controller-manager write its
			// status and tell "NoPods" events.
			return nil
		}
		_, err := c.kubeClient.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsAlreadyExists(err) {
			// Made since the cache was read (by this controller, or left by
			// an orphaning delete): its watch event brings the Flock back.
			c.written.wrote(key, cachedBudget{}, c.now())
			return nil
		}
		if err != nil {
			if failureToTell(ctx, err, f) {
				c.recorder.Eventf(flockRef(f), corev1.EventTypeWarning, "FailedCreate", "create PodDisruptionBudget %s failed: %v", name, err)
			}
			return err
		}
		c.written.wrote(key, cachedBudget{}, c.now())
		logger.V(2).Info("Created PodDisruptionBudget", "flock", klog.KObj(f), "minAvailable", want.Spec.MinAvailable.String())
		c.recorder.Eventf(flockRef(f), corev1.EventTypeNormal, "SuccessfulCreate", "created PodDisruptionBudget %s (minAvailable %s)", name, want.Spec.MinAvailable.String())
		return nil
	}
	ref := metav1.GetControllerOfNoCopy(have)
	if ref == nil && want != nil && have.Labels[v1alpha1.LabelFlockName] == f.Name && have.DeletionTimestamp == nil {
		if err := mayAdopt(ctx, c.flockClient, f); err != nil {
			return fmt.Errorf("cannot adopt PodDisruptionBudget %s/%s: %w", ns, name, err)
		}
		adopted, err := c.kubeClient.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, name, types.StrategicMergePatchType,
			adoptPatch(f, have.UID), metav1.PatchOptions{FieldManager: FieldManager})
		if err != nil {
			return fmt.Errorf("adopt PodDisruptionBudget %s/%s: %w", ns, name, err)
		}
		c.written.wrote(key, cachedVersion, c.now())
		logger.V(2).Info("Adopted orphaned PodDisruptionBudget", "flock", klog.KObj(f))
		c.recorder.Eventf(flockRef(f), corev1.EventTypeNormal, "AdoptedDisruptionBudget", "adopted orphaned PodDisruptionBudget %s", name)
		have, ref = adopted, metav1.GetControllerOfNoCopy(adopted)
	}
	if ref == nil || ref.UID != f.UID {
		if want != nil {
			c.recorder.Eventf(flockRef(f), corev1.EventTypeWarning, "DisruptionBudgetConflict",
				"PodDisruptionBudget %s exists and is not controlled by this Flock; it is left alone", name)
		}
		return nil
	}
	if want == nil {
		if f.DeletionTimestamp != nil {
			return nil // the garbage collector removes it with the Flock
		}
		err := c.kubeClient.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &have.UID}})
		if apierrors.IsNotFound(err) {
			return nil // gone since the cache was read: nothing was deleted here
		}
		if err != nil {
			return err
		}
		c.written.wrote(key, cachedVersion, c.now())
		logger.V(2).Info("Deleted PodDisruptionBudget", "flock", klog.KObj(f))
		c.recorder.Eventf(flockRef(f), corev1.EventTypeNormal, "SuccessfulDelete", "deleted PodDisruptionBudget %s (disruptionBudget policy None)", name)
		return nil
	}
	if equality.Semantic.DeepEqual(have.Spec.MinAvailable, want.Spec.MinAvailable) &&
		equality.Semantic.DeepEqual(have.Spec.Selector, want.Spec.Selector) &&
		equality.Semantic.DeepEqual(have.Spec.UnhealthyPodEvictionPolicy, want.Spec.UnhealthyPodEvictionPolicy) && have.Spec.MaxUnavailable == nil {
		return nil
	}
	patch, err := budgetSpecPatch(have, want)
	if err != nil {
		return err
	}
	if _, err := c.kubeClient.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("patch PodDisruptionBudget %s/%s: %w", ns, name, err)
	}
	c.written.wrote(key, cachedVersion, c.now())
	logger.V(2).Info("Updated PodDisruptionBudget", "flock", klog.KObj(f), "minAvailable", want.Spec.MinAvailable.String())
	c.recorder.Eventf(flockRef(f), corev1.EventTypeNormal, "SuccessfulUpdate", "updated PodDisruptionBudget %s (minAvailable %s)", name, want.Spec.MinAvailable.String())
	return nil
}

// budgetSpecPatch returns the JSON patch that makes budget have's spec
// want's. A patch, not an update from the cache: kube-controller-manager's
// disruption controller writes the budget's status after each change of its
// pods, so an update carrying the cached resourceVersion would meet a
// conflict about once per scaled Flock. The patch tests have's UID, so it
// never changes a budget of the same name made since the cache was read.
func budgetSpecPatch(have, want *policyv1.PodDisruptionBudget) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value,omitempty"`
	}
	ops := []op{
		{Op: "test", Path: "/metadata/uid", Value: have.UID},
		{Op: "add", Path: "/spec/minAvailable", Value: want.Spec.MinAvailable},
		{Op: "add", Path: "/spec/selector", Value: want.Spec.Selector},
		{Op: "add", Path: "/spec/unhealthyPodEvictionPolicy", Value: want.Spec.UnhealthyPodEvictionPolicy},
	}
	if have.Spec.MaxUnavailable != nil {
		ops = append(ops, op{Op: "remove", Path: "/spec/maxUnavailable"})
	}
	return json.Marshal(ops)
}

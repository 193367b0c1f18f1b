// File namespace_gone.go: Flocks left behind by a namespace that is gone.
//
// Flocks live in flock-apiserver's own etcd, so a namespace's Flocks go
// when kube-controller-manager's namespace controller deletes them through
// this server while it deletes the namespace; it does not finalize the
// namespace while this API cannot be discovered. A namespace can still go
// without that: an administrator removes the finalizer of a namespace stuck
// Terminating while flock-apiserver was down, the APIService pointed at
// another server meanwhile, or this server's etcd was restored from a
// backup taken before the namespace was deleted. Such a Flock belongs to
// nothing: its member pods, claims, Service and budget went with the
// namespace, every write of the controller for it is refused ("namespaces
// ... not found"; retried with backoff, without an error log or a
// FailedCreate event), and a namespace of the same name made later would
// bring it back. This controller deletes it, as the namespace
// controller would have; the Flock's finalizer then treats its volumes and
// data directories (cluster-scoped) as spec.storage.retention.whenDeleted
// says.

package flock

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/generated/clientset/versioned"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions/flock/v1alpha1"
	flocklisters "flock.dev/flock/pkg/generated/listers/flock/v1alpha1"
)

// NamespaceGoneController deletes Flocks whose namespace no longer exists.
type NamespaceGoneController struct {
	kubeClient  kubernetes.Interface
	flockClient versioned.Interface
	flockLister flocklisters.FlockLister
	nsLister    corelisters.NamespaceLister
	queue       *termQueue
	synced      []cache.InformerSynced
}

// NewNamespaceGoneController returns the controller; start the informers
// after it, then call Run. kubeClient reads a namespace the cache does not
// hold (the cache may not have seen a namespace just made), flockClient
// deletes the Flocks.
func NewNamespaceGoneController(ctx context.Context, kubeClient kubernetes.Interface, flockClient versioned.Interface,
	flockInformer flockinformers.FlockInformer, nsInformer coreinformers.NamespaceInformer) (*NamespaceGoneController, error) {
	c := &NamespaceGoneController{
		kubeClient:  kubeClient,
		flockClient: flockClient,
		flockLister: flockInformer.Lister(),
		nsLister:    nsInformer.Lister(),
		queue:       newNamedTermQueue("flock-namespace-gone"),
	}
	// A Flock is looked at when it appears (this server started, or its
	// etcd was restored) and when its namespace goes; a namespace deleted
	// as usual has no Flocks left by then.
	onFlock := func(obj any) {
		if f, ok := obj.(*v1alpha1.Flock); ok && !c.namespaceCached(f.Namespace) {
			c.queue.add(cache.MetaObjectToName(f).String())
		}
	}
	onNamespaceDeleted := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if m, err := meta.Accessor(obj); err == nil {
			c.enqueueNamespace(m.GetName())
		}
	}
	for _, h := range []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{flockInformer.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: onFlock}},
		{nsInformer.Informer(), cache.ResourceEventHandlerFuncs{DeleteFunc: onNamespaceDeleted}},
	} {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			return nil, err
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	klog.FromContext(ctx).V(4).Info("Namespace-gone controller set up")
	return c, nil
}

// namespaceCached reports whether the namespace cache holds ns.
func (c *NamespaceGoneController) namespaceCached(ns string) bool {
	_, err := c.nsLister.Get(ns)
	return err == nil
}

func (c *NamespaceGoneController) enqueueNamespace(ns string) {
	flocks, err := c.flockLister.Flocks(ns).List(labels.Everything())
	if err != nil {
		return
	}
	for _, f := range flocks {
		c.queue.add(cache.MetaObjectToName(f).String())
	}
}

// Run deletes such Flocks until ctx ends: one leadership term. A term
// starts by looking at every Flock whose namespace the cache does not hold.
func (c *NamespaceGoneController) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	q := c.queue.newTerm(func(add func(string)) {
		flocks, _ := c.flockLister.List(labels.Everything())
		for _, f := range flocks {
			if !c.namespaceCached(f.Namespace) {
				add(cache.MetaObjectToName(f).String())
			}
		}
	})
	defer q.ShutDown()
	if !cache.WaitForNamedCacheSync("flock-namespace-gone", ctx.Done(), c.synced...) {
		return
	}
	klog.FromContext(ctx).Info("Starting the controller of Flocks whose namespace is gone")
	work(ctx, q, 1, c.sync, "Deleting a Flock whose namespace is gone failed")
}

// sync deletes Flock key when kube-apiserver says its namespace does not
// exist: the cache's word alone is not enough, as it may lag behind a
// namespace just made. The delete names the Flock's UID, so a Flock made
// again under that name in a namespace made again is never deleted for
// the old one.
func (c *NamespaceGoneController) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	f, err := c.flockLister.Flocks(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if f.DeletionTimestamp != nil {
		return nil
	}
	if c.namespaceCached(ns) {
		return nil
	}
	if _, err := c.kubeClient.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return err // there (nil), or not known yet: retried
	}
	uid := f.UID
	err = c.flockClient.FlockV1alpha1().Flocks(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil // gone already, or another Flock of that name now
	case err != nil:
		return err
	}
	namespaceGoneDeletes.Inc()
	klog.FromContext(ctx).Info("Deleted a Flock whose namespace no longer exists; its data follows spec.storage.retention.whenDeleted",
		"flock", klog.KObj(f), "uid", f.UID, "whenDeleted", f.Spec.Storage.Retention.WhenDeleted)
	return nil
}

// namespaceClosing reports whether lister (nil: none) shows namespace ns
// being deleted: nothing is created in it then, as kube-apiserver would
// refuse every create. A namespace the cache does not show is not: its
// creates are tried, and their refusal tells (NamespaceGoneController).
func namespaceClosing(lister corelisters.NamespaceLister, ns string) bool {
	if lister == nil {
		return false
	}
	n, err := lister.Get(ns)
	return err == nil && (n.DeletionTimestamp != nil || n.Status.Phase == corev1.NamespaceTerminating)
}

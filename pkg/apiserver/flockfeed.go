// File flockfeed.go: the server's own Flock informer (admission's capacity
// check and the embedded controller) fed from the server's storage in
// process, not through its HTTP API.

package apiserver

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/tools/cache"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	versioned "flock.dev/flock/pkg/generated/clientset/versioned"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
)

// FlockStorage is what the feed reads: the flocks resource's storage (its
// watch cache in front of etcd).
type FlockStorage interface {
	rest.Lister
	rest.Watcher
}

// FlockFeed lists and watches Flocks straight from the server's storage,
// as v1alpha1 objects. Through the loopback client every Flock event was
// encoded to JSON by the server, sent over a TLS connection to itself and
// decoded again by the informer (issue 17: 7 % of the server's CPU during
// a create burst went to that decode alone); here an event costs a deep
// copy and a conversion. Reads skip authentication and authorization, as
// the loopback identity (system:masters) passed them anyway; the
// controller's writes still go through the API.
//
// Every object it returns is the caller's own (a deep copy of what the
// storage holds): the watch cache serves the same objects to every
// client, so an informer must never share memory with it.
//
// The storage is set once the server has built it (SetStorage); the
// informers start after that, in post-start hooks. Until then a List or
// Watch fails, and the informer's reflector tries again.
type FlockFeed struct {
	storage atomic.Pointer[FlockStorage]
	scheme  *runtime.Scheme
}

// NewFlockFeed returns a feed without storage.
func NewFlockFeed() *FlockFeed {
	return &FlockFeed{scheme: Scheme}
}

// SetStorage gives the feed the storage of flocks.
func (f *FlockFeed) SetStorage(s FlockStorage) {
	f.storage.Store(&s)
}

var (
	_ cache.ListerWatcher            = &FlockFeed{}
	_ cache.ListerWatcherWithContext = &FlockFeed{}
)

var errNoStorage = errors.New("the Flock storage is not built yet")

// request returns the storage and the informer's list options converted
// for it, in a context that reads every namespace.
func (f *FlockFeed) request(ctx context.Context, opts metav1.ListOptions) (FlockStorage, context.Context, *metainternalversion.ListOptions, error) {
	s := f.storage.Load()
	if s == nil {
		return nil, nil, nil, errNoStorage
	}
	var in metainternalversion.ListOptions
	if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(&opts, &in, nil); err != nil {
		return nil, nil, nil, apierrors.NewBadRequest(err.Error())
	}
	return *s, genericapirequest.WithNamespace(ctx, metav1.NamespaceAll), &in, nil
}

// ListWithContext lists the Flocks of every namespace.
func (f *FlockFeed) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	s, ctx, in, err := f.request(ctx, opts)
	if err != nil {
		return nil, err
	}
	obj, err := s.List(ctx, in)
	if err != nil {
		return nil, err
	}
	out := &v1alpha1.FlockList{}
	// The list's items are copies of the cached objects' top level only.
	if err := f.scheme.Convert(obj.DeepCopyObject(), out, nil); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("converting the Flock list: %w", err))
	}
	return out, nil
}

// WatchWithContext watches the Flocks of every namespace.
func (f *FlockFeed) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	s, ctx, in, err := f.request(ctx, opts)
	if err != nil {
		return nil, err
	}
	w, err := s.Watch(ctx, in)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, f.convertEvent), nil
}

// convertEvent gives an event of the storage's watch a v1alpha1 object of
// its own. Error events (a *metav1.Status) pass as they are.
func (f *FlockFeed) convertEvent(e watch.Event) (watch.Event, bool) {
	if e.Type == watch.Error || e.Object == nil {
		return e, true
	}
	var obj runtime.Object
	if c, ok := e.Object.(runtime.CacheableObject); ok {
		obj = c.GetObject() // a deep copy
	} else {
		obj = e.Object.DeepCopyObject()
	}
	out := &v1alpha1.Flock{}
	if err := f.scheme.Convert(obj, out, nil); err != nil {
		status := apierrors.NewInternalError(fmt.Errorf("converting a Flock of a watch event: %w", err)).Status()
		return watch.Event{Type: watch.Error, Object: &status}, true
	}
	e.Object = out
	return e, true
}

// List lists without a context (cache.ListerWatcher).
func (f *FlockFeed) List(opts metav1.ListOptions) (runtime.Object, error) {
	return f.ListWithContext(context.Background(), opts)
}

// Watch watches without a context (cache.ListerWatcher).
func (f *FlockFeed) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return f.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported makes the reflector list, then watch,
// rather than ask for a watch that streams the initial list: the list is
// served from the watch cache all the same.
func (f *FlockFeed) IsWatchListSemanticsUnSupported() bool { return true }

// NewFlockInformers returns the informer factory of the server's own Flock
// cache (shared by admission and the controller), with its Flock informer
// fed by feed. Its caches hold no managedFields (transform). client is
// the factory's client for any other kind (there is none today).
func NewFlockInformers(client versioned.Interface, feed *FlockFeed, transform cache.TransformFunc) flockinformers.SharedInformerFactory {
	factory := flockinformers.NewSharedInformerFactoryWithOptions(client, 0, flockinformers.WithTransform(transform))
	factory.InformerFor(&v1alpha1.Flock{}, func(_ versioned.Interface, resync time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformerWithOptions(feed, &v1alpha1.Flock{}, cache.SharedIndexInformerOptions{
			ResyncPeriod: resync,
			Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		})
	})
	return factory
}

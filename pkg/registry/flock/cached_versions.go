package flock

import (
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// flock-apiserver holds every Flock twice over when nothing is shared: once
// in the watch cache in front of its etcd, and once in its own Flock informer
// (admission's capacity check and the embedded controller), which watches the
// server through the loopback client and decodes each Flock again from JSON.
// In issue 17's memory case that second copy was about a tenth of the live
// heap.
//
// CachedVersions is how the informer holds the watch cache's objects
// instead: the watch that feeds the cache (versionSharingStorage) records
// here, for each Flock, the object the cache holds for it now, and the
// informer's transform (Transform) replaces a Flock it decoded by a view of
// that object when the two are the same version (same UID and
// resourceVersion: one version of an object has one content). The view is a
// v1alpha1.Flock whose top-level struct is its own (without managed fields,
// as the informer cached before) and whose metadata maps, spec and status
// are the cached object's, shared, not copied: the internal and v1alpha1
// types hold the same fields (the internal spec by pointer), so the
// conversion copies the structs and none of what they point to.
//
// Sharing makes a reader of the informer that changes an object change what
// the API serves. Nothing of Flock changes an informer's object (the
// client-go rule: copy, then change; the e2e suite runs flock-apiserver with
// client-go's cache mutation detector to hold it to that).
//
// The informer's events, their order and versions still come from its watch
// through the loopback client: only the memory behind an object is shared.
// A version the informer gets after the cache moved past it (a burst of
// writes to one Flock) is kept as decoded, until the Flock's next event.
type CachedVersions struct {
	mu    sync.RWMutex
	byKey map[string]*flock.Flock
}

// NewCachedVersions returns an empty record.
func NewCachedVersions() *CachedVersions {
	return &CachedVersions{byKey: map[string]*flock.Flock{}}
}

func cachedKey(namespace, name string) string { return namespace + "/" + name }

// set records f as the object the watch cache holds for its Flock.
func (c *CachedVersions) set(f *flock.Flock) {
	c.mu.Lock()
	c.byKey[cachedKey(f.Namespace, f.Name)] = f
	c.mu.Unlock()
}

// forget drops the Flock namespace/name (deleted).
func (c *CachedVersions) forget(namespace, name string) {
	c.mu.Lock()
	delete(c.byKey, cachedKey(namespace, name))
	c.mu.Unlock()
}

// replace records exactly the Flocks of a list the watch cache was filled
// from (at its start, or when it lists etcd again), forgetting the rest.
func (c *CachedVersions) replace(items []flock.Flock) {
	byKey := make(map[string]*flock.Flock, len(items))
	for i := range items {
		byKey[cachedKey(items[i].Namespace, items[i].Name)] = &items[i]
	}
	c.mu.Lock()
	c.byKey = byKey
	c.mu.Unlock()
}

// add records the Flocks of a later page of such a list.
func (c *CachedVersions) add(items []flock.Flock) {
	c.mu.Lock()
	for i := range items {
		c.byKey[cachedKey(items[i].Namespace, items[i].Name)] = &items[i]
	}
	c.mu.Unlock()
}

// retain forgets every Flock whose key is not in keep: at the end of the
// initial Flocks a watch streamed when the cache started again, those are
// Flocks deleted in between.
func (c *CachedVersions) retain(keep map[string]bool) {
	c.mu.Lock()
	maps.DeleteFunc(c.byKey, func(key string, _ *flock.Flock) bool { return !keep[key] })
	c.mu.Unlock()
}

// get returns the object recorded for Flock namespace/name, or nil.
func (c *CachedVersions) get(namespace, name string) *flock.Flock {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byKey[cachedKey(namespace, name)]
}

// lookup returns the cached object of Flock namespace/name when it is
// exactly version rv of the Flock with uid, and nil otherwise.
func (c *CachedVersions) lookup(namespace, name string, uid types.UID, rv string) *flock.Flock {
	f := c.get(namespace, name)
	if f == nil || f.UID != uid || f.ResourceVersion != rv || rv == "" {
		return nil
	}
	return f
}

// Transform is the transform of the server's own Flock informer: a Flock
// of the version the watch cache holds becomes a view of the cached object
// (see CachedVersions); any other keeps the object decoded, without its
// managed fields. Other objects pass as they are.
func (c *CachedVersions) Transform(obj any) (any, error) {
	f, ok := obj.(*v1alpha1.Flock)
	if !ok {
		return obj, nil
	}
	if cached := c.lookup(f.Namespace, f.Name, f.UID, f.ResourceVersion); cached != nil {
		view := &v1alpha1.Flock{TypeMeta: f.TypeMeta}
		if err := v1alpha1.Convert_flock_Flock_To_v1alpha1_Flock(cached, view, nil); err == nil {
			view.ManagedFields = nil // the view's own field: the cached object keeps them
			informerFlocks.WithLabelValues("watch_cache").Inc()
			return view, nil
		}
	}
	f.ManagedFields = nil
	informerFlocks.WithLabelValues("decoded").Inc()
	return f, nil
}

var _ cache.TransformFunc = (&CachedVersions{}).Transform

var informerFlocks = metrics.NewCounterVec(&metrics.CounterOpts{
	Name: "flock_apiserver_informer_flocks_total",
	Help: "Flocks that flock-apiserver's own Flock informer (admission and the embedded controller) took in, " +
		"by source: watch_cache, held as a view of the watch cache's object of the same version; decoded, a copy of its own.",
	StabilityLevel: metrics.ALPHA,
}, []string{"source"})

var registerInformerMetrics sync.Once

// RegisterMetrics registers the metrics of this package with the legacy
// registry, once per process.
func RegisterMetrics() {
	registerInformerMetrics.Do(func() { legacyregistry.MustRegister(informerFlocks) })
}

package flock

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"

	"flock.dev/flock/pkg/apis/flock"
)

// The watch cache in front of etcd (k8s.io/apiserver's cacher) keeps every
// Flock and, for at least 75 s after a burst of writes and until later writes
// push them out, each version those writes made: a watch may start at any of
// them. Each version is decoded from etcd on its own, so a Flock whose status
// was written five times is held six times over, spec, pod template,
// annotations and managed fields included, although only its status changed.
// In issue 17's memory case (1,000 Flocks x 3) those versions were a third of
// flock-apiserver's live heap.
//
// sharedVersionsDecorator is the watch cache of k8s.io/apiserver with one
// change: the watch from etcd that feeds the cache gives each new version of a
// Flock the values of the version before it for every part the two hold
// equal (see shareUnchanged). The cache treats the objects it holds as
// read-only (a reader that changes one copies it first), so a part two
// versions share is as safe as the object itself.

// withSharedVersions returns getter with the watch-cache decorator replaced
// by sharedVersionsDecorator; a getter without a watch cache
// (--watch-cache=false) is left as it is.
// The cache's current object of each Flock is recorded in cached (nil:
// not recorded).
func withSharedVersions(getter generic.RESTOptionsGetter, cached *CachedVersions) generic.RESTOptionsGetter {
	return sharedVersionsGetter{getter, cached}
}

type sharedVersionsGetter struct {
	generic.RESTOptionsGetter
	cached *CachedVersions
}

func (g sharedVersionsGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil || opts.Decorator == nil || isUndecorated(opts.Decorator) {
		return opts, err
	}
	opts.Decorator = sharedVersionsDecorator(g.cached)
	return opts, nil
}

// isUndecorated reports whether d is generic.UndecoratedStorage, what the
// server's etcd options give when the watch cache is off.
func isUndecorated(d generic.StorageDecorator) bool {
	return reflect.ValueOf(d).Pointer() == reflect.ValueOf(generic.UndecoratedStorage).Pointer()
}

// sharedVersionsDecorator returns the decorator that builds the Flock
// storage: etcd, and in front of it the watch cache, which lists and
// watches etcd through versionSharingStorage (recording its objects in
// cached). Reads that bypass the cache (and every write) go to etcd as they
// are.
func sharedVersionsDecorator(cached *CachedVersions) generic.StorageDecorator {
	return func(config *storagebackend.ConfigForResource, resourcePrefix string, keyFunc func(obj runtime.Object) (string, error),
		newFunc func() runtime.Object, newListFunc func() runtime.Object, getAttrsFunc storage.AttrFunc,
		triggerFuncs storage.IndexerFuncs, indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		return newSharedVersionsStorage(cached, config, resourcePrefix, keyFunc, newFunc, newListFunc, getAttrsFunc, triggerFuncs, indexers)
	}
}

func newSharedVersionsStorage(
	cached *CachedVersions,
	config *storagebackend.ConfigForResource,
	resourcePrefix string,
	keyFunc func(obj runtime.Object) (string, error),
	newFunc func() runtime.Object,
	newListFunc func() runtime.Object,
	getAttrsFunc storage.AttrFunc,
	triggerFuncs storage.IndexerFuncs,
	indexers *cache.Indexers,
) (storage.Interface, factory.DestroyFunc, error) {
	etcd, destroyEtcd, err := generic.NewRawStorage(config, newFunc, newListFunc, resourcePrefix)
	if err != nil {
		return nil, nil, err
	}
	if cached == nil {
		cached = NewCachedVersions() // the sharing's own record, read by nothing else
	}
	cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
		Storage:             versionSharingStorage{Interface: etcd, cached: cached},
		Versioner:           storage.APIObjectVersioner{},
		GroupResource:       config.GroupResource,
		EventsHistoryWindow: config.EventsHistoryWindow,
		ResourcePrefix:      resourcePrefix,
		KeyFunc:             keyFunc,
		NewFunc:             newFunc,
		NewListFunc:         newListFunc,
		GetAttrsFunc:        getAttrsFunc,
		IndexerFuncs:        triggerFuncs,
		Indexers:            indexers,
		Codec:               config.Codec,
	})
	if err != nil {
		destroyEtcd()
		return nil, nil, err
	}
	front := cacherstorage.NewCacheDelegator(cacher, etcd)
	var stop sync.Once
	return front, func() {
		stop.Do(func() {
			front.Stop()
			cacher.Stop()
			destroyEtcd()
		})
	}, nil
}

// versionSharingStorage is etcd's storage as the watch cache sees it: its
// watches pass each Flock through shareUnchanged with the version of the same
// Flock that the watch delivered before, and record it in cached; its lists
// (the cache's reflector lists etcd when it does not stream the initial
// Flocks in its watch) record their Flocks there.
type versionSharingStorage struct {
	storage.Interface
	cached *CachedVersions
}

func (s versionSharingStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	in, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	w := &sharingWatch{in: in, out: make(chan watch.Event), done: make(chan struct{})}
	v := newVersionSharer(s.cached)
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		v.initial = map[string]bool{}
	}
	go w.loop(v)
	return w, nil
}

func (s versionSharingStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := s.Interface.GetList(ctx, key, opts, listObj); err != nil {
		return err
	}
	if list, ok := listObj.(*flock.FlockList); ok {
		if opts.Predicate.Continue == "" {
			s.cached.replace(list.Items) // the first page (or the whole list)
		} else {
			s.cached.add(list.Items)
		}
	}
	return nil
}

// sharingWatch passes the events of in through a versionSharer. Unlike
// watch.Filter it does not block for ever on an event nobody reads once the
// watch is stopped.
type sharingWatch struct {
	in   watch.Interface
	out  chan watch.Event
	done chan struct{}
	stop sync.Once
}

func (w *sharingWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *sharingWatch) Stop() {
	w.stop.Do(func() {
		close(w.done)
		w.in.Stop()
	})
}

func (w *sharingWatch) loop(s *versionSharer) {
	defer close(w.out)
	for e := range w.in.ResultChan() {
		select {
		case w.out <- s.event(e):
		case <-w.done:
			return
		}
	}
}

// versionSharer records in cached the last version of each Flock one watch
// delivered (the version the next one shares with), and remembers the
// managed field sets (a manager's list of the fields it set, about a
// kilobyte each) it saw last: Flocks made by the same tool, or at the same
// step of the controller's work, have equal field sets, so one copy serves
// them all. It is used by that watch's one goroutine only.
type versionSharer struct {
	fieldSets map[string]*metav1.FieldsV1
	// cached records each Flock's last version.
	cached *CachedVersions
	// initial, while a watch that streams the initial Flocks has not
	// ended that stream, holds the keys it sent; at its end the Flocks not
	// among them are forgotten.
	initial map[string]bool
}

// maxFieldSets bounds versionSharer.fieldSets; when it is full it starts
// again empty (the objects keep the copies they share).
const maxFieldSets = 1024

func newVersionSharer(cached *CachedVersions) *versionSharer {
	return &versionSharer{cached: cached, fieldSets: map[string]*metav1.FieldsV1{}}
}

// shareFieldSets gives each managed-fields entry of f the one copy of its
// field set this watch keeps.
func (v *versionSharer) shareFieldSets(f *flock.Flock) {
	for i := range f.ManagedFields {
		fs := f.ManagedFields[i].FieldsV1
		if fs == nil {
			continue
		}
		if kept, ok := v.fieldSets[string(fs.Raw)]; ok {
			f.ManagedFields[i].FieldsV1 = kept
			continue
		}
		if len(v.fieldSets) >= maxFieldSets {
			clear(v.fieldSets)
		}
		v.fieldSets[string(fs.Raw)] = fs
	}
}

func (v *versionSharer) event(e watch.Event) watch.Event {
	obj := e.Object
	if w, ok := obj.(interface{ Unwrap() runtime.Object }); ok {
		obj = w.Unwrap() // etcd's watch wraps each object with the time it was read
	}
	cur, ok := obj.(*flock.Flock)
	if !ok {
		return e // errors
	}
	if e.Type == watch.Bookmark {
		if v.initial != nil && cur.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
			v.cached.retain(v.initial)
			v.initial = nil
		}
		return e
	}
	switch e.Type {
	case watch.Added, watch.Modified:
		if prev := v.cached.get(cur.Namespace, cur.Name); prev != nil && prev.UID == cur.UID {
			shareUnchanged(prev, cur)
		}
		v.shareFieldSets(cur)
		v.cached.set(cur)
		if v.initial != nil {
			v.initial[cachedKey(cur.Namespace, cur.Name)] = true
		}
	case watch.Deleted:
		v.cached.forget(cur.Namespace, cur.Name)
	}
	return e
}

// shareUnchanged gives cur, a newer version of the Flock prev, prev's value
// of each part the two hold equal: the name and namespace, labels,
// annotations, finalizers, owner references, each managed-fields entry's
// time, the spec (held by pointer in the internal type, so versions with
// one spec hold one struct), and the status's revisions, members and conditions
// (each member and condition, or its names and messages, where not all are
// equal). Equal means equal as encoded: nil and empty stay apart.
func shareUnchanged(prev, cur *flock.Flock) {
	shareString(&cur.Name, prev.Name)
	shareString(&cur.Namespace, prev.Namespace)
	cur.UID = prev.UID // one Flock: the same UID
	if sameMap(prev.Labels, cur.Labels) {
		cur.Labels = prev.Labels
	}
	if sameMap(prev.Annotations, cur.Annotations) {
		cur.Annotations = prev.Annotations
	}
	if (prev.Finalizers == nil) == (cur.Finalizers == nil) && slices.Equal(prev.Finalizers, cur.Finalizers) {
		cur.Finalizers = prev.Finalizers
	}
	if reflect.DeepEqual(prev.OwnerReferences, cur.OwnerReferences) {
		cur.OwnerReferences = prev.OwnerReferences
	}
	shareEntryTimes(prev.ManagedFields, cur.ManagedFields)
	if reflect.DeepEqual(prev.Spec, cur.Spec) {
		cur.Spec = prev.Spec
	}
	st, pst := &cur.Status, &prev.Status
	shareString(&st.CurrentRevision, pst.CurrentRevision)
	shareString(&st.UpdateRevision, pst.UpdateRevision)
	shareString(&st.Selector, pst.Selector)
	if shareMembers(pst.Members, st.Members) {
		st.Members = pst.Members
	}
	if shareConditions(pst.Conditions, st.Conditions) {
		st.Conditions = pst.Conditions
	}
}

// sameShape reports whether two lists have the same length and both or
// neither are nil (nil and empty encode differently).
func sameShape[T any](a, b []T) bool {
	return len(a) == len(b) && (a == nil) == (b == nil)
}

// shareMembers gives each member of cur prev's entry of the same ordinal
// when the two are equal, and otherwise that entry's names (node, pod,
// claim, volume...) where they are equal. It reports whether the two lists
// are equal, so that cur may take prev's list whole.
func shareMembers(prev, cur []flock.FlockMember) bool {
	equal := sameShape(prev, cur)
	for i := range cur {
		if i >= len(prev) || prev[i].Ordinal != cur[i].Ordinal {
			equal = false
			continue
		}
		p, c := &prev[i], &cur[i]
		if reflect.DeepEqual(*p, *c) {
			*c = *p
			continue
		}
		equal = false
		shareString(&c.Node, p.Node)
		shareString(&c.Pod, p.Pod)
		shareString(&c.Hostname, p.Hostname)
		shareString(&c.Revision, p.Revision)
		shareString(&c.PersistentVolume, p.PersistentVolume)
		shareString(&c.Claim, p.Claim)
		shareString(&c.Message, p.Message)
	}
	return equal
}

// shareConditions does for conditions what shareMembers does for members,
// matching them by type; the lists are equal when each condition is equal
// to the one at its place in prev.
func shareConditions(prev, cur []metav1.Condition) bool {
	equal := sameShape(prev, cur)
	for i := range cur {
		c := &cur[i]
		j := slices.IndexFunc(prev, func(p metav1.Condition) bool { return p.Type == c.Type })
		if j < 0 {
			equal = false
			continue
		}
		p := &prev[j]
		if *p == *c {
			*c = *p
			equal = equal && j == i
			continue
		}
		equal = false
		shareString(&c.Type, p.Type)
		shareString(&c.Reason, p.Reason)
		shareString(&c.Message, p.Message)
	}
	return equal
}

// shareString points *dst at src's bytes when the two are equal.
func shareString(dst *string, src string) {
	if *dst == src {
		*dst = src
	}
}

// shareEntryTimes gives each managed-fields entry of cur the time and API
// version of prev's entry of the same manager, operation and subresource
// when they are equal (versionSharer.shareFieldSets shares the field sets).
func shareEntryTimes(prev, cur []metav1.ManagedFieldsEntry) {
	for i := range cur {
		c := &cur[i]
		for j := range prev {
			p := &prev[j]
			if p.Manager != c.Manager || p.Operation != c.Operation || p.Subresource != c.Subresource {
				continue
			}
			if p.Time != nil && c.Time != nil && p.Time.Equal(c.Time) {
				c.Time = p.Time
			}
			shareString(&c.APIVersion, p.APIVersion)
			shareString(&c.Manager, p.Manager)
			break
		}
	}
}

func sameMap(a, b map[string]string) bool {
	return (a == nil) == (b == nil) && maps.Equal(a, b)
}

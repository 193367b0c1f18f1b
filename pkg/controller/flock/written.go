// File written.go: the Flocks and claims this controller wrote last, until
// its cache shows them, so that a sync right after a write starts from what
// was written instead of failing its next write on a conflict (issue 17).

package flock

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// writtenTTL bounds how long a written object is kept when no sync comes
// to drop it (the object was deleted, or its cache moved on).
const writtenTTL = 2 * time.Minute

// maxReplacedVersions bounds the resourceVersions remembered as older than
// a written object.
const maxReplacedVersions = 8

// writtenObjects remembers, by UID, objects as this controller last wrote
// them and the resourceVersions those writes made old: the version each
// write was based on, and each earlier write of this controller. A cached
// object at one of those versions is behind the controller's own write,
// and the write is the fresher copy. A cached object at any other version
// (the write itself, or someone else's later one) is the cache's to trust,
// and the entry goes.
//
// Flocks (writtenFlocks): with it, the next sync sees the members it just
// placed and its status write is based on the version the server has, not
// a stale one that fails with a conflict (a conflict costs a read, a
// backoff and a second write). Claims (writtenClaims): the next sync does
// not complete a claim's binding again from the version before it.
type writtenObjects[T metav1.Object] struct {
	mu sync.Mutex
	m  map[types.UID]*writtenObject[T]
}

type writtenObject[T metav1.Object] struct {
	obj      T
	replaced []string
	at       time.Time
}

// record notes that base, an object this controller read, was written as
// written; kept makes the copy to remember (as the informer caches it).
// Nothing is noted when the write changed nothing.
func (w *writtenObjects[T]) record(base, written T, kept func() T, now time.Time) {
	if written.GetUID() != base.GetUID() || written.GetResourceVersion() == base.GetResourceVersion() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.UID]*writtenObject[T]{}
	}
	for uid, e := range w.m {
		if now.Sub(e.at) > writtenTTL {
			delete(w.m, uid)
		}
	}
	// Newest first; the oldest go beyond maxReplacedVersions.
	replaced := []string{base.GetResourceVersion()}
	if e := w.m[written.GetUID()]; e != nil {
		for _, rv := range append([]string{e.obj.GetResourceVersion()}, e.replaced...) {
			if !slices.Contains(replaced, rv) && len(replaced) < maxReplacedVersions {
				replaced = append(replaced, rv)
			}
		}
	}
	w.m[written.GetUID()] = &writtenObject[T]{obj: kept(), replaced: replaced, at: now}
}

// latest returns the fresher of cached and this controller's last write
// of it (read-only, as cached objects are).
func (w *writtenObjects[T]) latest(cached T) T {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.m[cached.GetUID()]
	if e == nil {
		return cached
	}
	if slices.Contains(e.replaced, cached.GetResourceVersion()) {
		return e.obj
	}
	delete(w.m, cached.GetUID())
	return cached
}

// observed forgets the write of obj, an object its informer delivered,
// once the cache shows that write or a later version.
func (w *writtenObjects[T]) observed(obj T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.m[obj.GetUID()]; e != nil && !slices.Contains(e.replaced, obj.GetResourceVersion()) {
		delete(w.m, obj.GetUID())
	}
}

// forget forgets the write of a deleted object.
func (w *writtenObjects[T]) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, uid)
}

// len returns how many written objects are remembered.
func (w *writtenObjects[T]) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}

// writtenFlocks are the Flocks this controller wrote last.
type writtenFlocks struct {
	writtenObjects[*v1alpha1.Flock]
}

// record notes that base, a Flock this controller read, was written as
// written.
func (w *writtenFlocks) record(base, written *v1alpha1.Flock, now time.Time) {
	if base == nil || written == nil {
		return
	}
	w.writtenObjects.record(base, written, func() *v1alpha1.Flock {
		kept := written.DeepCopy()
		kept.ManagedFields = nil // as the informer caches it
		return kept
	}, now)
}

// flockObserver is a FlockControl that hears the Flocks its informer
// delivers, updated or deleted.
type flockObserver interface {
	flockUpdated(cur any)
	flockDeleted(obj any)
}

var _ flockObserver = &defaultFlockControl{}

func (fc *defaultFlockControl) flockUpdated(cur any) {
	if f, ok := cur.(*v1alpha1.Flock); ok {
		fc.written.observed(f)
	}
}

func (fc *defaultFlockControl) flockDeleted(obj any) {
	if f, ok := unwrapDeleted[*v1alpha1.Flock](obj); ok {
		fc.written.forget(f.UID)
	}
}

// recordingStatusUpdater is a StatusUpdater that notes each status it
// writes in written, and when it wrote it in paced. It runs mutate once per
// attempt, as the updater it wraps asks, and compares the status before and
// after to know whether the attempt wrote.
type recordingStatusUpdater struct {
	StatusUpdater
	written *writtenFlocks
	paced   *statusPacer
}

func (u recordingStatusUpdater) UpdateStatus(ctx context.Context, f *v1alpha1.Flock, mutate func(*v1alpha1.FlockStatus)) (*v1alpha1.Flock, error) {
	changed := false
	updated, err := u.StatusUpdater.UpdateStatus(ctx, f, func(st *v1alpha1.FlockStatus) {
		before := st.DeepCopy()
		mutate(st)
		changed = !equality.Semantic.DeepEqual(before, st)
	})
	if err == nil {
		u.written.record(f, updated, time.Now())
		if changed {
			u.paced.wrote(f.UID)
		}
	}
	return updated, err
}

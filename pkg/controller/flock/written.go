// File written.go: the Flocks this controller wrote last, until its cache
// shows them, so that a sync right after a write starts from what was
// written instead of failing its status write on a conflict (issue 17).

package flock

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// writtenFlockTTL bounds how long a written Flock is kept when no sync
// comes to drop it (the Flock was deleted, or its cache moved on).
const writtenFlockTTL = 2 * time.Minute

// maxReplacedVersions bounds the resourceVersions remembered as older than
// a written Flock.
const maxReplacedVersions = 8

// writtenFlocks remembers, by UID, the Flock as this controller last wrote
// it and the resourceVersions that write made old: the version each write
// was based on, and each earlier write of this controller. A cached Flock
// at one of those versions is behind the controller's own write, and the
// write is the fresher copy: with it, the next sync sees the members it
// just placed and its status write is based on the version the server
// has, not a stale one that fails with a conflict (a conflict costs a
// read, a backoff and a second write). A cached Flock at any other version
// (the write itself, or someone else's later one) is the cache's to trust,
// and the entry goes.
type writtenFlocks struct {
	mu sync.Mutex
	m  map[types.UID]*writtenFlock
}

type writtenFlock struct {
	flock    *v1alpha1.Flock
	replaced []string
	at       time.Time
}

// record notes that base, a Flock this controller read, was written as
// written. Nothing is noted when the write changed nothing.
func (w *writtenFlocks) record(base, written *v1alpha1.Flock, now time.Time) {
	if base == nil || written == nil || written.UID != base.UID || written.ResourceVersion == base.ResourceVersion {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.UID]*writtenFlock{}
	}
	for uid, e := range w.m {
		if now.Sub(e.at) > writtenFlockTTL {
			delete(w.m, uid)
		}
	}
	// Newest first; the oldest go beyond maxReplacedVersions.
	replaced := []string{base.ResourceVersion}
	if e := w.m[written.UID]; e != nil {
		for _, rv := range append([]string{e.flock.ResourceVersion}, e.replaced...) {
			if !slices.Contains(replaced, rv) && len(replaced) < maxReplacedVersions {
				replaced = append(replaced, rv)
			}
		}
	}
	kept := written.DeepCopy()
	kept.ManagedFields = nil // as the informer caches it
	w.m[written.UID] = &writtenFlock{flock: kept, replaced: replaced, at: now}
}

// latest returns the fresher of cached and this controller's last write
// of it (read-only, as cached objects are).
func (w *writtenFlocks) latest(cached *v1alpha1.Flock) *v1alpha1.Flock {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.m[cached.UID]
	if e == nil {
		return cached
	}
	if slices.Contains(e.replaced, cached.ResourceVersion) {
		return e.flock
	}
	delete(w.m, cached.UID)
	return cached
}

// observed forgets the write of f, a Flock its informer delivered, once
// the cache shows that write or a later version.
func (w *writtenFlocks) observed(f *v1alpha1.Flock) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.m[f.UID]; e != nil && !slices.Contains(e.replaced, f.ResourceVersion) {
		delete(w.m, f.UID)
	}
}

// forget forgets the write of a deleted Flock.
func (w *writtenFlocks) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, uid)
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

// len returns how many written Flocks are remembered.
func (w *writtenFlocks) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
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

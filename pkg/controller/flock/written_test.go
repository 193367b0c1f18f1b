// File written_test.go: the controller's own last write of a Flock stands
// in for a cache that does not show it yet, and only then.

package flock

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func flockAt(uid, rv string, ready int32) *v1alpha1.Flock {
	return &v1alpha1.Flock{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "pg", UID: k8stypes.UID("uid-" + uid), ResourceVersion: rv,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldManager}}},
		Status: v1alpha1.FlockStatus{ReadyReplicas: ready},
	}
}

func TestWrittenFlocks(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	var w writtenFlocks
	v1, v2, v3 := flockAt("a", "1", 0), flockAt("a", "2", 1), flockAt("a", "3", 2)

	if got := w.latest(v1); got != v1 {
		t.Fatalf("nothing written: got version %s, want the cached one", got.ResourceVersion)
	}
	w.record(v1, v1, now) // a write that changed nothing
	if w.len() != 0 {
		t.Fatalf("a write that changed nothing was noted")
	}

	// Two writes in a row, each based on the one before.
	w.record(v1, v2, now)
	w.record(v2, v3, now)
	for _, cached := range []*v1alpha1.Flock{v1, v2} {
		got := w.latest(cached)
		if got.ResourceVersion != "3" || got.Status.ReadyReplicas != 2 {
			t.Errorf("cache at %s, behind the writes: got version %s, want the last write (3)", cached.ResourceVersion, got.ResourceVersion)
		}
		if got.ManagedFields != nil {
			t.Errorf("the written copy keeps managedFields, which the cache drops")
		}
	}
	// Another Flock is not affected.
	if other := flockAt("b", "1", 0); w.latest(other) != other {
		t.Error("another Flock's cached copy was replaced")
	}
	// The cache caught up: its copy is used and the write forgotten.
	if got := w.latest(v3); got != v3 || w.len() != 0 {
		t.Errorf("cache at the write: got %p (want the cached %p), %d remembered", got, v3, w.len())
	}

	// Someone else wrote after us: the cache's newer version wins.
	w.record(v1, v2, now)
	v9 := flockAt("a", "9", 0)
	if got := w.latest(v9); got != v9 || w.len() != 0 {
		t.Errorf("cache at a later version: got version %s, %d remembered", got.ResourceVersion, w.len())
	}

	// A write no sync ever comes back for is dropped after the TTL, on
	// the next record.
	w.record(v1, v2, now)
	w.record(flockAt("b", "1", 0), flockAt("b", "2", 0), now.Add(writtenTTL+time.Second))
	if w.len() != 1 {
		t.Errorf("%d remembered, want only the fresh one", w.len())
	}
}

// The versions remembered as older than a write are bounded.
func TestWrittenFlocksReplacedBounded(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	var w writtenFlocks
	prev := flockAt("a", "0", 0)
	for i := 1; i <= 3*maxReplacedVersions; i++ {
		next := flockAt("a", string(rune('A'+i)), 0)
		w.record(prev, next, now)
		prev = next
	}
	e := w.m["uid-a"]
	if len(e.replaced) != maxReplacedVersions || e.replaced[0] != flockAt("a", string(rune('A'+3*maxReplacedVersions-1)), 0).ResourceVersion {
		t.Errorf("replaced %v: want the %d newest, newest first", e.replaced, maxReplacedVersions)
	}
}

// The informer delivering the write, or the Flock's deletion, ends the
// memory of it at once; an event at a version the write made old does not.
func TestWrittenFlocksForgottenWhenTheCacheShowsThem(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	fc := &defaultFlockControl{written: &writtenFlocks{}}
	v1, v2, v3 := flockAt("a", "1", 0), flockAt("a", "2", 1), flockAt("a", "3", 2)
	fc.written.record(v1, v2, now)
	fc.written.record(v2, v3, now)

	fc.flockUpdated(v2) // a late event of the first write
	if fc.written.len() != 1 {
		t.Fatalf("an event at a version older than the last write ended its memory")
	}
	fc.flockUpdated(v3)
	if fc.written.len() != 0 {
		t.Fatalf("the cache showing the write did not end its memory")
	}

	fc.written.record(v1, v2, now)
	fc.flockDeleted(cache.DeletedFinalStateUnknown{Key: "ns/pg", Obj: v1})
	if fc.written.len() != 0 {
		t.Fatalf("the Flock's deletion did not end the memory of its write")
	}
}

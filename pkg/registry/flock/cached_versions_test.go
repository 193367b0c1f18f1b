package flock

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// cachedFlock is storedFlock at resourceVersion rv, named name.
func cachedFlock(name, rv string, ready int32) *flock.Flock {
	f := storedFlock(ready)
	f.Name, f.ResourceVersion = name, rv
	return f
}

// decodedCopy is what the informer decodes from the loopback watch for f:
// the same version, as v1alpha1, none of its memory shared.
func decodedCopy(t *testing.T, f *flock.Flock) *v1alpha1.Flock {
	t.Helper()
	out := &v1alpha1.Flock{}
	if err := v1alpha1.Convert_flock_Flock_To_v1alpha1_Flock(f.DeepCopy(), out, nil); err != nil {
		t.Fatal(err)
	}
	return out
}

func asJSON(t *testing.T, obj any) string {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// recorded is the number of Flocks c records.
func recorded(c *CachedVersions) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.byKey)
}

// transformed runs the informer's transform of c on obj.
func transformed(t *testing.T, c *CachedVersions, obj *v1alpha1.Flock) *v1alpha1.Flock {
	t.Helper()
	got, err := c.Transform(obj)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := got.(*v1alpha1.Flock)
	if !ok {
		t.Fatalf("transform gave %T", got)
	}
	return f
}

func TestInformerHoldsTheWatchCachesVersion(t *testing.T) {
	c := NewCachedVersions()
	v := newVersionSharer(c)
	first, second := cachedFlock("db", "10", 0), cachedFlock("db", "11", 1)
	v.event(watch.Event{Type: watch.Added, Object: &timed{first}})
	v.event(watch.Event{Type: watch.Modified, Object: &timed{second}})

	// The informer decodes version 11, the one the cache holds: it gets a
	// view of the cached object, equal to what it decoded but for the
	// managed fields, which the cached object keeps.
	decoded := decodedCopy(t, second)
	view := transformed(t, c, decoded)
	if view == decoded {
		t.Fatal("the informer kept its own copy of the version the watch cache holds")
	}
	for what, pair := range map[string][2]any{
		"the pod template's containers": {view.Spec.Template.Spec.Containers, second.Spec.Template.Spec.Containers},
		"the labels":                    {view.Labels, second.Labels},
		"the members":                   {view.Status.Members, second.Status.Members},
		"the conditions":                {view.Status.Conditions, second.Status.Conditions},
	} {
		if !samePointer(pair[0], pair[1]) {
			t.Errorf("the view does not share %s with the cached object", what)
		}
	}
	if view.ManagedFields != nil {
		t.Errorf("the view has managed fields: %v", view.ManagedFields)
	}
	if len(second.ManagedFields) != 2 {
		t.Errorf("the cached object lost its managed fields: %v", second.ManagedFields)
	}
	want := decodedCopy(t, second)
	want.ManagedFields = nil
	if got, want := asJSON(t, view), asJSON(t, want); got != want {
		t.Errorf("the view differs from the version decoded:\n got %s\nwant %s", got, want)
	}

	// Version 10 (the cache moved on since) and another incarnation of the
	// same name stay as decoded, without managed fields.
	other := cachedFlock("db", "11", 1)
	other.UID = "u2"
	for name, old := range map[string]*v1alpha1.Flock{"an older version": decodedCopy(t, first), "another UID": decodedCopy(t, other)} {
		if got := transformed(t, c, old); got != old || got.ManagedFields != nil {
			t.Errorf("%s: got %p with %d managed fields, want the decoded object %p without", name, got, len(got.ManagedFields), old)
		}
	}

	// Deleted: forgotten.
	v.event(watch.Event{Type: watch.Deleted, Object: &timed{second}})
	if recorded(c) != 0 {
		t.Errorf("%d Flocks recorded after the delete, want 0", recorded(c))
	}
	if d := decodedCopy(t, second); transformed(t, c, d) != d {
		t.Error("a deleted Flock's last version was still served from the record")
	}

	// Anything else passes as it is.
	pod := &metav1.PartialObjectMetadata{}
	if got, _ := c.Transform(pod); got != pod {
		t.Errorf("transform of a %T gave %v", pod, got)
	}
}

func TestCachedVersionsFollowTheCachesRestarts(t *testing.T) {
	c := NewCachedVersions()
	old := newVersionSharer(c)
	for _, name := range []string{"a", "b", "gone"} {
		old.event(watch.Event{Type: watch.Added, Object: cachedFlock(name, "5", 0)})
	}

	// The cache starts its watch again, streaming the Flocks there are
	// now; "gone" was deleted in between. It is forgotten once the stream
	// of initial Flocks ends, not before (a later one may still come).
	v := newVersionSharer(c)
	v.initial = map[string]bool{}
	v.event(watch.Event{Type: watch.Added, Object: cachedFlock("a", "9", 0)})
	v.event(watch.Event{Type: watch.Added, Object: cachedFlock("b", "9", 0)})
	if recorded(c) != 3 {
		t.Fatalf("%d Flocks recorded during the initial events, want 3", recorded(c))
	}
	end := &flock.Flock{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	v.event(watch.Event{Type: watch.Bookmark, Object: end})
	if recorded(c) != 2 || c.lookup("ns", "gone", "u1", "5") != nil {
		t.Errorf("after the initial events: %d Flocks recorded, %q among them; want a and b only", recorded(c), "gone")
	}
	if c.lookup("ns", "a", "u1", "9") == nil {
		t.Error("a's version 9 is not recorded")
	}

	// Or the cache lists etcd, in pages: the first page replaces what was
	// recorded, the later ones add to it.
	s := versionSharingStorage{Interface: pagedList{pages: map[string][]flock.Flock{
		"":   {*cachedFlock("p1", "20", 0)},
		"c2": {*cachedFlock("p2", "20", 0)},
	}}, cached: c}
	for _, cont := range []string{"", "c2"} {
		opts := storage.ListOptions{Predicate: storage.Everything}
		opts.Predicate.Continue = cont
		if err := s.GetList(context.Background(), "/flocks", opts, &flock.FlockList{}); err != nil {
			t.Fatal(err)
		}
	}
	if recorded(c) != 2 || c.lookup("ns", "p1", "u1", "20") == nil || c.lookup("ns", "p2", "u1", "20") == nil {
		t.Errorf("after a list of two pages: %d Flocks recorded, want p1 and p2", recorded(c))
	}
}

// pagedList is a storage whose GetList gives the page of each continue
// token; nothing else of it is used.
type pagedList struct {
	storage.Interface
	pages map[string][]flock.Flock
}

func (p pagedList) GetList(_ context.Context, _ string, opts storage.ListOptions, listObj runtime.Object) error {
	listObj.(*flock.FlockList).Items = p.pages[opts.Predicate.Continue]
	return nil
}

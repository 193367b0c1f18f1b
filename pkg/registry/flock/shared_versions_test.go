package flock

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// storedFlock is a Flock as etcd's watch decodes it: every version a fresh
// object of its own.
func storedFlock(ready int32) *flock.Flock {
	replicas := int32(3)
	f := &flock.Flock{
		ObjectMeta: metav1.ObjectMeta{
			Name: "db", Namespace: "ns", UID: types.UID("u1"),
			Labels:      map[string]string{"app": "db"},
			Annotations: map[string]string{"note": "a long annotation"},
			Finalizers:  []string{"flock.dev/members"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "flock.dev/v1alpha1",
					Time: &metav1.Time{Time: time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC)}, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}},
				{Manager: "flock-controller", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "flock.dev/v1alpha1",
					Time: &metav1.Time{Time: time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC)}, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:readyReplicas":{}}}`)}, Subresource: "status"},
			},
		},
		Spec: &flock.FlockSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:1"}}},
			},
		},
		Status: flock.FlockStatus{
			ReadyReplicas: ready,
			Members:       []flock.FlockMember{{Ordinal: 0, Node: "n0", Pod: "db-0"}},
			Conditions:    []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Waiting", Message: "0 of 3 members ready"}},
		},
	}
	return f
}

func samePointer(a, b any) bool {
	return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}

func TestShareUnchangedSharesWhatIsEqualOnly(t *testing.T) {
	s := newVersionSharer(NewCachedVersions())
	prev := storedFlock(0)
	s.event(watch.Event{Type: watch.Added, Object: prev})

	cur := storedFlock(1)
	cur.Status.Conditions[0].Reason = "Starting"
	want := cur.DeepCopy()
	got := s.event(watch.Event{Type: watch.Modified, Object: cur})
	if got.Object != cur || got.Type != watch.Modified {
		t.Fatalf("the event was not passed on as it came: %#v", got)
	}
	if !reflect.DeepEqual(cur, want) {
		t.Fatalf("sharing changed the object:\n got %#v\nwant %#v", cur, want)
	}
	for name, pair := range map[string][2]any{
		"labels":                     {prev.Labels, cur.Labels},
		"annotations":                {prev.Annotations, cur.Annotations},
		"finalizers":                 {prev.Finalizers, cur.Finalizers},
		"the spec, one struct":       {prev.Spec, cur.Spec},
		"the template's containers":  {prev.Spec.Template.Spec.Containers, cur.Spec.Template.Spec.Containers},
		"spec.replicas":              {prev.Spec.Replicas, cur.Spec.Replicas},
		"status.members":             {prev.Status.Members, cur.Status.Members},
		"kubectl's field set":        {prev.ManagedFields[0].FieldsV1, cur.ManagedFields[0].FieldsV1},
		"the controller's field set": {prev.ManagedFields[1].FieldsV1, cur.ManagedFields[1].FieldsV1},
	} {
		if !samePointer(pair[0], pair[1]) {
			t.Errorf("%s: not shared with the version before", name)
		}
	}
	if samePointer(prev.Status.Conditions, cur.Status.Conditions) {
		t.Error("status.conditions changed but were shared")
	}

	// A changed spec and annotations stay the new version's own; the new
	// version is what the next one shares with.
	next := storedFlock(1)
	next.Spec.Template.Spec.Containers[0].Image = "db:2"
	next.Annotations["note"] = "changed"
	next.ManagedFields[0].FieldsV1.Raw = []byte(`{"f:spec":{"f:template":{}}}`)
	s.event(watch.Event{Type: watch.Modified, Object: next})
	if cur.Spec == next.Spec || samePointer(cur.Spec.Template.Spec.Containers, next.Spec.Template.Spec.Containers) || next.Spec.Template.Spec.Containers[0].Image != "db:2" {
		t.Error("a changed template was shared")
	}
	if samePointer(cur.Annotations, next.Annotations) || next.Annotations["note"] != "changed" {
		t.Error("changed annotations were shared")
	}
	if samePointer(cur.ManagedFields[0].FieldsV1, next.ManagedFields[0].FieldsV1) {
		t.Error("a changed field set was shared")
	}
	if !samePointer(cur.ManagedFields[1].FieldsV1, next.ManagedFields[1].FieldsV1) || !samePointer(cur.Labels, next.Labels) {
		t.Error("the third version did not share with the second")
	}
}

func TestShareUnchangedSharesNamesOfChangedMembersAndConditions(t *testing.T) {
	s := newVersionSharer(NewCachedVersions())
	prev := storedFlock(0)
	prev.Status.Members = append(prev.Status.Members, flock.FlockMember{Ordinal: 1, Node: "n1", Pod: "db-1"})
	s.event(watch.Event{Type: watch.Added, Object: prev})
	cur := storedFlock(1)
	cur.Status.Members = append(cur.Status.Members, flock.FlockMember{Ordinal: 1, Node: "n1", Pod: "db-1", Ready: true})
	cur.Status.Conditions[0].Reason = "Starting"
	want := cur.DeepCopy()
	s.event(watch.Event{Type: watch.Modified, Object: cur})
	if !reflect.DeepEqual(cur, want) {
		t.Fatalf("sharing changed the object:\n got %#v\nwant %#v", cur, want)
	}
	if samePointer(prev.Status.Members, cur.Status.Members) {
		t.Fatal("members that changed were shared as a whole")
	}
	if !cur.Status.Members[1].Ready || prev.Status.Members[1].Ready {
		t.Fatal("a member's change was lost or leaked into the version before")
	}
	sameBytes := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	if !sameBytes(prev.Status.Members[1].Node, cur.Status.Members[1].Node) || !sameBytes(prev.Status.Members[0].Pod, cur.Status.Members[0].Pod) {
		t.Error("the members' names were not shared")
	}
	if !sameBytes(prev.Status.Conditions[0].Message, cur.Status.Conditions[0].Message) && prev.Status.Conditions[0].Message != "" {
		t.Error("an unchanged condition message was not shared")
	}
	if cur.Status.Conditions[0].Reason != "Starting" || prev.Status.Conditions[0].Reason != "Waiting" {
		t.Error("a condition's change was lost or leaked into the version before")
	}
}

func TestShareUnchangedKeepsNilAndEmptyApart(t *testing.T) {
	s := newVersionSharer(NewCachedVersions())
	prev := storedFlock(0)
	prev.Labels = nil
	prev.Finalizers = nil
	s.event(watch.Event{Type: watch.Added, Object: prev})
	cur := storedFlock(0)
	cur.Labels = map[string]string{}
	cur.Finalizers = []string{}
	s.event(watch.Event{Type: watch.Modified, Object: cur})
	if cur.Labels == nil || cur.Finalizers == nil {
		t.Fatal("an empty map or list became nil: it would encode differently")
	}
}

func TestShareUnchangedNotAcrossFlocksOrIncarnations(t *testing.T) {
	s := newVersionSharer(NewCachedVersions())
	first := storedFlock(0)
	s.event(watch.Event{Type: watch.Added, Object: first})

	other := storedFlock(0)
	other.Name, other.UID = "other", "u2"
	s.event(watch.Event{Type: watch.Added, Object: other})
	if samePointer(first.Spec.Template.Spec.Containers, other.Spec.Template.Spec.Containers) {
		t.Error("two Flocks shared their template")
	}
	// Equal field sets are one copy, whichever Flock they belong to.
	if !samePointer(first.ManagedFields[0].FieldsV1, other.ManagedFields[0].FieldsV1) {
		t.Error("two Flocks' equal field sets were not shared")
	}

	// Deleted and made again under the same name: a new incarnation.
	s.event(watch.Event{Type: watch.Deleted, Object: storedFlock(0)})
	again := storedFlock(0)
	s.event(watch.Event{Type: watch.Added, Object: again})
	if samePointer(first.Spec.Template.Spec.Containers, again.Spec.Template.Spec.Containers) {
		t.Error("a Flock made again shared with the deleted one")
	}
	recreated := storedFlock(0)
	recreated.UID = "u3" // a delete the watch did not see
	s.event(watch.Event{Type: watch.Modified, Object: recreated})
	if samePointer(again.Spec.Template.Spec.Containers, recreated.Spec.Template.Spec.Containers) {
		t.Error("a Flock of another UID shared with the one before")
	}

	bookmark := watch.Event{Type: watch.Bookmark, Object: &flock.Flock{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9"}}}
	if got := s.event(bookmark); !reflect.DeepEqual(got, bookmark) {
		t.Errorf("a bookmark was changed: %#v", got)
	}
}

func TestFieldSetsAreBounded(t *testing.T) {
	s := newVersionSharer(NewCachedVersions())
	for i := range maxFieldSets + 10 {
		f := storedFlock(0)
		f.Name, f.UID = fmt.Sprintf("f%d", i), types.UID(fmt.Sprintf("u%d", i))
		f.ManagedFields = f.ManagedFields[:1]
		f.ManagedFields[0].FieldsV1 = &metav1.FieldsV1{Raw: fmt.Appendf(nil, `{"f:metadata":{"f:labels":{"f:n%d":{}}}}`, i)}
		s.event(watch.Event{Type: watch.Added, Object: f})
		if len(s.fieldSets) > maxFieldSets {
			t.Fatalf("%d field sets kept, at most %d", len(s.fieldSets), maxFieldSets)
		}
		if f.ManagedFields[0].FieldsV1 == nil || !strings.Contains(string(f.ManagedFields[0].FieldsV1.Raw), fmt.Sprintf(`"f:n%d"`, i)) {
			t.Fatalf("Flock %d lost its field set", i)
		}
	}
}

func TestSharingWatchPassesEventsAndStops(t *testing.T) {
	in := watch.NewFakeWithChanSize(2, false)
	w := &sharingWatch{in: in, out: make(chan watch.Event), done: make(chan struct{})}
	go w.loop(newVersionSharer(NewCachedVersions()))

	// etcd's watch sends each object wrapped with the time it was read.
	first, second := storedFlock(0), storedFlock(1)
	in.Add(&timed{first})
	in.Modify(&timed{second})
	for _, want := range []*flock.Flock{first, second} {
		select {
		case e := <-w.ResultChan():
			if got, ok := e.Object.(*timed); !ok || got.Object != want {
				t.Fatalf("got %#v, want the next event's object, wrapped as it came", e.Object)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10s")
		}
	}
	if !samePointer(first.Spec.Template.Spec.Containers, second.Spec.Template.Spec.Containers) {
		t.Error("the watch did not share the second version's template with the first's")
	}

	// An event nobody reads, then Stop: the loop must end (out closed)
	// instead of waiting for a reader for ever.
	in.Modify(storedFlock(2))
	time.Sleep(10 * time.Millisecond)
	w.Stop()
	w.Stop() // twice is harmless
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, open := <-w.ResultChan():
			if !open {
				return
			}
		case <-deadline:
			t.Fatal("the watch's loop did not end within 10s of Stop")
		}
	}
}

func TestWithSharedVersionsReplacesOnlyTheWatchCache(t *testing.T) {
	for name, tc := range map[string]struct {
		decorator generic.StorageDecorator
		shared    bool
	}{
		"watch cache on":  {genericregistry.StorageWithCacher(), true},
		"watch cache off": {generic.UndecoratedStorage, false},
	} {
		t.Run(name, func(t *testing.T) {
			opts, err := withSharedVersions(fixedOptions{generic.RESTOptions{Decorator: tc.decorator}}, NewCachedVersions()).
				GetRESTOptions(flock.Resource("flocks"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := !samePointer(opts.Decorator, tc.decorator); got != tc.shared {
				t.Errorf("the shared-versions decorator in use: %v, want %v", got, tc.shared)
			}
		})
	}
}

type fixedOptions struct{ opts generic.RESTOptions }

func (f fixedOptions) GetRESTOptions(schema.GroupResource, runtime.Object) (generic.RESTOptions, error) {
	return f.opts, nil
}

// timed wraps an object as etcd's watch does (with the time it was read).
type timed struct{ runtime.Object }

func (t *timed) Unwrap() runtime.Object { return t.Object }

// BenchmarkShareUnchanged is the cost of sharing per watch event, to set
// beside decoding the event (BenchmarkDecodeStoredFlock).
func BenchmarkShareUnchanged(b *testing.B) {
	prev := storedFlock(0)
	versions := make([]*flock.Flock, b.N)
	for i := range versions {
		versions[i] = storedFlock(1)
	}
	b.ResetTimer()
	for i := range b.N {
		shareUnchanged(prev, versions[i])
	}
}

func BenchmarkDecodeStoredFlock(b *testing.B) {
	codecs := serializer.NewCodecFactory(testScheme())
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	codec := codecs.CodecForVersions(info.Serializer, codecs.UniversalDecoder(flock.SchemeGroupVersion), v1alpha1.SchemeGroupVersion, flock.SchemeGroupVersion)
	data, err := runtime.Encode(codec, storedFlock(1))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := runtime.Decode(codec, data); err != nil {
			b.Fatal(err)
		}
	}
}

package apiserver

import (
	"context"
	"io"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// fakeFlockStorage serves internal Flocks as the registry's store does.
type fakeFlockStorage struct {
	items   []flock.Flock
	watcher *watch.FakeWatcher
	// seen records the last options and request namespace.
	opts *metainternalversion.ListOptions
	ns   string
}

func (s *fakeFlockStorage) NewList() runtime.Object { return &flock.FlockList{} }
func (s *fakeFlockStorage) List(ctx context.Context, o *metainternalversion.ListOptions) (runtime.Object, error) {
	s.opts = o
	s.ns, _ = genericapirequest.NamespaceFrom(ctx)
	return &flock.FlockList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: s.items}, nil
}
func (s *fakeFlockStorage) ConvertToTable(context.Context, runtime.Object, runtime.Object) (*metav1.Table, error) {
	return nil, nil
}
func (s *fakeFlockStorage) Watch(ctx context.Context, o *metainternalversion.ListOptions) (watch.Interface, error) {
	s.opts = o
	return s.watcher, nil
}

func internalFlock(name string, replicas int32) flock.Flock {
	return flock.Flock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "5", Labels: map[string]string{"app": name}},
		Spec:       flock.FlockSpec{Replicas: &replicas},
	}
}

func TestFlockFeedWithoutStorage(t *testing.T) {
	feed := NewFlockFeed()
	if _, err := feed.List(metav1.ListOptions{}); err == nil {
		t.Fatal("List before the storage is set: no error")
	}
	if _, err := feed.Watch(metav1.ListOptions{}); err == nil {
		t.Fatal("Watch before the storage is set: no error")
	}
}

func TestFlockFeedList(t *testing.T) {
	s := &fakeFlockStorage{items: []flock.Flock{internalFlock("a", 3), internalFlock("b", 1)}}
	feed := NewFlockFeed()
	feed.SetStorage(s)
	obj, err := feed.List(metav1.ListOptions{ResourceVersion: "0", LabelSelector: "app=a"})
	if err != nil {
		t.Fatal(err)
	}
	list, ok := obj.(*v1alpha1.FlockList)
	if !ok {
		t.Fatalf("List returned %T, want *v1alpha1.FlockList", obj)
	}
	if list.ResourceVersion != "7" || len(list.Items) != 2 || list.Items[0].Name != "a" || *list.Items[0].Spec.Replicas != 3 {
		t.Fatalf("list = %+v", list)
	}
	if s.ns != metav1.NamespaceAll || s.opts.ResourceVersion != "0" || s.opts.LabelSelector.String() != "app=a" {
		t.Fatalf("storage asked in namespace %q with %+v", s.ns, s.opts)
	}
	// The informer's objects are its own: changing one leaves the
	// storage's (the watch cache's) as it was.
	list.Items[0].Labels["app"] = "changed"
	if s.items[0].Labels["app"] != "a" {
		t.Fatal("a listed Flock shares its labels with the storage's object")
	}
}

// cacheable wraps an object as the watch cache's events do.
type cacheable struct {
	runtime.Object
	copies int
}

func (c *cacheable) CacheEncode(runtime.Identifier, func(runtime.Object, io.Writer) error, io.Writer) error {
	return nil
}
func (c *cacheable) GetObject() runtime.Object { c.copies++; return c.Object.DeepCopyObject() }

func TestFlockFeedWatch(t *testing.T) {
	s := &fakeFlockStorage{watcher: watch.NewFakeWithChanSize(4, false)}
	feed := NewFlockFeed()
	feed.SetStorage(s)
	w, err := feed.Watch(metav1.ListOptions{ResourceVersion: "7", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if s.opts.ResourceVersion != "7" || !s.opts.AllowWatchBookmarks {
		t.Fatalf("storage watched with %+v", s.opts)
	}
	raw := internalFlock("a", 2)
	wrapped := &cacheable{Object: func() runtime.Object { f := internalFlock("b", 4); return &f }()}
	status := apierrors.NewResourceExpired("too old").Status()
	s.watcher.Add(&raw)
	s.watcher.Modify(wrapped)
	s.watcher.Error(&status)

	next := func() watch.Event {
		t.Helper()
		select {
		case e := <-w.ResultChan():
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
			return watch.Event{}
		}
	}
	e := next()
	f, ok := e.Object.(*v1alpha1.Flock)
	if e.Type != watch.Added || !ok || f.Name != "a" || *f.Spec.Replicas != 2 {
		t.Fatalf("first event %s %#v", e.Type, e.Object)
	}
	f.Labels["app"] = "changed"
	if raw.Labels["app"] != "a" {
		t.Fatal("a watched Flock shares its labels with the storage's object")
	}
	e = next()
	if f, ok := e.Object.(*v1alpha1.Flock); e.Type != watch.Modified || !ok || f.Name != "b" || *f.Spec.Replicas != 4 || wrapped.copies != 1 {
		t.Fatalf("second event %s %#v (copies %d)", e.Type, e.Object, wrapped.copies)
	}
	e = next()
	if st, ok := e.Object.(*metav1.Status); e.Type != watch.Error || !ok || st.Code != status.Code {
		t.Fatalf("third event %s %#v", e.Type, e.Object)
	}
}

func TestFlockInformersUseTheFeed(t *testing.T) {
	s := &fakeFlockStorage{items: []flock.Flock{internalFlock("a", 3)}, watcher: watch.NewFake()}
	feed := NewFlockFeed()
	feed.SetStorage(s)
	factory := NewFlockInformers(nil, feed, nil)
	lister := factory.Flock().V1alpha1().Flocks().Lister()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	for _, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatal("the Flock informer did not sync")
		}
	}
	if f, err := lister.Flocks("ns").Get("a"); err != nil || *f.Spec.Replicas != 3 {
		t.Fatalf("lister: %v, %v", f, err)
	}
	cancel()
	factory.Shutdown()
}

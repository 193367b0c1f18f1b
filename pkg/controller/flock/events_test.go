package flock

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// TestNoEventsInANamespaceBeingDeleted: the controllers' event sink answers
// a write of an event in a namespace its cache shows being deleted (by phase
// or by deletionTimestamp) as kube-apiserver would, with the refusal the
// event broadcaster drops without a retry, and sends none; it writes the
// events of an active namespace and of a namespace it does not show.
func TestNoEventsInANamespaceBeingDeleted(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "going"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
		{ObjectMeta: metav1.ObjectMeta{Name: "just-deleted", DeletionTimestamp: &metav1.Time{}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
		{ObjectMeta: metav1.ObjectMeta{Name: "active"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
	} {
		if err := indexer.Add(ns); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset()
	sink := NewNamespaceAwareSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}, corelisters.NewNamespaceLister(indexer))
	for _, tc := range []struct {
		namespace string
		written   bool
	}{{"going", false}, {"just-deleted", false}, {"active", true}, {"unknown", true}} {
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: tc.namespace, Name: "pg.1"}, Reason: "SuccessfulCreate"}
		before := len(client.Actions())
		_, createErr := sink.Create(e)
		_, updateErr := sink.Update(e)
		_, patchErr := sink.Patch(e, []byte(`{"count":2}`))
		sent := len(client.Actions()) - before
		for verb, err := range map[string]error{"create": createErr, "update": updateErr, "patch": patchErr} {
			refused := apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) && apierrors.IsForbidden(err)
			if refused == tc.written {
				t.Errorf("namespace %s: %s: %v, want refused %v", tc.namespace, verb, err, !tc.written)
			}
		}
		if want := map[bool]int{true: 3, false: 0}[tc.written]; sent != want {
			t.Errorf("namespace %s: %d requests sent, want %d", tc.namespace, sent, want)
		}
	}
}

// errSink answers every write with err.
type errSink struct{ err error }

func (s errSink) Create(e *corev1.Event) (*corev1.Event, error) { return e, s.err }
func (s errSink) Update(e *corev1.Event) (*corev1.Event, error) { return e, s.err }
func (s errSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	return e, s.err
}

// TestEventOfANamespaceGoneIsRefusedQuietly: kube-apiserver's refusal of an
// event whose namespace is gone (404 for the namespace) comes back from the
// sink's Create with the namespace-terminating cause, on which the event
// broadcaster drops it without an error log; any other refusal, and a
// patch's (the broadcaster then creates the event anew), come back as they
// are.
func TestEventOfANamespaceGoneIsRefusedQuietly(t *testing.T) {
	lister := corelisters.NewNamespaceLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "gone", Name: "pg.1"}, Reason: "SuccessfulCreate"}
	nsGone := apierrors.NewNotFound(corev1.Resource("namespaces"), "gone")
	for _, tc := range []struct {
		name  string
		err   error
		quiet bool
	}{
		{"namespace gone", nsGone, true},
		{"another namespace", apierrors.NewNotFound(corev1.Resource("namespaces"), "other"), false},
		{"the event not found", apierrors.NewNotFound(corev1.Resource("events"), "pg.1"), false},
		{"a conflict", apierrors.NewConflict(corev1.Resource("events"), "pg.1", nil), false},
	} {
		sink := NewNamespaceAwareSink(errSink{tc.err}, lister)
		_, err := sink.Create(e)
		if quiet := apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause); quiet != tc.quiet {
			t.Errorf("%s: create: %v, want quiet %v", tc.name, err, tc.quiet)
		}
		if apierrors.ReasonForError(err) != apierrors.ReasonForError(tc.err) {
			t.Errorf("%s: create: reason %s, want %s", tc.name, apierrors.ReasonForError(err), apierrors.ReasonForError(tc.err))
		}
	}
	if apierrors.HasStatusCause(nsGone, corev1.NamespaceTerminatingCause) {
		t.Error("the sink changed the error it was given")
	}
	sink := NewNamespaceAwareSink(errSink{nsGone}, lister)
	if _, err := sink.Patch(e, []byte(`{"count":2}`)); apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) || !apierrors.IsNotFound(err) {
		t.Errorf("patch: %v, want the NotFound as it is", err)
	}
	if _, err := NewNamespaceAwareSink(errSink{}, lister).Create(e); err != nil {
		t.Errorf("create written: %v", err)
	}
}

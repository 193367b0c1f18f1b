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

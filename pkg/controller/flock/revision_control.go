// File revision_control.go: RevisionControl: the writes and reads of ControllerRevisions.

package flock

import (
	"context"
	"fmt"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// RevisionControl is how the reconcile logic reads and writes the
// ControllerRevisions that record Flocks' templates: reads come from the
// informer's cache (do not modify what they return), writes go through the
// clientset with the field manager "flock-controller". Tests use a fake.
type RevisionControl interface {
	// ListRevisions returns the ControllerRevisions in namespace labelled
	// for the Flock named flockName, from the cache (by index: a sync does
	// not walk every revision of its namespace).
	ListRevisions(namespace, flockName string) ([]*appsv1.ControllerRevision, error)
	// CreateRevision creates cr.
	CreateRevision(ctx context.Context, cr *appsv1.ControllerRevision) error
	// UpdateRevision updates cr (a copy the caller owns).
	UpdateRevision(ctx context.Context, cr *appsv1.ControllerRevision) error
	// DeleteRevision deletes cr on the precondition that its UID is still
	// cr.UID. A revision that is already gone is not an error.
	DeleteRevision(ctx context.Context, cr *appsv1.ControllerRevision) error
	// PatchRevision applies a strategic merge patch (adoption).
	PatchRevision(ctx context.Context, namespace, name string, patch []byte) error
}

// revisionFlockIndex indexes ControllerRevisions by the namespace and the
// flock.dev/name label ("namespace/name").
const revisionFlockIndex = "flock.dev/name"

func indexRevisionByFlock(obj any) ([]string, error) {
	cr, ok := obj.(*appsv1.ControllerRevision)
	if !ok || cr.Labels[v1alpha1.LabelFlockName] == "" {
		return nil, nil
	}
	return []string{cr.Namespace + "/" + cr.Labels[v1alpha1.LabelFlockName]}, nil
}

// NewRevisionControl returns the RevisionControl that writes through client
// and reads through informer, to which it adds its index (call it before
// the informer starts).
func NewRevisionControl(client kubernetes.Interface, informer cache.SharedIndexInformer) (RevisionControl, error) {
	if err := informer.AddIndexers(cache.Indexers{revisionFlockIndex: indexRevisionByFlock}); err != nil {
		return nil, fmt.Errorf("adding the revision index (start the informers after NewController): %w", err)
	}
	return &realRevisionControl{client: client, indexer: informer.GetIndexer()}, nil
}

type realRevisionControl struct {
	client  kubernetes.Interface
	indexer cache.Indexer
}

var _ RevisionControl = &realRevisionControl{}

func (c *realRevisionControl) ListRevisions(namespace, flockName string) ([]*appsv1.ControllerRevision, error) {
	return byIndex[*appsv1.ControllerRevision](c.indexer, revisionFlockIndex, namespace+"/"+flockName)
}

func (c *realRevisionControl) CreateRevision(ctx context.Context, cr *appsv1.ControllerRevision) error {
	_, err := c.client.AppsV1().ControllerRevisions(cr.Namespace).Create(ctx, cr, metav1.CreateOptions{FieldManager: FieldManager})
	return err
}

func (c *realRevisionControl) UpdateRevision(ctx context.Context, cr *appsv1.ControllerRevision) error {
	_, err := c.client.AppsV1().ControllerRevisions(cr.Namespace).Update(ctx, cr, metav1.UpdateOptions{FieldManager: FieldManager})
	return err
}

func (c *realRevisionControl) DeleteRevision(ctx context.Context, cr *appsv1.ControllerRevision) error {
	uid := cr.UID
	err := c.client.AppsV1().ControllerRevisions(cr.Namespace).Delete(ctx, cr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *realRevisionControl) PatchRevision(ctx context.Context, namespace, name string, patch []byte) error {
	_, err := c.client.AppsV1().ControllerRevisions(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

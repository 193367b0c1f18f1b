// File revision_control.go: RevisionControl: the writes and reads of ControllerRevisions.

package flock

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
)

// RevisionControl is how the reconcile logic reads and writes the
// ControllerRevisions that record Flocks' templates: reads come from the
// informer's cache (do not modify what they return), writes go through the
// clientset with the field manager "flock-controller". Tests use a fake.
type RevisionControl interface {
	// ListRevisions returns the ControllerRevisions in namespace that
	// selector matches, from the cache.
	ListRevisions(namespace string, selector labels.Selector) ([]*appsv1.ControllerRevision, error)
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

// NewRevisionControl returns the RevisionControl that writes through client
// and reads through lister.
func NewRevisionControl(client kubernetes.Interface, lister appslisters.ControllerRevisionLister) RevisionControl {
	return &realRevisionControl{client: client, lister: lister}
}

type realRevisionControl struct {
	client kubernetes.Interface
	lister appslisters.ControllerRevisionLister
}

var _ RevisionControl = &realRevisionControl{}

func (c *realRevisionControl) ListRevisions(namespace string, selector labels.Selector) ([]*appsv1.ControllerRevision, error) {
	return c.lister.ControllerRevisions(namespace).List(selector)
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

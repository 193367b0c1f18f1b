// File move.go: the flocks/move subresource: a POSTed FlockMove asks to move
// one member of a Flock to another node. It is checked alone (validation),
// by admission (FlockCapacity: the node exists and is eligible) and against
// the stored Flock in the same write that records it in
// status.members[ordinal].move, where the controller finds it, also after a
// restart.

package flock

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/apis/flock/validation"
)

// MoveREST is the storage of flocks/move. It writes through the status
// store, so only status changes and status validation applies.
type MoveREST struct {
	store *genericregistry.Store
	// now returns the time recorded as the move's requestedAt.
	now func() metav1.Time
}

var (
	_ rest.NamedCreater             = &MoveREST{}
	_ rest.GroupVersionKindProvider = &MoveREST{}
)

// New returns an empty FlockMove.
func (r *MoveREST) New() runtime.Object { return &flock.FlockMove{} }

// Destroy does nothing: the store is shared with the main resource.
func (r *MoveREST) Destroy() {}

// GroupVersionKind is flock.dev/v1alpha1 FlockMove.
func (r *MoveREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return v1alpha1.SchemeGroupVersion.WithKind("FlockMove")
}

// Create checks the FlockMove for Flock name and records it in
// status.members[ordinal].move. It returns the Flock as written. A move is
// refused with 422 naming the field: an ordinal out of range, pinned or not
// placed, a node that is the member's own, holds another member or is
// another member's target (here), or that does not exist or is not
// eligible (admission, through createValidation).
func (r *MoveREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	mv, ok := obj.(*flock.FlockMove)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a FlockMove, got %T", obj))
	}
	if errs := validation.ValidateFlockMove(mv, name); len(errs) > 0 {
		return nil, apierrors.NewInvalid(flock.Kind("FlockMove"), name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, mv.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	record := func(ctx context.Context, newObj, oldObj runtime.Object) (runtime.Object, error) {
		f := oldObj.(*flock.Flock).DeepCopy()
		if f.ResourceVersion == "" {
			return nil, apierrors.NewNotFound(flock.Resource("flocks"), name)
		}
		if f.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(flock.Resource("flocks"), name, fmt.Errorf("the Flock is being deleted"))
		}
		if errs := validation.ValidateFlockMoveAgainst(mv, f); len(errs) > 0 {
			return nil, apierrors.NewInvalid(flock.Kind("FlockMove"), name, errs)
		}
		i := slices.IndexFunc(f.Status.Members, func(m flock.FlockMember) bool { return m.Ordinal == mv.Ordinal })
		f.Status.Members[i].Move = &flock.FlockMemberMove{Node: mv.Node, Force: mv.Force, RequestedAt: r.now()}
		return f, nil
	}
	updateOpts := &metav1.UpdateOptions{DryRun: options.DryRun, FieldManager: options.FieldManager}
	out, _, err := r.store.Update(ctx, name, rest.DefaultUpdatedObjectInfo(nil, record), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, updateOpts)
	return out, err
}

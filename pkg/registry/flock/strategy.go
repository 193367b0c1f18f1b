// Package flock is the REST storage of Flocks: the main resource, the status
// subresource and the scale subresource, with their create/update strategies.
package flock

import (
	"context"
	"fmt"
	"slices"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/apis/flock/validation"
)

// flockStrategy implements the create, update and delete behaviour of the
// main resource: it ignores status, bumps generation on spec changes and
// validates.
type flockStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	opts validation.Options
}

// NewStrategy returns the strategy of the main flocks resource.
func NewStrategy(typer runtime.ObjectTyper, opts validation.Options) flockStrategy {
	return flockStrategy{typer, names.SimpleNameGenerator, opts}
}

// NamespaceScoped is true: Flocks live in namespaces.
func (flockStrategy) NamespaceScoped() bool { return true }

// GetResetFields says which fields a write to the main resource never sets:
// the whole status.
func (flockStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"flock.dev/v1alpha1": fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// PrepareForCreate clears status, starts generation at 1 and fills in the
// serviceName default when the name is known.
func (flockStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	f := obj.(*flock.Flock)
	if f.Spec == nil { // not from a request (those always have one): nothing to default from
		f.Spec = &flock.FlockSpec{}
	}
	f.Status = flock.FlockStatus{}
	f.Generation = 1
	// The store generates a name before PrepareForCreate, so the name is
	// known here even with generateName.
	f.Spec.ServiceName = v1alpha1.ServiceNameOr(f.Spec.ServiceName, f.Name)
	// A Flock that deletes data must not vanish before its cleanup runs,
	// even if it is deleted before the controller first sees it.
	r := f.Spec.Storage.Retention
	if v1alpha1.WantsDataCleanupFinalizer(v1alpha1.RetentionPolicyType(r.WhenDeleted), v1alpha1.RetentionPolicyType(r.WhenScaled)) &&
		!slices.Contains(f.Finalizers, v1alpha1.FinalizerDataCleanup) {
		f.Finalizers = append(f.Finalizers, v1alpha1.FinalizerDataCleanup)
	}
}

// PrepareForUpdate keeps the stored status and bumps generation when the spec
// changed.
func (flockStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newF, oldF := obj.(*flock.Flock), old.(*flock.Flock)
	newF.Status = oldF.Status
	if !apiequality.Semantic.DeepEqual(newF.Spec, oldF.Spec) {
		newF.Generation = oldF.Generation + 1
	}
}

// Validate checks a new Flock.
func (s flockStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateFlock(obj.(*flock.Flock), s.opts)
}

// WarningsOnCreate returns no warnings; capacity warnings come from admission.
func (flockStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }

// AllowCreateOnUpdate is false: a PUT of a missing Flock is an error.
func (flockStrategy) AllowCreateOnUpdate(context.Context) bool { return false }

// AllowUnconditionalUpdate is true, as for built-in workloads.
func (flockStrategy) AllowUnconditionalUpdate(context.Context) bool { return true }

// Canonicalize does nothing: a Flock has no alternative forms.
func (flockStrategy) Canonicalize(obj runtime.Object) {}

// ValidateUpdate checks an update of the main resource.
func (s flockStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateFlockUpdate(obj.(*flock.Flock), old.(*flock.Flock), s.opts)
}

// WarningsOnUpdate returns no warnings.
func (flockStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

// flockStatusStrategy implements writes to flocks/status: only status changes.
type flockStatusStrategy struct {
	flockStrategy
}

// NewStatusStrategy returns the strategy of the status subresource.
func NewStatusStrategy(s flockStrategy) flockStatusStrategy { return flockStatusStrategy{s} }

// GetResetFields says which fields a status write never sets: spec and
// metadata other than what status writers may touch.
func (flockStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"flock.dev/v1alpha1": fieldpath.NewSet(
			fieldpath.MakePathOrDie("spec"),
			fieldpath.MakePathOrDie("metadata", "labels"),
			fieldpath.MakePathOrDie("metadata", "annotations"),
		),
	}
}

// PrepareForUpdate keeps the stored spec and metadata.
func (flockStatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newF, oldF := obj.(*flock.Flock), old.(*flock.Flock)
	newF.Spec = oldF.Spec // shared: nothing after this writes a spec
	metav1.ResetObjectMetaForStatus(newF, oldF)
}

// ValidateUpdate checks a status update.
func (flockStatusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateFlockStatusUpdate(obj.(*flock.Flock), old.(*flock.Flock))
}

// WarningsOnUpdate returns no warnings.
func (flockStatusStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

// GetAttrs returns the labels and fields of a Flock for selectors.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	f, ok := obj.(*flock.Flock)
	if !ok {
		return nil, nil, fmt.Errorf("not a Flock: %T", obj)
	}
	return f.Labels, SelectableFields(f), nil
}

// SelectableFields are the fields a field selector may use on Flocks: the
// name and namespace. The set returned is shared by every version of the
// Flock (selectableFieldSets) and must not be modified.
func SelectableFields(f *flock.Flock) fields.Set {
	return selectableFieldSets.get(f.Namespace, f.Name)
}

// selectableFieldSets holds one field set per Flock name. The watch cache
// asks for the field set of each version of a Flock it keeps, and kept a
// map of the same two fields for each (3 MiB after a burst of 1,000 x 3
// members, issue 17); now the versions share it.
var selectableFieldSets = &fieldSetTable{sets: map[string]fields.Set{}}

// maxSelectableFieldSets bounds fieldSetTable; when it is full it starts
// over (a set dropped from it stays valid where it is held).
const maxSelectableFieldSets = 16384

type fieldSetTable struct {
	mu   sync.RWMutex
	sets map[string]fields.Set
}

func (t *fieldSetTable) get(namespace, name string) fields.Set {
	key := namespace + "/" + name
	t.mu.RLock()
	set, ok := t.sets[key]
	t.mu.RUnlock()
	if ok {
		return set
	}
	set = generic.ObjectMetaFieldsSet(&metav1.ObjectMeta{Namespace: namespace, Name: name}, true)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.sets) >= maxSelectableFieldSets {
		clear(t.sets)
	}
	t.sets[key] = set
	return set
}

// MatchFlock returns a matcher for label and field selectors.
func MatchFlock(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}

package flock

import (
	"context"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/apis/flock/validation"
)

// Storage holds the REST storage of flocks and its subresources.
type Storage struct {
	Flock  *REST
	Status *StatusREST
	Scale  *ScaleREST
	Move   *MoveREST
}

// NewStorage returns the storage of flocks, flocks/status, flocks/scale and
// flocks/move. The watch cache's current object of each Flock is recorded
// in cached (nil: not recorded).
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, opts validation.Options, cached *CachedVersions) (Storage, error) {
	strategy := NewStrategy(scheme, opts)
	statusStrategy := NewStatusStrategy(strategy)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &flock.Flock{} },
		NewListFunc:               func() runtime.Object { return &flock.FlockList{} },
		PredicateFunc:             MatchFlock,
		DefaultQualifiedResource:  flock.Resource("flocks"),
		SingularQualifiedResource: flock.Resource("flock"),

		CreateStrategy:      strategy,
		UpdateStrategy:      strategy,
		DeleteStrategy:      strategy,
		ResetFieldsStrategy: strategy,

		TableConvertor: tableConvertor{},
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: withSharedVersions(optsGetter, cached), AttrFunc: GetAttrs}); err != nil {
		return Storage{}, err
	}
	statusStore := *store
	statusStore.UpdateStrategy = statusStrategy
	statusStore.ResetFieldsStrategy = statusStrategy
	return Storage{
		Flock:  &REST{store},
		Status: &StatusREST{store: &statusStore},
		Scale:  &ScaleREST{store: store},
		Move:   &MoveREST{store: &statusStore, now: metav1.Now},
	}, nil
}

// REST is the storage of the main flocks resource.
type REST struct {
	*genericregistry.Store
}

var (
	_ rest.StandardStorage    = &REST{}
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// ShortNames lets `kubectl get fl` work.
func (r *REST) ShortNames() []string { return []string{"fl"} }

// Categories puts Flocks in `kubectl get all`.
func (r *REST) Categories() []string { return []string{"all"} }

// StatusREST is the storage of flocks/status.
type StatusREST struct {
	store *genericregistry.Store
}

var (
	_ rest.Getter              = &StatusREST{}
	_ rest.Updater             = &StatusREST{}
	_ rest.Patcher             = &StatusREST{}
	_ rest.ResetFieldsStrategy = &StatusREST{}
)

// New returns an empty Flock.
func (r *StatusREST) New() runtime.Object { return &flock.Flock{} }

// Destroy does nothing: the store is shared with the main resource.
func (r *StatusREST) Destroy() {}

// Get returns the Flock.
func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update writes the status of a Flock and nothing else.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// Status writes never create a Flock.
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// GetResetFields says which fields a status write never sets.
func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

// ConvertToTable prints a Flock as the main resource does.
func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

// ScaleREST is the storage of flocks/scale: an autoscaling/v1 Scale whose
// spec.replicas is the Flock's and whose status.selector lets an HPA find the
// members.
type ScaleREST struct {
	store *genericregistry.Store
}

var (
	_ rest.Getter                   = &ScaleREST{}
	_ rest.Updater                  = &ScaleREST{}
	_ rest.Patcher                  = &ScaleREST{}
	_ rest.GroupVersionKindProvider = &ScaleREST{}
)

// GroupVersionKind is autoscaling/v1 Scale.
func (r *ScaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

// New returns an empty Scale.
func (r *ScaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }

// Destroy does nothing: the store is shared with the main resource.
func (r *ScaleREST) Destroy() {}

// Get returns the Scale of a Flock.
func (r *ScaleREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	return scaleFromFlock(obj.(*flock.Flock)), nil
}

// Update changes spec.replicas of a Flock through its Scale. Validation and
// admission see Scales, as they do for built-in workloads.
func (r *ScaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	obj, _, err := r.store.Update(ctx, name, &scaleUpdatedObjectInfo{name: name, reqObjInfo: objInfo},
		func(ctx context.Context, obj runtime.Object) error {
			return createValidation(ctx, scaleFromFlock(obj.(*flock.Flock)))
		},
		func(ctx context.Context, obj, old runtime.Object) error {
			return updateValidation(ctx, scaleFromFlock(obj.(*flock.Flock)), scaleFromFlock(old.(*flock.Flock)))
		},
		false, options)
	if err != nil {
		return nil, false, err
	}
	return scaleFromFlock(obj.(*flock.Flock)), false, nil
}

// ConvertToTable prints a Scale with the default columns.
func (r *ScaleREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return rest.NewDefaultTableConvertor(flock.Resource("flocks/scale")).ConvertToTable(ctx, object, tableOptions)
}

func scaleFromFlock(f *flock.Flock) *autoscalingv1.Scale {
	var replicas int32
	if f.Spec.Replicas != nil {
		replicas = *f.Spec.Replicas
	}
	selector := f.Status.Selector
	if selector == "" && f.Spec.Selector != nil {
		if s, err := metav1.LabelSelectorAsSelector(f.Spec.Selector); err == nil {
			selector = s.String()
		}
	}
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name:              f.Name,
			Namespace:         f.Namespace,
			UID:               f.UID,
			ResourceVersion:   f.ResourceVersion,
			CreationTimestamp: f.CreationTimestamp,
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: replicas},
		Status: autoscalingv1.ScaleStatus{Replicas: f.Status.Replicas, Selector: selector},
	}
}

// replicasPath is where a Scale's spec.replicas lives in a Flock.
var replicasPath = managedfields.ResourcePathMappings{
	v1alpha1.SchemeGroupVersion.String(): fieldpath.MakePathOrDie("spec", "replicas"),
}

// scaleUpdatedObjectInfo turns the stored Flock into a Scale, lets the
// request change that Scale, and writes the new replicas back into the Flock.
type scaleUpdatedObjectInfo struct {
	name       string
	reqObjInfo rest.UpdatedObjectInfo
}

func (i *scaleUpdatedObjectInfo) Preconditions() *metav1.Preconditions {
	return i.reqObjInfo.Preconditions()
}

func (i *scaleUpdatedObjectInfo) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
	f := oldObj.DeepCopyObject().(*flock.Flock)
	if f.ResourceVersion == "" {
		return nil, apierrors.NewNotFound(flock.Resource("flocks/scale"), i.name)
	}
	// The Scale carries the managers of the Flock's spec.replicas, so a
	// `kubectl scale` takes ownership of it and a later server-side apply of
	// another value by its former owner conflicts, as for built-in kinds.
	managed := managedfields.NewScaleHandler(f.ManagedFields, v1alpha1.SchemeGroupVersion, replicasPath)
	oldScale := scaleFromFlock(f)
	scaleManaged, err := managed.ToSubresource()
	if err != nil {
		return nil, err
	}
	oldScale.ManagedFields = scaleManaged
	obj, err := i.reqObjInfo.UpdatedObject(ctx, oldScale)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, apierrors.NewBadRequest("nil update passed to Scale")
	}
	scale, ok := obj.(*autoscalingv1.Scale)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected input object type to be Scale, but %T", obj))
	}
	if scale.Spec.Replicas < 0 {
		return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), i.name,
			[]*field.Error{field.Invalid(field.NewPath("spec", "replicas"), scale.Spec.Replicas, "must be greater than or equal to 0")})
	}
	replicas := scale.Spec.Replicas
	f.Spec.Replicas = &replicas
	// A conditional scale must carry the Flock's resourceVersion.
	f.ResourceVersion = scale.ResourceVersion
	if f.ManagedFields, err = managed.ToParent(scale.ManagedFields); err != nil {
		return nil, err
	}
	return f, nil
}

// This file checks what a Flock may not say about its members' identity: the
// label keys the controller owns, and template metadata beyond labels and
// annotations.

package validation

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// reservedLabelPrefix is the prefix of the label keys the controller sets on
// member pods (name, ordinal, pod name, node, cleanup helpers).
const reservedLabelPrefix = "flock.dev/"

// reservedLabelDetail says why a reserved key is refused.
const reservedLabelDetail = "reserved: the Flock controller sets flock.dev/* and " + v1alpha1.LabelRevision +
	" labels on member pods itself; select and label members with labels of your own"

// IsReservedLabelKey reports whether a label key is the controller's own:
// any flock.dev/ key, or the revision label controller-revision-hash.
func IsReservedLabelKey(key string) bool {
	return strings.HasPrefix(key, reservedLabelPrefix) || key == v1alpha1.LabelRevision
}

// validateSelectorReservedKeys refuses each reserved key of a selector, in
// matchLabels and in matchExpressions, one error per key.
func validateSelectorReservedKeys(sel *metav1.LabelSelector, selPath *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	var allErrs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
		if IsReservedLabelKey(k) {
			allErrs = append(allErrs, field.Invalid(selPath.Child("matchLabels").Key(k), k, reservedLabelDetail))
		}
	}
	for i, r := range sel.MatchExpressions {
		if IsReservedLabelKey(r.Key) {
			allErrs = append(allErrs, field.Invalid(selPath.Child("matchExpressions").Index(i).Child("key"), r.Key, reservedLabelDetail))
		}
	}
	return allErrs
}

// validateTemplateMetadata refuses reserved template label keys (one error
// per key) and every template metadata field other than labels and
// annotations: the controller names its pods and owns them. On update (old
// != nil) a key or field the old template already had is kept, so a Flock
// stored before this rule can still be scaled and deleted.
func validateTemplateMetadata(t, old *corev1.PodTemplateSpec, metaPath *field.Path) field.ErrorList {
	var oldMeta metav1.ObjectMeta
	if old != nil {
		oldMeta = old.ObjectMeta
	}
	var allErrs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(t.Labels)) {
		if _, had := oldMeta.Labels[k]; IsReservedLabelKey(k) && !had {
			allErrs = append(allErrs, field.Invalid(metaPath.Child("labels").Key(k), k, reservedLabelDetail))
		}
	}

	m := &t.ObjectMeta
	for _, f := range []struct {
		name     string
		set      bool
		new, old any
	}{
		{"name", m.Name != "", m.Name, oldMeta.Name},
		{"generateName", m.GenerateName != "", m.GenerateName, oldMeta.GenerateName},
		{"namespace", m.Namespace != "", m.Namespace, oldMeta.Namespace},
		{"uid", m.UID != "", m.UID, oldMeta.UID},
		{"resourceVersion", m.ResourceVersion != "", m.ResourceVersion, oldMeta.ResourceVersion},
		{"generation", m.Generation != 0, m.Generation, oldMeta.Generation},
		{"deletionTimestamp", m.DeletionTimestamp != nil, m.DeletionTimestamp, oldMeta.DeletionTimestamp},
		{"deletionGracePeriodSeconds", m.DeletionGracePeriodSeconds != nil, m.DeletionGracePeriodSeconds, oldMeta.DeletionGracePeriodSeconds},
		{"ownerReferences", len(m.OwnerReferences) > 0, m.OwnerReferences, oldMeta.OwnerReferences},
		{"finalizers", len(m.Finalizers) > 0, m.Finalizers, oldMeta.Finalizers},
		{"managedFields", len(m.ManagedFields) > 0, m.ManagedFields, oldMeta.ManagedFields},
	} {
		if f.set && (old == nil || !apiequality.Semantic.DeepEqual(f.new, f.old)) {
			allErrs = append(allErrs, field.Forbidden(metaPath.Child(f.name),
				"a pod template's metadata may hold only labels and annotations: the Flock controller names, owns and finalizes member pods"))
		}
	}
	return allErrs
}

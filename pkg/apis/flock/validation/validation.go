// Package validation checks Flocks, in their internal form, for the registry:
// field rules on create and update, immutable fields on update, and the rules
// of status writes. Every error carries the exact field path it is about.
package validation

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"flock.dev/flock/pkg/apis/flock"
)

const (
	// MaxReplicas is the largest spec.replicas: the Flock's status records
	// every member (status.members, with its managedFields), and the whole
	// object must stay well under etcd's 1.5 MiB request limit, or placement
	// could never be recorded. Measured (TestMaxReplicasStatusFits): a
	// member takes up to about 1.35 KB with the longest names, so 500
	// members take at most 43% of the limit, 1000 already 85%.
	MaxReplicas = 500

	// maxOrdinalSuffix is the length of "-<ordinal>" for the largest ordinal.
	maxOrdinalSuffix = 5

	// MaxNameLength is the longest Flock name. Member pods are named
	// <name>-<ordinal>, and a pod name (which is also its hostname) must be a
	// DNS-1123 label of at most 63 characters.
	MaxNameLength = utilvalidation.DNS1123LabelMaxLength - maxOrdinalSuffix

	// generatedSuffixLength is the number of random characters the API server
	// appends to metadata.generateName.
	generatedSuffixLength = 5

	// MaxGenerateNameLength is the longest metadata.generateName: the
	// generated name must still fit in MaxNameLength.
	MaxGenerateNameLength = MaxNameLength - generatedSuffixLength
)

// Options tune validation to the server's configuration.
type Options struct {
	// AllowHostAccess lets the pod template use the host's network, PID and
	// IPC namespaces, host ports and hostPath volumes. Only an explicit server
	// flag sets it.
	AllowHostAccess bool
}

var (
	validRetentionPolicies = []flock.RetentionPolicyType{
		flock.RetainRetentionPolicy, flock.DeleteRetentionPolicy,
	}
	validPodManagementPolicies = []flock.PodManagementPolicyType{
		flock.OrderedReadyPodManagement, flock.ParallelPodManagement,
	}
	validUpdateStrategyTypes = []flock.FlockUpdateStrategyType{
		flock.RollingUpdateFlockStrategyType, flock.OnDeleteFlockStrategyType,
	}
	validMemberRecoveryPolicies = []flock.MemberRecoveryPolicyType{
		flock.WaitMemberRecovery, flock.ReassignMemberRecovery,
	}
	validDisruptionBudgetPolicies = []flock.DisruptionBudgetPolicyType{
		flock.ManagedDisruptionBudget, flock.NoDisruptionBudget,
	}
)

// ValidateFlockName checks a Flock's metadata.name (prefix false) or
// metadata.generateName (prefix true). It is a ValidateNameFunc, usable as the
// registry's name validation: the name must be a DNS-1123 label short enough
// that every member pod name <name>-<ordinal> is a valid DNS-1123 label too.
func ValidateFlockName(name string, prefix bool) []string {
	limit := MaxNameLength
	if prefix {
		limit = MaxGenerateNameLength
	}
	var errs []string
	if len(name) > limit {
		if prefix {
			errs = append(errs, fmt.Sprintf("must be no more than %d characters, so that generated names leave room for member pod names <name>-<ordinal>", limit))
		} else {
			errs = append(errs, fmt.Sprintf("must be no more than %d characters, so that member pod names <name>-<ordinal> are valid DNS labels", limit))
		}
	}
	// The generic label check repeats the 63-character limit, which ours
	// already covers with a clearer message.
	generic := utilvalidation.MaxLenError(utilvalidation.DNS1123LabelMaxLength)
	for _, msg := range apimachineryvalidation.NameIsDNSLabel(name, prefix) {
		if msg != generic {
			errs = append(errs, msg)
		}
	}
	return errs
}

// ValidateFlock checks a Flock on create.
func ValidateFlock(f *flock.Flock, opts Options) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&f.ObjectMeta, true, ValidateFlockName, field.NewPath("metadata"))
	allErrs = append(allErrs, validateFlockSpec(f, nil, opts, field.NewPath("spec"))...)
	// The selector is immutable: an update keeps what create allowed.
	allErrs = append(allErrs, validateSelectorReservedKeys(specOf(f).Selector, field.NewPath("spec", "selector"))...)
	return allErrs
}

// noSpec stands for the spec of a Flock that has none (an internal object
// not decoded from a request or from storage); it is only read.
var noSpec = &flock.FlockSpec{}

// specOf returns f's spec, or an empty one when it has none.
func specOf(f *flock.Flock) *flock.FlockSpec {
	if f.Spec == nil {
		return noSpec
	}
	return f.Spec
}

// ValidateFlockUpdate checks an update of a Flock's metadata and spec. The
// name is not checked again (it cannot change). selector, serviceName,
// storage.volumeName, storage.size, storage.claimTemplate and
// podManagementPolicy are immutable. Host access that
// the old template already had may be kept, so that a Flock created while the
// server allowed host access can still be scaled, updated and deleted; it
// cannot be extended.
func ValidateFlockUpdate(newF, oldF *flock.Flock, opts Options) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&newF.ObjectMeta, &oldF.ObjectMeta, field.NewPath("metadata"))
	specPath := field.NewPath("spec")
	newSpec, oldSpec := specOf(newF), specOf(oldF)
	allErrs = append(allErrs, validateFlockSpec(newF, &oldSpec.Template, opts, specPath)...)

	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(newSpec.Selector, oldSpec.Selector, specPath.Child("selector"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(newSpec.ServiceName, oldSpec.ServiceName, specPath.Child("serviceName"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(newSpec.Storage.VolumeName, oldSpec.Storage.VolumeName, specPath.Child("storage", "volumeName"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(newSpec.Storage.Capacity, oldSpec.Storage.Capacity, specPath.Child("storage", "size"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(newSpec.Storage.ClaimTemplate, oldSpec.Storage.ClaimTemplate, specPath.Child("storage", "claimTemplate"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(newSpec.PodManagementPolicy, oldSpec.PodManagementPolicy, specPath.Child("podManagementPolicy"))...)
	return allErrs
}

// ValidateFlockStatusUpdate checks a write of a Flock's status: counts,
// members (the durable ordinal-to-node map) and conditions.
func ValidateFlockStatusUpdate(newF, oldF *flock.Flock) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&newF.ObjectMeta, &oldF.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateFlockStatus(newF, field.NewPath("status"))...)
	return allErrs
}

// validateFlockSpec checks f.Spec. oldTemplate is the template before an
// update, nil on create.
func validateFlockSpec(f *flock.Flock, oldTemplate *corev1.PodTemplateSpec, opts Options, fldPath *field.Path) field.ErrorList {
	spec := f.Spec
	if spec == nil {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList

	// replicas is known (and in range) when the checks that depend on it can run.
	replicas, replicasKnown := int32(0), false
	replicasPath := fldPath.Child("replicas")
	switch {
	case spec.Replicas == nil:
		allErrs = append(allErrs, field.Required(replicasPath, ""))
	case *spec.Replicas < 0:
		allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(*spec.Replicas), replicasPath)...)
	case *spec.Replicas > MaxReplicas:
		allErrs = append(allErrs, field.Invalid(replicasPath, *spec.Replicas,
			fmt.Sprintf("must be no more than %d: the status records every member, and a larger Flock's status could pass etcd's 1.5 MiB object limit", MaxReplicas)))
	default:
		replicas, replicasKnown = *spec.Replicas, true
	}

	allErrs = append(allErrs, validateSelector(spec, fldPath)...)

	snPath := fldPath.Child("serviceName")
	if spec.ServiceName == "" {
		// Empty only while the name is not known yet; the registry fills it.
		if f.Name != "" && f.GenerateName == "" {
			allErrs = append(allErrs, field.Required(snPath, "the name of the Flock's headless Service; defaults to metadata.name"))
		}
	} else {
		for _, msg := range utilvalidation.IsDNS1123Label(spec.ServiceName) {
			allErrs = append(allErrs, field.Invalid(snPath, spec.ServiceName, msg))
		}
	}

	allErrs = append(allErrs, validatePlacement(&spec.Placement, replicas, replicasKnown, fldPath.Child("placement"))...)
	allErrs = append(allErrs, validateStorage(&spec.Storage, fldPath.Child("storage"))...)
	allErrs = append(allErrs, validateEnum(spec.PodManagementPolicy, validPodManagementPolicies, fldPath.Child("podManagementPolicy"))...)
	allErrs = append(allErrs, validateUpdateStrategy(&spec.UpdateStrategy, fldPath.Child("updateStrategy"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	allErrs = append(allErrs, validateMemberRecovery(&spec.MemberRecovery, fldPath.Child("memberRecovery"))...)
	allErrs = append(allErrs, validateDisruptionBudget(&spec.DisruptionBudget, fldPath.Child("disruptionBudget"))...)
	if spec.RevisionHistoryLimit != nil {
		allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(*spec.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	allErrs = append(allErrs, validateTemplate(spec, oldTemplate, opts, fldPath.Child("template"))...)
	return allErrs
}

func validateSelector(spec *flock.FlockSpec, fldPath *field.Path) field.ErrorList {
	selPath := fldPath.Child("selector")
	if spec.Selector == nil {
		return field.ErrorList{field.Required(selPath, "")}
	}
	allErrs := metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, selPath)
	if len(spec.Selector.MatchLabels)+len(spec.Selector.MatchExpressions) == 0 {
		return append(allErrs, field.Invalid(selPath, spec.Selector, "empty selector is invalid for a Flock"))
	}
	if len(allErrs) != 0 {
		return allErrs
	}
	selector, err := metav1.LabelSelectorAsSelector(spec.Selector)
	if err != nil {
		return append(allErrs, field.Invalid(selPath, spec.Selector, err.Error()))
	}
	if !selector.Matches(labels.Set(spec.Template.Labels)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("template", "metadata", "labels"), spec.Template.Labels,
			"`selector` does not match template `labels`"))
	}
	return allErrs
}

func validatePlacement(p *flock.FlockPlacement, replicas int32, replicasKnown bool, fldPath *field.Path) field.ErrorList {
	allErrs := metav1validation.ValidateLabels(p.NodeSelector, fldPath.Child("nodeSelector"))

	nodesPath := fldPath.Child("nodes")
	first := make(map[string]int, len(p.Nodes))
	for i, node := range p.Nodes {
		idxPath := nodesPath.Index(i)
		if node == "" {
			allErrs = append(allErrs, field.Required(idxPath, "a node name"))
			continue
		}
		for _, msg := range utilvalidation.IsDNS1123Subdomain(node) {
			allErrs = append(allErrs, field.Invalid(idxPath, node, msg))
		}
		if j, dup := first[node]; dup {
			allErrs = append(allErrs, duplicate(idxPath, node,
				fmt.Sprintf("already listed as nodes[%d]; two members of a Flock never share a node", j)))
			continue
		}
		first[node] = i
	}
	if len(p.Nodes) > 0 && replicasKnown && len(p.Nodes) < int(replicas) {
		allErrs = append(allErrs, field.Invalid(nodesPath, p.Nodes,
			fmt.Sprintf("must list at least spec.replicas nodes (%d), but lists %d", replicas, len(p.Nodes))))
	}
	return allErrs
}

// MaxStorageMode is the largest spec.storage.mode: permission bits only, no
// setuid, setgid or sticky bit.
const MaxStorageMode = 0o777

func validateStorage(s *flock.FlockStorage, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	vnPath := fldPath.Child("volumeName")
	if s.VolumeName == "" {
		allErrs = append(allErrs, field.Required(vnPath, ""))
	} else {
		for _, msg := range utilvalidation.IsDNS1123Label(s.VolumeName) {
			allErrs = append(allErrs, field.Invalid(vnPath, s.VolumeName, msg))
		}
	}
	sizePath, modePath := fldPath.Child("size"), fldPath.Child("mode")
	if s.ClaimTemplate != nil {
		// Node-local data and claims from a StorageClass are two modes.
		const detail = "may not be set with spec.storage.claimTemplate: the claim template's resources.requests.storage is the size of a member's volume"
		if s.Capacity != "" {
			allErrs = append(allErrs, field.Forbidden(sizePath, detail))
		}
		if s.Mode != nil {
			allErrs = append(allErrs, field.Forbidden(modePath,
				"may not be set with spec.storage.claimTemplate: a provisioned volume's permissions follow the template's fsGroup"))
		}
		allErrs = append(allErrs, validateClaimTemplate(s.ClaimTemplate, fldPath.Child("claimTemplate"))...)
	} else {
		if s.Capacity == "" {
			allErrs = append(allErrs, field.Required(sizePath, "the capacity of each member's PersistentVolume, such as 1Gi"))
		} else if q, err := resource.ParseQuantity(s.Capacity); err != nil {
			allErrs = append(allErrs, field.Invalid(sizePath, s.Capacity, "must be a quantity such as 1Gi or 500Mi"))
		} else if q.Sign() <= 0 {
			allErrs = append(allErrs, field.Invalid(sizePath, s.Capacity, "must be greater than zero"))
		}
		if s.Mode != nil && (*s.Mode < 0 || *s.Mode > MaxStorageMode) {
			allErrs = append(allErrs, field.Invalid(modePath, *s.Mode,
				fmt.Sprintf("must be permission bits from 0 to 0777 (octal; %d decimal)", MaxStorageMode)))
		}
	}
	retPath := fldPath.Child("retention")
	allErrs = append(allErrs, validateEnum(s.Retention.WhenDeleted, validRetentionPolicies, retPath.Child("whenDeleted"))...)
	allErrs = append(allErrs, validateEnum(s.Retention.WhenScaled, validRetentionPolicies, retPath.Child("whenScaled"))...)
	return allErrs
}

// validateClaimTemplate checks what the controller relies on in a claim
// template; kube-apiserver validates each claim in full when it is created.
func validateClaimTemplate(ct *corev1.PersistentVolumeClaimTemplate, fldPath *field.Path) field.ErrorList {
	metaPath := fldPath.Child("metadata")
	allErrs := metav1validation.ValidateLabels(ct.Labels, metaPath.Child("labels"))
	allErrs = append(allErrs, apimachineryvalidation.ValidateAnnotations(ct.Annotations, metaPath.Child("annotations"))...)
	if ct.Name != "" || ct.GenerateName != "" {
		allErrs = append(allErrs, field.Forbidden(metaPath.Child("name"),
			"members' claims are named <spec.storage.volumeName>-<flock>-<ordinal>"))
	}
	if ct.Namespace != "" {
		allErrs = append(allErrs, field.Forbidden(metaPath.Child("namespace"), "members' claims are in the Flock's namespace"))
	}

	specPath := fldPath.Child("spec")
	spec := &ct.Spec
	if len(spec.AccessModes) == 0 {
		allErrs = append(allErrs, field.Required(specPath.Child("accessModes"), "at least one access mode, such as ReadWriteOnce"))
	}
	storagePath := specPath.Child("resources", "requests").Key(string(corev1.ResourceStorage))
	if q, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		allErrs = append(allErrs, field.Required(storagePath, "the size of each member's volume, such as 1Gi"))
	} else if q.Sign() <= 0 {
		allErrs = append(allErrs, field.Invalid(storagePath, q.String(), "must be greater than zero"))
	}
	if spec.VolumeName != "" {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("volumeName"),
			"each member's claim is bound to its own volume; a template cannot name one"))
	}
	if sc := spec.StorageClassName; sc != nil {
		if *sc == "" {
			allErrs = append(allErrs, field.Invalid(specPath.Child("storageClassName"), *sc,
				"must name a StorageClass, or be left out to use the cluster's default StorageClass: a claim without a class is never provisioned"))
		} else {
			for _, msg := range utilvalidation.IsDNS1123Subdomain(*sc) {
				allErrs = append(allErrs, field.Invalid(specPath.Child("storageClassName"), *sc, msg))
			}
		}
	}
	return allErrs
}

func validateUpdateStrategy(us *flock.FlockUpdateStrategy, fldPath *field.Path) field.ErrorList {
	allErrs := validateEnum(us.Type, validUpdateStrategyTypes, fldPath.Child("type"))
	ru := us.RollingUpdate
	if ru == nil {
		return allErrs
	}
	ruPath := fldPath.Child("rollingUpdate")
	if us.Type == flock.OnDeleteFlockStrategyType {
		return append(allErrs, field.Forbidden(ruPath,
			fmt.Sprintf("may only be set when updateStrategy.type is '%s'", flock.RollingUpdateFlockStrategyType)))
	}
	if ru.Partition != nil {
		pPath := ruPath.Child("partition")
		// As for StatefulSets, a partition at or above replicas is allowed:
		// no member is updated. An upper bound would make `kubectl scale` or
		// an HPA fail below the partition.
		allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(*ru.Partition), pPath)...)
	}
	if ru.MaxUnavailable != nil {
		allErrs = append(allErrs, validateMaxUnavailable(*ru.MaxUnavailable, ruPath.Child("maxUnavailable"))...)
	}
	return allErrs
}

// validateMaxUnavailable accepts an integer of at least 1 or a percentage
// from 1% to 100%.
func validateMaxUnavailable(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	switch v.Type {
	case intstr.Int:
		if v.IntVal < 1 {
			return field.ErrorList{field.Invalid(fldPath, v.IntVal, "must be at least 1")}
		}
	case intstr.String:
		if len(utilvalidation.IsValidPercent(v.StrVal)) != 0 {
			return field.ErrorList{field.Invalid(fldPath, v.StrVal, "must be an integer or a percentage such as '25%'")}
		}
		if n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%")); err != nil || n < 1 || n > 100 {
			return field.ErrorList{field.Invalid(fldPath, v.StrVal, "must be a percentage from 1% to 100%")}
		}
	default:
		return field.ErrorList{field.Invalid(fldPath, v, "must be an integer or a percentage such as '25%'")}
	}
	return nil
}

func validateDisruptionBudget(db *flock.FlockDisruptionBudget, fldPath *field.Path) field.ErrorList {
	allErrs := validateEnum(db.Policy, validDisruptionBudgetPolicies, fldPath.Child("policy"))
	if db.MaxUnavailable == nil {
		return allErrs
	}
	muPath := fldPath.Child("maxUnavailable")
	if db.Policy == flock.NoDisruptionBudget {
		return append(allErrs, field.Forbidden(muPath, fmt.Sprintf("may only be set when policy is '%s'", flock.ManagedDisruptionBudget)))
	}
	return append(allErrs, validateMaxUnavailable(*db.MaxUnavailable, muPath)...)
}

func validateMemberRecovery(mr *flock.MemberRecovery, fldPath *field.Path) field.ErrorList {
	allErrs := validateEnum(mr.Policy, validMemberRecoveryPolicies, fldPath.Child("policy"))
	asPath := fldPath.Child("afterSeconds")
	switch mr.Policy {
	case flock.ReassignMemberRecovery:
		if mr.AfterSeconds == nil {
			allErrs = append(allErrs, field.Required(asPath, fmt.Sprintf("required when policy is '%s'", flock.ReassignMemberRecovery)))
		} else if *mr.AfterSeconds <= 0 {
			allErrs = append(allErrs, field.Invalid(asPath, *mr.AfterSeconds, "must be greater than 0"))
		}
	case flock.WaitMemberRecovery:
		if mr.AfterSeconds != nil {
			allErrs = append(allErrs, field.Forbidden(asPath, fmt.Sprintf("may only be set when policy is '%s'", flock.ReassignMemberRecovery)))
		}
	}
	return allErrs
}

// validateTemplate checks what the controller relies on in the pod template,
// and the security rules. It is not a full pod validation: the core cluster
// validates each member pod when the controller creates it.
func validateTemplate(spec *flock.FlockSpec, old *corev1.PodTemplateSpec, opts Options, fldPath *field.Path) field.ErrorList {
	t := &spec.Template
	metaPath := fldPath.Child("metadata")
	allErrs := metav1validation.ValidateLabels(t.Labels, metaPath.Child("labels"))
	allErrs = append(allErrs, validateTemplateMetadata(t, old, metaPath)...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateAnnotations(t.Annotations, metaPath.Child("annotations"))...)

	specPath := fldPath.Child("spec")
	ps := &t.Spec

	// Containers: names are unique across init and regular containers.
	names := map[string]*field.Path{}
	allErrs = append(allErrs, validateContainers(ps.InitContainers, specPath.Child("initContainers"), names)...)
	if len(ps.Containers) == 0 {
		allErrs = append(allErrs, field.Required(specPath.Child("containers"), "at least one container is required"))
	}
	allErrs = append(allErrs, validateContainers(ps.Containers, specPath.Child("containers"), names)...)
	if len(ps.EphemeralContainers) != 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set in a pod template"))
	}

	if ps.NodeName != "" {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("nodeName"),
			"the Flock controller pins each member to its node; use spec.placement to choose nodes"))
	}
	if ps.RestartPolicy != "" && ps.RestartPolicy != corev1.RestartPolicyAlways {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("restartPolicy"), ps.RestartPolicy,
			[]corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if ps.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("activeDeadlineSeconds"), "members run until they are removed"))
	}

	// Volumes: the managed data volume's name is reserved.
	volPath := specPath.Child("volumes")
	volumes := make(map[string]int, len(ps.Volumes))
	for i := range ps.Volumes {
		v := &ps.Volumes[i]
		namePath := volPath.Index(i).Child("name")
		switch {
		case v.Name == "":
			allErrs = append(allErrs, field.Required(namePath, ""))
		case spec.Storage.VolumeName != "" && v.Name == spec.Storage.VolumeName:
			allErrs = append(allErrs, field.Invalid(namePath, v.Name,
				"must not be spec.storage.volumeName: the Flock controller adds that volume (the member's data directory) to every member"))
		default:
			for _, msg := range utilvalidation.IsDNS1123Label(v.Name) {
				allErrs = append(allErrs, field.Invalid(namePath, v.Name, msg))
			}
			if j, dup := volumes[v.Name]; dup {
				allErrs = append(allErrs, duplicate(namePath, v.Name, fmt.Sprintf("already the name of volumes[%d]", j)))
			} else {
				volumes[v.Name] = i
			}
		}
	}

	// Volume mounts refer to a template volume or to the data volume.
	for _, cs := range containerLists(ps, specPath) {
		for i := range cs.list {
			for j, m := range cs.list[i].VolumeMounts {
				if _, ok := volumes[m.Name]; ok || (m.Name != "" && m.Name == spec.Storage.VolumeName) {
					continue
				}
				e := field.NotFound(cs.path.Index(i).Child("volumeMounts").Index(j).Child("name"), m.Name)
				e.Detail = "must be the name of a volume in spec.template.spec.volumes or spec.storage.volumeName"
				allErrs = append(allErrs, e)
			}
		}
	}

	if !opts.AllowHostAccess {
		allErrs = append(allErrs, validateNoHostAccess(ps, old, specPath)...)
	}
	return allErrs
}

func validateContainers(containers []corev1.Container, fldPath *field.Path, names map[string]*field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i := range containers {
		c := &containers[i]
		idxPath := fldPath.Index(i)
		namePath := idxPath.Child("name")
		if c.Name == "" {
			allErrs = append(allErrs, field.Required(namePath, ""))
		} else {
			for _, msg := range utilvalidation.IsDNS1123Label(c.Name) {
				allErrs = append(allErrs, field.Invalid(namePath, c.Name, msg))
			}
			if firstPath, dup := names[c.Name]; dup {
				allErrs = append(allErrs, duplicate(namePath, c.Name, "already the name of "+firstPath.String()))
			} else {
				names[c.Name] = namePath
			}
		}
		imagePath := idxPath.Child("image")
		if c.Image == "" {
			allErrs = append(allErrs, field.Required(imagePath, ""))
		} else if strings.TrimSpace(c.Image) != c.Image {
			allErrs = append(allErrs, field.Invalid(imagePath, c.Image, "must not have leading or trailing whitespace"))
		}
	}
	return allErrs
}

const hostAccessHint = "members use the pod network and keep their data in the managed data volume; host access needs a server started with host access allowed"

// validateNoHostAccess forbids the host's namespaces, host ports and hostPath
// volumes. On update (old != nil) what the old template already had may be
// kept unchanged.
func validateNoHostAccess(ps *corev1.PodSpec, old *corev1.PodTemplateSpec, specPath *field.Path) field.ErrorList {
	var oldSpec corev1.PodSpec
	if old != nil {
		oldSpec = old.Spec
	}
	var allErrs field.ErrorList
	for _, ns := range []struct {
		name     string
		new, old bool
	}{
		{"hostNetwork", ps.HostNetwork, oldSpec.HostNetwork},
		{"hostPID", ps.HostPID, oldSpec.HostPID},
		{"hostIPC", ps.HostIPC, oldSpec.HostIPC},
	} {
		if ns.new && !ns.old {
			allErrs = append(allErrs, field.Forbidden(specPath.Child(ns.name), "not allowed: "+hostAccessHint))
		}
	}

	for i := range ps.Volumes {
		v := &ps.Volumes[i]
		if v.HostPath == nil || hasHostPathVolume(&oldSpec, v) {
			continue
		}
		allErrs = append(allErrs, field.Forbidden(specPath.Child("volumes").Index(i).Child("hostPath"),
			"hostPath volumes are not allowed: "+hostAccessHint))
	}

	oldHostPorts := map[corev1.ContainerPort]bool{}
	for _, cs := range [][]corev1.Container{oldSpec.InitContainers, oldSpec.Containers} {
		for i := range cs {
			for _, p := range cs[i].Ports {
				if p.HostPort != 0 {
					oldHostPorts[hostPortKey(p)] = true
				}
			}
		}
	}
	for _, cs := range containerLists(ps, specPath) {
		for i := range cs.list {
			for j, p := range cs.list[i].Ports {
				if p.HostPort == 0 || oldHostPorts[hostPortKey(p)] {
					continue
				}
				allErrs = append(allErrs, field.Forbidden(cs.path.Index(i).Child("ports").Index(j).Child("hostPort"),
					"host ports are not allowed: "+hostAccessHint))
			}
		}
	}
	return allErrs
}

// hostPortKey identifies a host port binding.
func hostPortKey(p corev1.ContainerPort) corev1.ContainerPort {
	return corev1.ContainerPort{HostPort: p.HostPort, HostIP: p.HostIP, Protocol: p.Protocol}
}

// hasHostPathVolume reports whether spec has a volume equal to v (same name,
// same hostPath).
func hasHostPathVolume(spec *corev1.PodSpec, v *corev1.Volume) bool {
	for i := range spec.Volumes {
		o := &spec.Volumes[i]
		if o.Name == v.Name && o.HostPath != nil && apiequality.Semantic.DeepEqual(o.HostPath, v.HostPath) {
			return true
		}
	}
	return false
}

func validateFlockStatus(f *flock.Flock, fldPath *field.Path) field.ErrorList {
	s := &f.Status
	var allErrs field.ErrorList
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(s.ObservedGeneration, fldPath.Child("observedGeneration"))...)
	for _, c := range []struct {
		name  string
		value int32
	}{
		{"replicas", s.Replicas},
		{"readyReplicas", s.ReadyReplicas},
		{"availableReplicas", s.AvailableReplicas},
		{"currentReplicas", s.CurrentReplicas},
		{"updatedReplicas", s.UpdatedReplicas},
	} {
		allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(c.value), fldPath.Child(c.name))...)
		if c.name != "replicas" && s.Replicas >= 0 && c.value > s.Replicas {
			allErrs = append(allErrs, field.Invalid(fldPath.Child(c.name), c.value, "must be no more than status.replicas"))
		}
	}
	if s.ReadyReplicas >= 0 && s.AvailableReplicas > s.ReadyReplicas {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("availableReplicas"), s.AvailableReplicas, "must be no more than status.readyReplicas"))
	}

	if s.Selector != "" {
		if _, err := labels.Parse(s.Selector); err != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("selector"), s.Selector, err.Error()))
		}
	}

	membersPath := fldPath.Child("members")
	ordinals := make(map[int32]int, len(s.Members))
	nodes := make(map[string]int32, len(s.Members))
	for i := range s.Members {
		m := &s.Members[i]
		idxPath := membersPath.Index(i)

		ordPath := idxPath.Child("ordinal")
		ordinalOK := false
		switch {
		case m.Ordinal < 0:
			allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(m.Ordinal), ordPath)...)
		case m.Ordinal >= MaxReplicas:
			allErrs = append(allErrs, field.Invalid(ordPath, m.Ordinal, fmt.Sprintf("must be less than %d", MaxReplicas)))
		default:
			if j, dup := ordinals[m.Ordinal]; dup {
				allErrs = append(allErrs, duplicate(ordPath, m.Ordinal, fmt.Sprintf("already the ordinal of members[%d]", j)))
			} else {
				ordinals[m.Ordinal] = i
				ordinalOK = true
			}
		}

		nodePath := idxPath.Child("node")
		if errs := validateNodeName(m.Node, nodePath, "the node this member is assigned to"); len(errs) > 0 {
			allErrs = append(allErrs, errs...)
		}
		if m.Node != "" {
			if other, dup := nodes[m.Node]; dup {
				allErrs = append(allErrs, duplicate(nodePath, m.Node,
					fmt.Sprintf("member %d is already on this node; two members of a Flock never share a node", other)))
			} else {
				nodes[m.Node] = m.Ordinal
			}
		}

		allErrs = append(allErrs, validateMemberMove(m.Move, idxPath.Child("move"))...)
		if m.Pod != "" && ordinalOK {
			if want := fmt.Sprintf("%s-%d", f.Name, m.Ordinal); m.Pod != want {
				allErrs = append(allErrs, field.Invalid(idxPath.Child("pod"), m.Pod, fmt.Sprintf("must be %q (<name>-<ordinal>)", want)))
			}
		}
		for _, name := range []struct {
			field, value string
		}{{"hostname", m.Hostname}, {"persistentVolume", m.PersistentVolume}, {"claim", m.Claim}} {
			if name.value == "" {
				continue
			}
			for _, msg := range utilvalidation.IsDNS1123Subdomain(name.value) {
				allErrs = append(allErrs, field.Invalid(idxPath.Child(name.field), name.value, msg))
			}
		}
	}

	allErrs = append(allErrs, metav1validation.ValidateConditions(s.Conditions, fldPath.Child("conditions"))...)
	return allErrs
}

// validateEnum requires v to be one of valid.
func validateEnum[T ~string](v T, valid []T, fldPath *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if !slices.Contains(valid, v) {
		return field.ErrorList{field.NotSupported(fldPath, v, valid)}
	}
	return nil
}

// duplicate is field.Duplicate with an explanation.
func duplicate(fldPath *field.Path, value interface{}, detail string) *field.Error {
	e := field.Duplicate(fldPath, value)
	e.Detail = detail
	return e
}

// containerList is one of a pod spec's container lists with its field path.
type containerList struct {
	list []corev1.Container
	path *field.Path
}

// containerLists returns the init containers and the containers of ps.
func containerLists(ps *corev1.PodSpec, specPath *field.Path) []containerList {
	return []containerList{
		{ps.InitContainers, specPath.Child("initContainers")},
		{ps.Containers, specPath.Child("containers")},
	}
}

package flock

// memberdata.go builds, without any client, the objects that hold a member's
// data: the flock-local StorageClass, a member's hostPath PersistentVolume
// and its pre-bound PersistentVolumeClaim (or a claim from
// spec.storage.claimTemplate) and the volume a member pod mounts (the helper
// pods that prepare and remove a directory are in helper_pod.go). It also
// says when an existing PersistentVolume or claim of the expected name
// belongs to something else.

import (
	"fmt"
	"maps"
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/nodeagent"
)

// Names, labels and defaults of member data.
const (
	// LocalStorageClassName is the StorageClass of node-local member data:
	// no provisioner, WaitForFirstConsumer. The server installs it.
	LocalStorageClassName = "flock-local"
	// noProvisioner is the provisioner of a StorageClass whose volumes are
	// made by hand (here: by the Flock controller).
	noProvisioner = "kubernetes.io/no-provisioner"

	// LabelFlockNamespace is the namespace of the Flock a PersistentVolume
	// or helper pod belongs to (PersistentVolumes have no namespace).
	LabelFlockNamespace = "flock.dev/namespace"
	// LabelFlockUID is the UID of the Flock a PersistentVolume, claim or
	// helper pod belongs to: names can be reused, UIDs cannot.
	LabelFlockUID = nodeagent.LabelFlockUID
	// LabelHelper marks a helper pod with its job: HelperPrepare or
	// HelperCleanup.
	LabelHelper = "flock.dev/helper"
	// HelperPrepare is the job of a helper that creates a member's data
	// directory with its owner and mode.
	HelperPrepare = "prepare"
	// HelperCleanup is the job of a helper that removes a member's data
	// directory under the Delete retention policy.
	HelperCleanup = "cleanup"
	// AnnotationPrepared on a member's PersistentVolume records that its
	// directory was prepared (owner and mode set), so it is done once.
	AnnotationPrepared = nodeagent.AnnotationPrepared
	// AnnotationRemoved on a member's PersistentVolume records that its
	// directory was removed (Delete retention), before the claim and the
	// volume are deleted.
	AnnotationRemoved = nodeagent.AnnotationRemoved

	// DefaultHelperNamespace is the namespace of helper pods when
	// Options.HelperNamespace is empty: the server's own.
	DefaultHelperNamespace = "flock-system"

	// hostnameLabel is the node label a PersistentVolume's node affinity
	// matches (the scheduler checks a volume's affinity against node labels
	// only, not node names).
	hostnameLabel = corev1.LabelHostname

	// helperMountPath is where a helper mounts the directory it works on.
	helperMountPath = "/flock-data"
	// uidPrefixLength is how much of a Flock's UID keys its data directory.
	uidPrefixLength = 8
)

// PersistentVolumeName returns the name of member ordinal's node-local
// PersistentVolume: flock-<flock UID>-<ordinal>.
func PersistentVolumeName(uid types.UID, ordinal int32) string {
	return "flock-" + string(uid) + "-" + strconv.FormatInt(int64(ordinal), 10)
}

// ClaimName returns the name of member ordinal's PersistentVolumeClaim,
// <volumeName>-<flock>-<ordinal>, as a StatefulSet names its claims.
func ClaimName(f *v1alpha1.Flock, ordinal int32) string {
	return volumeNameOf(f) + "-" + PodName(f.Name, ordinal)
}

// usesClaimTemplate reports whether f's members get claims from
// spec.storage.claimTemplate rather than node-local PersistentVolumes.
func usesClaimTemplate(f *v1alpha1.Flock) bool {
	return f.Spec.Storage.ClaimTemplate != nil
}

// MemberDataDir returns the host directory of Flock f's members on their
// nodes: <dataRoot>/<namespace>/<flock>-<first 8 characters of its UID>.
// Keyed by UID, a later Flock of the same name never sees old data.
func MemberDataDir(dataRoot string, f *v1alpha1.Flock) string {
	uid := string(f.UID)
	if len(uid) > uidPrefixLength {
		uid = uid[:uidPrefixLength]
	}
	return path.Join(dataRoot, f.Namespace, f.Name+"-"+uid)
}

// storageSize returns spec.storage.size as a quantity, 1Gi when it is unset
// or (for an object validation did not see) unparsable.
func storageSize(f *v1alpha1.Flock) resource.Quantity {
	if q, err := resource.ParseQuantity(f.Spec.Storage.Capacity); err == nil && q.Sign() > 0 {
		return q
	}
	return resource.MustParse(v1alpha1.DefaultStorageSize)
}

// storageMode returns spec.storage.mode, 0770 when unset.
func storageMode(f *v1alpha1.Flock) int32 {
	if m := f.Spec.Storage.Mode; m != nil {
		return *m & 0o777
	}
	return v1alpha1.DefaultStorageMode
}

// dataOwner returns the owner and group of a member's data directory: the
// template's pod-level runAsUser, and its fsGroup (else its runAsGroup);
// root for what is unset.
func dataOwner(f *v1alpha1.Flock) (uid, gid int64) {
	sc := f.Spec.Template.Spec.SecurityContext
	if sc == nil {
		return 0, 0
	}
	if sc.RunAsUser != nil {
		uid = *sc.RunAsUser
	}
	switch {
	case sc.FSGroup != nil:
		gid = *sc.FSGroup
	case sc.RunAsGroup != nil:
		gid = *sc.RunAsGroup
	}
	return uid, gid
}

// dataLabels are the labels of a member's PersistentVolume and claim: the
// Flock's name, namespace and UID, and the ordinal.
func dataLabels(f *v1alpha1.Flock, ordinal int32) map[string]string {
	return map[string]string{
		v1alpha1.LabelFlockName: f.Name,
		LabelFlockNamespace:     f.Namespace,
		LabelFlockUID:           string(f.UID),
		v1alpha1.LabelOrdinal:   strconv.FormatInt(int64(ordinal), 10),
	}
}

// NodeHostname returns the value of a node's kubernetes.io/hostname label,
// which a member's PersistentVolume is pinned to, or the node's name when it
// has no such label.
func NodeHostname(node *corev1.Node) string {
	if h := node.Labels[hostnameLabel]; h != "" {
		return h
	}
	return node.Name
}

// NewLocalStorageClass returns the flock-local StorageClass that node-local
// member volumes belong to: no provisioner (the controller makes the
// volumes), binding when a pod is scheduled, volumes retained.
func NewLocalStorageClass() *storagev1.StorageClass {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	retain := corev1.PersistentVolumeReclaimRetain
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:   LocalStorageClassName,
			Labels: map[string]string{"app.kubernetes.io/managed-by": FieldManager},
		},
		Provisioner:       noProvisioner,
		VolumeBindingMode: &wait,
		ReclaimPolicy:     &retain,
	}
}

// NewMemberVolume returns member m's node-local PersistentVolume: a hostPath
// directory MemberDataDir (created if absent) on the node whose
// kubernetes.io/hostname label is hostname, with a required node affinity to
// it, retained when released, of spec.storage.size, in the flock-local
// StorageClass, and bound to the member's claim, whose UID is claimUID (the
// claim is made first; see completeBind). Its annotations ask the node agent
// of m's node, if there is one, to prepare the directory with the owner and
// mode a prepare helper would give it (pkg/nodeagent).
func NewMemberVolume(f *v1alpha1.Flock, m v1alpha1.FlockMember, hostname, dataRoot string, claimUID types.UID) *corev1.PersistentVolume {
	hostPathType := corev1.HostPathDirectoryOrCreate
	uid, gid := dataOwner(f)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:   PersistentVolumeName(f.UID, m.Ordinal),
			Labels: dataLabels(f, m.Ordinal),
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: storageSize(f)},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: MemberDataDir(dataRoot, f),
				Type: &hostPathType,
			}},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              LocalStorageClassName,
			VolumeMode:                    ptr.To(corev1.PersistentVolumeFilesystem),
			ClaimRef: &corev1.ObjectReference{
				APIVersion: "v1",
				Kind:       "PersistentVolumeClaim",
				Namespace:  f.Namespace,
				Name:       ClaimName(f, m.Ordinal),
				UID:        claimUID,
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: hostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{hostname},
				}}}},
			}},
		},
	}
	nodeagent.SetRequest(pv, m.Node, uid, gid, storageMode(f))
	return pv
}

// NewMemberClaim returns member ordinal's PersistentVolumeClaim, owned by f.
// For node-local data it asks for the volume named volumeName (pre-bound,
// flock-local, spec.storage.size); with a claim template it is made from the
// template, as a StatefulSet's claims are, and volumeName is ignored.
func NewMemberClaim(f *v1alpha1.Flock, ordinal int32, volumeName string) *corev1.PersistentVolumeClaim {
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ClaimName(f, ordinal),
			Namespace:       f.Namespace,
			OwnerReferences: []metav1.OwnerReference{*newControllerRef(f)},
		},
	}
	if ct := f.Spec.Storage.ClaimTemplate; ct != nil {
		claim.Labels = make(map[string]string, len(ct.Labels)+4)
		maps.Copy(claim.Labels, ct.Labels)
		claim.Annotations = maps.Clone(ct.Annotations)
		claim.Spec = *ct.Spec.DeepCopy()
		claim.Spec.VolumeName = ""
	} else {
		claim.Labels = make(map[string]string, 4)
		claim.Spec = corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(LocalStorageClassName),
			VolumeName:       volumeName,
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: storageSize(f),
			}},
		}
	}
	maps.Copy(claim.Labels, dataLabels(f, ordinal))
	return claim
}

// memberDataVolume returns the volume member ordinal's pod mounts its data
// from: its claim, under spec.storage.volumeName.
func memberDataVolume(f *v1alpha1.Flock, ordinal int32) corev1.Volume {
	return corev1.Volume{
		Name: volumeNameOf(f),
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: ClaimName(f, ordinal),
		}},
	}
}

// volumeConflict says why an existing PersistentVolume named like member
// ordinal's node-local volume is not that volume ("" when it is): it must
// carry the Flock's UID and the ordinal, and be pre-bound to the member's
// claim.
func volumeConflict(f *v1alpha1.Flock, ordinal int32, pv *corev1.PersistentVolume) string {
	want := dataLabels(f, ordinal)
	if pv.Labels[LabelFlockUID] != want[LabelFlockUID] || pv.Labels[v1alpha1.LabelOrdinal] != want[v1alpha1.LabelOrdinal] {
		return fmt.Sprintf("PersistentVolume %s exists and is not member %d's of this Flock (UID %s)", pv.Name, ordinal, f.UID)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != f.Namespace || ref.Name != ClaimName(f, ordinal) {
		return fmt.Sprintf("PersistentVolume %s is not reserved for claim %s/%s", pv.Name, f.Namespace, ClaimName(f, ordinal))
	}
	return ""
}

// claimConflict says why an existing claim named like member ordinal's is
// not that claim ("" when it is): it must be controlled by f (by UID) and,
// for node-local data, ask for the member's PersistentVolume.
func claimConflict(f *v1alpha1.Flock, ordinal int32, claim *corev1.PersistentVolumeClaim) string {
	if !isControlledBy(claim, f) {
		return fmt.Sprintf("PersistentVolumeClaim %s/%s exists and is not controlled by this Flock", claim.Namespace, claim.Name)
	}
	if !usesClaimTemplate(f) {
		if want := PersistentVolumeName(f.UID, ordinal); claim.Spec.VolumeName != want {
			return fmt.Sprintf("PersistentVolumeClaim %s/%s asks for volume %q, not %s", claim.Namespace, claim.Name, claim.Spec.VolumeName, want)
		}
	}
	return ""
}

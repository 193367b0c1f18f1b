// File cleanup_pod.go: the data-cleanup helper pod that empties a member's data directory
// under the Delete retention policy. Pure.

package flock

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

const (
	// LabelCleanupOf labels the data-cleanup helper pods of a Flock with the
	// Flock's name.
	LabelCleanupOf = "flock.dev/cleanup-of"

	// cleanupMountPath is where a cleanup helper mounts the data directory.
	cleanupMountPath = "/flock-data"
)

// cleanupScript removes everything in the mounted data directory (not the
// directory itself, which is the mount point), hidden entries included.
const cleanupScript = "rm -rf -- " + cleanupMountPath + "/* " + cleanupMountPath + "/.[!.]* " + cleanupMountPath + "/..?*"

// NewCleanupPod returns the short helper pod that empties Flock f's data
// directory <dataRoot>/<namespace>/<flock> on member m's node, under the
// Delete retention policy. It is bound to the node by spec.nodeName (the
// scheduler is not involved, so a cordoned node is reached too) and
// tolerates every taint; it mounts only that directory, runs image once
// (restartPolicy Never) and carries a non-controller ownerReference to f, so
// it never counts as a member and is collected with the Flock.
func NewCleanupPod(f *v1alpha1.Flock, m v1alpha1.FlockMember, image, dataRoot string) *corev1.Pod {
	hostPathType := corev1.HostPathDirectoryOrCreate
	no, root := false, int64(0)
	owner := metav1.OwnerReference{
		APIVersion: controllerKind.GroupVersion().String(), Kind: controllerKind.Kind,
		Name: f.Name, UID: f.UID, BlockOwnerDeletion: &no,
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            CleanupPodName(f.Name, m.Ordinal),
			Namespace:       f.Namespace,
			Labels:          map[string]string{LabelCleanupOf: f.Name},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: corev1.PodSpec{
			NodeName:                     m.Node,
			RestartPolicy:                corev1.RestartPolicyNever,
			Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			Containers: []corev1.Container{{
				Name:    "cleanup",
				Image:   image,
				Command: []string{"sh", "-c", cleanupScript},
				VolumeMounts: []corev1.VolumeMount{{
					Name: "data", MountPath: cleanupMountPath,
				}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("10m"),
						corev1.ResourceMemory: resource.MustParse("16Mi"),
					},
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				SecurityContext: &corev1.SecurityContext{
					// Root, with just the capabilities to remove files of any
					// owner and mode.
					RunAsUser:                &root,
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities: &corev1.Capabilities{
						Drop: []corev1.Capability{"ALL"},
						Add:  []corev1.Capability{"DAC_OVERRIDE", "FOWNER"},
					},
				},
			}},
			Volumes: []corev1.Volume{{
				Name: "data",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: DataPath(dataRoot, f.Namespace, f.Name),
					Type: &hostPathType,
				}},
			}},
		},
	}
}

package flock

// helper_pod.go builds, without any client, the short helper pods that
// prepare and remove a member's node-local data directory in the server's
// own namespace, and recognizes them by the Flock's UID.

import (
	"fmt"
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// HelperPodName returns the name of the helper pod with job (HelperPrepare
// or HelperCleanup) for member ordinal of the Flock with the given UID:
// flock-<job>-<uid>-<ordinal>. Named by UID, it is unique across namespaces.
func HelperPodName(job string, uid types.UID, ordinal int32) string {
	return "flock-" + job + "-" + string(uid) + "-" + strconv.FormatInt(int64(ordinal), 10)
}

// helperScripts are the commands of the helpers, with the placeholders of
// prepareScript filled in by NewHelperPod.
const (
	// prepareScript sets the owner, group and mode of the mounted directory
	// (kubelet created it, as root, when it mounted the hostPath volume).
	prepareScript = "chmod %o " + helperMountPath + " && chown %d:%d " + helperMountPath
	// removeScript removes the member's directory <parent>/<dir> with
	// everything in it; the parent is what is mounted.
	removeScript = "rm -rf -- " + helperMountPath + "/%s"
)

// NewHelperPod returns the short helper pod, in namespace (the server's
// own), that does job for member m of Flock f on m's node:
//   - HelperPrepare mounts the member's directory MemberDataDir (creating it)
//     and gives it the template's runAsUser and fsGroup as owner and group
//     and spec.storage.mode;
//   - HelperCleanup mounts its parent and removes the directory.
//
// It is bound to the node by spec.nodeName (a cordoned node is reached
// too), tolerates every taint, runs image once as root with only the
// capabilities its job needs (CHOWN and FOWNER; DAC_OVERRIDE to remove files
// of any owner), without privilege escalation, under the RuntimeDefault
// seccomp profile, and without a service account token. It carries the
// Flock's namespace, name and UID as labels and no ownerReference (an owner
// in another namespace would make the garbage collector delete it).
func NewHelperPod(f *v1alpha1.Flock, m v1alpha1.FlockMember, job, namespace, image, dataRoot string) *corev1.Pod {
	hostPathType := corev1.HostPathDirectoryOrCreate
	dir := MemberDataDir(dataRoot, f)
	var script string
	var caps []corev1.Capability
	switch job {
	case HelperCleanup:
		script = fmt.Sprintf(removeScript, path.Base(dir))
		dir = path.Dir(dir)
		caps = []corev1.Capability{"DAC_OVERRIDE", "FOWNER"}
	default:
		uid, gid := dataOwner(f)
		script = fmt.Sprintf(prepareScript, storageMode(f), uid, gid)
		caps = []corev1.Capability{"CHOWN", "FOWNER"}
	}
	labels := dataLabels(f, m.Ordinal)
	labels[LabelHelper] = job
	no, root := false, int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      HelperPodName(job, f.UID, m.Ordinal),
			Namespace: namespace,
			Labels:    labels,
		},
		Spec: corev1.PodSpec{
			NodeName:                     m.Node,
			RestartPolicy:                corev1.RestartPolicyNever,
			Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:    job,
				Image:   image,
				Command: []string{"sh", "-c", script},
				VolumeMounts: []corev1.VolumeMount{{
					Name: "data", MountPath: helperMountPath,
				}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("10m"),
						corev1.ResourceMemory: resource.MustParse("16Mi"),
					},
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				SecurityContext: &corev1.SecurityContext{
					RunAsUser:                &root,
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: caps},
				},
			}},
			Volumes: []corev1.Volume{{
				Name: "data",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: dir,
					Type: &hostPathType,
				}},
			}},
		},
	}
}

// helperOrdinal returns the ordinal a helper pod of the Flock with the given
// UID works for: its labels name the UID and its job, and its name is
// HelperPodName of them. False for any other pod.
func helperOrdinal(uid types.UID, pod *corev1.Pod) (int32, bool) {
	job := pod.Labels[LabelHelper]
	if pod.Labels[LabelFlockUID] != string(uid) || (job != HelperPrepare && job != HelperCleanup) {
		return 0, false
	}
	return ParseOrdinal("flock-"+job+"-"+string(uid), pod.Name)
}

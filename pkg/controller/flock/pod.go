package flock

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// Defaults of Options and names the controller uses.
const (
	// DefaultClusterDomain is the DNS domain of the cluster when
	// Options.ClusterDomain is empty.
	DefaultClusterDomain = "cluster.local"
	// DefaultDataRoot is the host directory under which member data lives
	// when Options.DataRoot is empty.
	DefaultDataRoot = "/var/lib/flock"
	// FieldManager is the field manager of every write of the controller.
	FieldManager = "flock-controller"
	// DefaultCleanupImage is the image of data-cleanup helper pods when
	// Options.CleanupImage is empty.
	DefaultCleanupImage = "busybox:1.36"
	// DefaultRolloutHaltAfter is Options.RolloutHaltAfter when unset.
	DefaultRolloutHaltAfter = 30 * time.Second

	// LabelCleanupOf labels the data-cleanup helper pods of a Flock with the
	// Flock's name.
	LabelCleanupOf = "flock.dev/cleanup-of"

	// cleanupMountPath is where a cleanup helper mounts the data directory.
	cleanupMountPath = "/flock-data"

	// nodeNameField is the field selector key a pod's required node
	// affinity uses to pin it to one node.
	nodeNameField = "metadata.name"
)

// controllerKind is the kind of the owner of member pods and Services.
var controllerKind = v1alpha1.SchemeGroupVersion.WithKind("Flock")

// replicasOf returns spec.replicas, defaulting a nil value to 1.
func replicasOf(f *v1alpha1.Flock) int32 {
	if f.Spec.Replicas == nil {
		return 1
	}
	return *f.Spec.Replicas
}

// serviceNameOf returns spec.serviceName, defaulting to the Flock's name.
func serviceNameOf(f *v1alpha1.Flock) string {
	if f.Spec.ServiceName == "" {
		return f.Name
	}
	return f.Spec.ServiceName
}

// volumeNameOf returns spec.storage.volumeName, defaulting to "data".
func volumeNameOf(f *v1alpha1.Flock) string {
	if f.Spec.Storage.VolumeName == "" {
		return v1alpha1.DefaultVolumeName
	}
	return f.Spec.Storage.VolumeName
}

// PodName returns the name of member ordinal's pod: <flock>-<ordinal>.
func PodName(flockName string, ordinal int32) string {
	return flockName + "-" + strconv.FormatInt(int64(ordinal), 10)
}

// ParseOrdinal returns the ordinal of a pod named <flockName>-<ordinal>, and
// false for any other name (including leading zeros and signs, so that a
// name maps to at most one ordinal and back).
func ParseOrdinal(flockName, podName string) (int32, bool) {
	suffix, ok := strings.CutPrefix(podName, flockName+"-")
	if !ok || suffix == "" || (len(suffix) > 1 && suffix[0] == '0') {
		return 0, false
	}
	for _, c := range suffix {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(suffix, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// MemberHostname returns the fully qualified DNS name of a member:
// <pod>.<service>.<namespace>.svc.<clusterDomain>.
func MemberHostname(podName, serviceName, namespace, clusterDomain string) string {
	return podName + "." + serviceName + "." + namespace + ".svc." + clusterDomain
}

// DataPath returns the host directory of a Flock's members on their nodes:
// <dataRoot>/<namespace>/<flock>.
func DataPath(dataRoot, namespace, flockName string) string {
	return path.Join(dataRoot, namespace, flockName)
}

// newControllerRef returns the controller ownerReference of a Flock's pods
// and Service.
func newControllerRef(f *v1alpha1.Flock) *metav1.OwnerReference {
	return metav1.NewControllerRef(f, controllerKind)
}

// isFlockRef reports whether an ownerReference points to a Flock (of any
// version of the flock.dev group).
func isFlockRef(ref *metav1.OwnerReference) bool {
	if ref.Kind != controllerKind.Kind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == controllerKind.Group
}

// isControlledBy reports whether obj's controller is the Flock f (by UID).
func isControlledBy(obj metav1.Object, f *v1alpha1.Flock) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == f.UID
}

// memberLabels are the labels the controller sets on member ordinal's pod,
// on top of the template's.
func memberLabels(f *v1alpha1.Flock, ordinal int32) map[string]string {
	name := PodName(f.Name, ordinal)
	return map[string]string{
		v1alpha1.LabelFlockName: f.Name,
		v1alpha1.LabelOrdinal:   strconv.FormatInt(int64(ordinal), 10),
		v1alpha1.LabelPodName:   name,
	}
}

// NewMemberPod returns the pod of member m of Flock f: named <flock>-<i>,
// with hostname and subdomain for its DNS name, the template's labels plus
// the member labels and revision, a required node affinity to m.Node AND-ed
// into every term of the template's own required node affinity, the
// hostPath data volume <dataRoot>/<namespace>/<flock> and a controller
// ownerReference to f. f is not modified.
func NewMemberPod(f *v1alpha1.Flock, m v1alpha1.FlockMember, revision, dataRoot string) *corev1.Pod {
	return newMemberPodFromTemplate(f, &f.Spec.Template, m, revision, dataRoot)
}

// newMemberPodFromTemplate is NewMemberPod with the pod template of a given
// revision (an earlier template of f, from its ControllerRevision) instead
// of f's current one. template is not modified.
func newMemberPodFromTemplate(f *v1alpha1.Flock, template *corev1.PodTemplateSpec, m v1alpha1.FlockMember, revision, dataRoot string) *corev1.Pod {
	tmpl := template.DeepCopy()
	name := PodName(f.Name, m.Ordinal)

	labels := make(map[string]string, len(tmpl.Labels)+4)
	maps.Copy(labels, tmpl.Labels)
	maps.Copy(labels, memberLabels(f, m.Ordinal))
	if revision != "" {
		labels[v1alpha1.LabelRevision] = revision
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       f.Namespace,
			Labels:          labels,
			Annotations:     tmpl.Annotations,
			Finalizers:      tmpl.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*newControllerRef(f)},
		},
		Spec: tmpl.Spec,
	}
	pod.Spec.Hostname = name
	pod.Spec.Subdomain = serviceNameOf(f)
	// The member's node is placement's decision; the scheduler binds the
	// pod there (checking resources and taints), never a template.
	pod.Spec.NodeName = ""
	pinToNode(&pod.Spec, m.Node)

	volumeName := volumeNameOf(f)
	hostPathType := corev1.HostPathDirectoryOrCreate
	dataVolume := corev1.Volume{
		Name: volumeName,
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: DataPath(dataRoot, f.Namespace, f.Name),
			Type: &hostPathType,
		}},
	}
	// Validation refuses a template volume of this name; replace it anyway
	// so the pod can never mount anything else as the member's data.
	pod.Spec.Volumes = slices.DeleteFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == volumeName })
	pod.Spec.Volumes = append(pod.Spec.Volumes, dataVolume)
	return pod
}

// pinToNode ANDs "metadata.name In [node]" into every term of spec's
// required node affinity, adding one term when there is none.
func pinToNode(spec *corev1.PodSpec, node string) {
	pin := corev1.NodeSelectorRequirement{Key: nodeNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	req := na.RequiredDuringSchedulingIgnoredDuringExecution
	if len(req.NodeSelectorTerms) == 0 {
		req.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range req.NodeSelectorTerms {
		req.NodeSelectorTerms[i].MatchFields = append(req.NodeSelectorTerms[i].MatchFields, pin)
	}
}

// PinnedNode returns the node a pod is bound or pinned to: spec.nodeName
// when set, else the node named by a "metadata.name In [node]" match field
// present in every term of its required node affinity. It returns "" for a
// pod that may run on more than one node.
func PinnedNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return ""
	}
	node := ""
	for _, term := range terms {
		found := ""
		for _, r := range term.MatchFields {
			if r.Key == nodeNameField && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				found = r.Values[0]
				break
			}
		}
		if found == "" || (node != "" && found != node) {
			return ""
		}
		node = found
	}
	return node
}

// identityMismatch says why pod cannot be member m of Flock f ("" when it
// can): it must be pinned to m.Node, carry the member's hostname and
// subdomain, and mount a hostPath volume named storage.volumeName. These
// fields cannot change on a pod, so a mismatching pod has to be replaced.
func identityMismatch(f *v1alpha1.Flock, m v1alpha1.FlockMember, pod *corev1.Pod) string {
	if node := PinnedNode(pod); node != m.Node {
		if node == "" {
			return fmt.Sprintf("pod %s is not pinned to node %s", pod.Name, m.Node)
		}
		return fmt.Sprintf("pod %s is on node %s, but member %d is assigned to node %s", pod.Name, node, m.Ordinal, m.Node)
	}
	if pod.Spec.Hostname != pod.Name || pod.Spec.Subdomain != serviceNameOf(f) {
		return fmt.Sprintf("pod %s has hostname %q and subdomain %q, want %q and %q",
			pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain, pod.Name, serviceNameOf(f))
	}
	volumeName := volumeNameOf(f)
	if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == volumeName && v.HostPath != nil }) {
		return fmt.Sprintf("pod %s has no hostPath volume %q", pod.Name, volumeName)
	}
	return ""
}

// labelsMatch reports whether pod carries the member labels of ordinal
// (labels can be fixed in place, unlike the identity fields).
func labelsMatch(f *v1alpha1.Flock, ordinal int32, pod *corev1.Pod) bool {
	for k, v := range memberLabels(f, ordinal) {
		if pod.Labels[k] != v {
			return false
		}
	}
	return true
}

// podRevision returns the revision label of a pod.
func podRevision(pod *corev1.Pod) string {
	return pod.Labels[v1alpha1.LabelRevision]
}

// ServiceSelector returns the selector of a Flock's headless Service: the
// matchLabels of spec.selector plus flock.dev/name=<flock>, so it selects
// exactly the Flock's member pods.
func ServiceSelector(f *v1alpha1.Flock) map[string]string {
	sel := map[string]string{}
	if f.Spec.Selector != nil {
		maps.Copy(sel, f.Spec.Selector.MatchLabels)
	}
	sel[v1alpha1.LabelFlockName] = f.Name
	return sel
}

// NewService returns the headless Service of Flock f: named
// spec.serviceName, clusterIP None, publishing not-ready addresses (a
// member's DNS name must resolve before it is Ready, so peers can find each
// other while they start), selecting the Flock's pods, with the ports of the
// template's containers, owned by f.
func NewService(f *v1alpha1.Flock) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            serviceNameOf(f),
			Namespace:       f.Namespace,
			Labels:          map[string]string{v1alpha1.LabelFlockName: f.Name},
			OwnerReferences: []metav1.OwnerReference{*newControllerRef(f)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 ServiceSelector(f),
			Ports:                    ServicePorts(&f.Spec.Template.Spec),
		},
	}
}

// ServicePorts returns the Service ports for the container ports of a pod
// spec (containers and restartable init containers, i.e. sidecars), one per
// distinct port and protocol, in order of appearance. A port keeps its
// container port name when that name is free; otherwise, and when it has
// none and there are several ports, it is named <protocol>-<port>.
func ServicePorts(spec *corev1.PodSpec) []corev1.ServicePort {
	var cps []corev1.ContainerPort
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			cps = append(cps, c.Ports...)
		}
	}
	for _, c := range spec.Containers {
		cps = append(cps, c.Ports...)
	}

	type key struct {
		port  int32
		proto corev1.Protocol
	}
	seen := map[key]bool{}
	var unique []corev1.ContainerPort
	for _, cp := range cps {
		if cp.Protocol == "" {
			cp.Protocol = corev1.ProtocolTCP
		}
		k := key{cp.ContainerPort, cp.Protocol}
		if cp.ContainerPort <= 0 || seen[k] {
			continue
		}
		seen[k] = true
		unique = append(unique, cp)
	}

	names := map[string]bool{}
	ports := make([]corev1.ServicePort, 0, len(unique))
	for _, cp := range unique {
		name := cp.Name
		if name == "" && len(unique) > 1 || names[name] {
			name = strings.ToLower(string(cp.Protocol)) + "-" + strconv.FormatInt(int64(cp.ContainerPort), 10)
		}
		names[name] = true
		ports = append(ports, corev1.ServicePort{
			Name:       name,
			Protocol:   cp.Protocol,
			Port:       cp.ContainerPort,
			TargetPort: intstr.FromInt32(cp.ContainerPort),
		})
	}
	if len(ports) == 0 {
		return nil
	}
	return ports
}

// CleanupPodName returns the name of the helper pod that removes the data
// directory of member ordinal of a Flock: <flock>-<ordinal>-cleanup. It can
// never be the name of a member pod (<flock>-<digits>) of any Flock.
func CleanupPodName(flockName string, ordinal int32) string {
	return PodName(flockName, ordinal) + "-cleanup"
}

// cleanupOrdinal returns the ordinal of a cleanup helper pod of flockName.
func cleanupOrdinal(flockName, podName string) (int32, bool) {
	base, ok := strings.CutSuffix(podName, "-cleanup")
	if !ok {
		return 0, false
	}
	return ParseOrdinal(flockName, base)
}

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
					ReadOnlyRootFilesystem:   ptrTo(true),
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

func ptrTo[T any](v T) *T { return &v }

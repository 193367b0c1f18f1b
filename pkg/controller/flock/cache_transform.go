// File cache_transform.go: informer transforms that keep the controller's
// caches small (issue 17): managedFields go from every cached object, and
// nodes, pods and Bound claims keep only the fields the controller reads of
// them.

package flock

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"flock.dev/flock/pkg/nodeagent"
)

// TrimManagedFields is an informer transform that drops an object's
// managedFields. The controller never reads them, and an update sent from
// a cached copy (nil managedFields) keeps the server's.
func TrimManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// TrimNode is the transform of node informers. A node is cached for what
// Flock reads of it and nothing more: its metadata without annotations
// (name, UID and labels, for placement and the hostname a member's volume is
// pinned to), whether it is cordoned, its taints, and its Ready condition
// (placement, admission and node loss). Capacity, addresses, node info,
// images, volumes and the other conditions go: nothing of Flock reads them,
// and nothing writes a node from this cache. Admission and the controller
// share one node informer (pkg/apiserver), so this is one copy per node.
func TrimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return TrimManagedFields(obj)
	}
	slim := &corev1.Node{
		TypeMeta:   node.TypeMeta,
		ObjectMeta: node.ObjectMeta,
		Spec:       corev1.NodeSpec{Unschedulable: node.Spec.Unschedulable, Taints: node.Spec.Taints},
	}
	slim.ManagedFields, slim.Annotations = nil, nil
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			slim.Status.Conditions = []corev1.NodeCondition{node.Status.Conditions[i]}
			break
		}
	}
	return slim, nil
}

// TrimPod is the transform of the controller's pod informer. Every pod,
// a Flock's members and helpers as much as any other, is cached for what
// the controller reads of it and nothing more: its metadata (labels and
// ownerReferences, for selection, adoption and revisions; not annotations),
// the node it is on or pinned to (spec.nodeName, required node affinity),
// its hostname and subdomain (a member's identity), its restart policy (a
// helper whose container has exited 0 is done), its claim volumes (its
// data, adoption and the data-in-use check; a service account token,
// ConfigMap or Secret volume goes), and its phase, reason, conditions and
// containers' names and states (readiness, failures, a halted rollout; of a pod
// statusRead says nothing reads them of, the phase only). Containers,
// tolerations, security contexts, IPs and the rest go. No pod is ever
// written from this cache (the controller creates pods from the Flock's
// template, and adopts, releases and relabels them with patches), so what
// is dropped is never lost. A member pod cached in full was about four
// times the size of its trimmed copy (issue 17).
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{
		TypeMeta:   pod.TypeMeta,
		ObjectMeta: pod.ObjectMeta,
		Spec: corev1.PodSpec{
			NodeName:      pod.Spec.NodeName,
			Hostname:      pod.Spec.Hostname,
			Subdomain:     pod.Spec.Subdomain,
			RestartPolicy: pod.Spec.RestartPolicy,
			Volumes:       claimVolumes(pod.Spec.Volumes),
		},
		Status: corev1.PodStatus{
			Phase:                 pod.Status.Phase,
			Reason:                pod.Status.Reason,
			Conditions:            pod.Status.Conditions,
			InitContainerStatuses: containerStates(pod.Status.InitContainerStatuses),
			ContainerStatuses:     containerStates(pod.Status.ContainerStatuses),
		},
	}
	slim.ManagedFields, slim.Annotations = nil, nil
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		slim.Spec.Affinity = &corev1.Affinity{NodeAffinity: a.NodeAffinity}
	}
	if !statusRead(slim) {
		slim.Status = corev1.PodStatus{Phase: pod.Status.Phase}
	}
	return slim, nil
}

// statusRead reports whether the controller reads more of pod's status
// than its phase: when a Flock controls it (a member), it is a helper or a
// node agent (whose Ready condition says the agent works), or it mounts a
// claim (an orphan to adopt, whose status counts once it is
// adopted, or a pod holding a member's data, for which the phase is read).
// Any other pod of the cluster is cached for its labels and owner only
// (they tell whether a Flock's selector takes it); its conditions and
// container states, a third of a trimmed pod, go (issue 17). A pod that
// comes to be controlled by a Flock or to be a helper changes in an update,
// whose new copy keeps them.
func statusRead(pod *corev1.Pod) bool {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && IsFlockRef(ref) {
		return true
	}
	return pod.Labels[LabelHelper] != "" || pod.Labels[nodeagent.LabelComponent] == nodeagent.ComponentNodeAgent || len(pod.Spec.Volumes) > 0
}

// containerStates returns each container's name and state, all the
// controller reads of a container's status (a failing or exited container,
// when a helper finished); its image, IDs, resources and volume mounts go.
func containerStates(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	if statuses == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(statuses))
	for i, cs := range statuses {
		out[i] = corev1.ContainerStatus{Name: cs.Name, State: cs.State}
	}
	return out
}

// claimVolumes returns the volumes of vols that mount a claim, or nil.
func claimVolumes(vols []corev1.Volume) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range vols {
		if v.PersistentVolumeClaim != nil {
			out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: v.PersistentVolumeClaim}})
		}
	}
	return out
}

// TrimClaim is the transform of claim informers: a claim is cached without
// managedFields, and a Bound claim without the rest of its status (capacity,
// access modes, conditions): of a claim's status the controller reads only
// the phase. It writes a claim's status only to complete a binding
// (completeBind), while the cached phase is not Bound yet, and such a claim
// keeps its status whole; an update of a claim's main resource leaves its
// status as the server holds it (kube-apiserver's strategy for claims).
func TrimClaim(obj any) (any, error) {
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return TrimManagedFields(obj)
	}
	claim.ManagedFields = nil
	if claim.Status.Phase == corev1.ClaimBound {
		claim.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}
	}
	return claim, nil
}

// CacheTransform is the transform of the controller's informer factories:
// TrimPod for pods, TrimNode for nodes, TrimClaim for claims,
// TrimManagedFields for the rest.
func CacheTransform(obj any) (any, error) {
	switch obj.(type) {
	case *corev1.Pod:
		return TrimPod(obj)
	case *corev1.Node:
		return TrimNode(obj)
	case *corev1.PersistentVolumeClaim:
		return TrimClaim(obj)
	default:
		return TrimManagedFields(obj)
	}
}

var _ cache.TransformFunc = CacheTransform

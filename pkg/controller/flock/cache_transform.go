// File cache_transform.go: informer transforms that keep the controller's
// caches small (issue 17): managedFields go from every cached object, node
// image lists go, and pods that are not the Flocks' keep only the fields
// the controller reads of them.

package flock

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
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

// TrimNode is the transform of node informers: besides managedFields it
// drops the lists of images and volumes, which nothing of Flock reads.
func TrimNode(obj any) (any, error) {
	if node, ok := obj.(*corev1.Node); ok {
		node.ManagedFields = nil
		node.Status.Images = nil
		node.Status.VolumesInUse = nil
		node.Status.VolumesAttached = nil
	}
	return obj, nil
}

// TrimPod is the transform of the controller's pod informer. A Flock's
// pods (controlled by a Flock, or labelled as a member or helper of one)
// lose only their managedFields. Any other pod is cached for what the
// controller reads of it and nothing more: its metadata (labels and
// ownerReferences, for selection and adoption; not annotations), the node
// it is on or pinned to, its hostname and subdomain, its volumes (adoption
// and the data-in-use check) and its phase, conditions and container
// states. Such a pod is never written from the cache (adoption and
// relabelling are patches), so the fields dropped are never lost.
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	if isFlocksPod(pod) {
		return pod, nil
	}
	slim := &corev1.Pod{
		TypeMeta:   pod.TypeMeta,
		ObjectMeta: pod.ObjectMeta,
		Spec: corev1.PodSpec{
			NodeName:  pod.Spec.NodeName,
			Hostname:  pod.Spec.Hostname,
			Subdomain: pod.Spec.Subdomain,
			Volumes:   pod.Spec.Volumes,
		},
		Status: corev1.PodStatus{
			Phase:                 pod.Status.Phase,
			Conditions:            pod.Status.Conditions,
			InitContainerStatuses: pod.Status.InitContainerStatuses,
			ContainerStatuses:     pod.Status.ContainerStatuses,
		},
	}
	slim.Annotations = nil
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		slim.Spec.Affinity = &corev1.Affinity{NodeAffinity: a.NodeAffinity}
	}
	return slim, nil
}

// isFlocksPod reports whether pod is a Flock's: controlled by a Flock or
// carrying a label the controller sets on members and helpers.
func isFlocksPod(pod *corev1.Pod) bool {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && isFlockRef(ref) {
		return true
	}
	for _, l := range []string{v1alpha1.LabelFlockName, LabelHelper} {
		if _, ok := pod.Labels[l]; ok {
			return true
		}
	}
	return false
}

// CacheTransform is the transform of the controller's informer factories:
// TrimPod for pods, TrimNode for nodes, TrimManagedFields for the rest.
func CacheTransform(obj any) (any, error) {
	switch obj.(type) {
	case *corev1.Pod:
		return TrimPod(obj)
	case *corev1.Node:
		return TrimNode(obj)
	default:
		return TrimManagedFields(obj)
	}
}

var _ cache.TransformFunc = CacheTransform

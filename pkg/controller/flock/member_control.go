// File member_control.go: MemberControl: the writes of pods and Services through the
// clientset, and their reads through listers.

package flock

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// MemberControl is how the reconcile logic reads and writes the pods and
// Services of Flocks in the core cluster: reads come from the informers'
// caches, writes go through the clientset with the field manager
// "flock-controller". Objects returned by the Get methods come from a cache
// and must not be modified. Tests use a fake with error injection.
type MemberControl interface {
	// GetPod returns a pod from the cache.
	GetPod(namespace, name string) (*corev1.Pod, error)
	// GetPodLive reads a pod from the API server, not the cache (for a
	// pod the cache has been slow to show).
	GetPodLive(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// ListPods returns the pods in namespace that selector matches, from
	// the cache.
	ListPods(namespace string, selector labels.Selector) ([]*corev1.Pod, error)
	// ListPodsLive lists them from the API server, not the cache (for
	// helper pods that must not be left behind).
	ListPodsLive(ctx context.Context, namespace string, selector labels.Selector) ([]*corev1.Pod, error)
	// ListHelperPods returns the helper pods working for the Flock with
	// UID flockUID in namespace, from the cache's index (not a scan of
	// the namespace's pods).
	ListHelperPods(namespace string, flockUID types.UID) ([]*corev1.Pod, error)
	// ListNodeAgentPods returns the node agent pods in namespace on node,
	// from the cache's index.
	ListNodeAgentPods(namespace, node string) ([]*corev1.Pod, error)
	// CreatePod creates pod. There is no UpdatePod: pods are cached
	// trimmed (TrimPod), and one written back from the cache would lose
	// its containers; pods change by PatchPod.
	CreatePod(ctx context.Context, pod *corev1.Pod) error
	// DeletePod deletes pod, on the precondition that its UID is still
	// pod.UID, so that a pod recreated under the same name is never deleted
	// by mistake.
	DeletePod(ctx context.Context, pod *corev1.Pod) error
	// ForceDeletePod deletes pod at once (grace period 0), on the same UID
	// precondition. It is for pods whose node is gone or lost, which no
	// kubelet will ever confirm stopped.
	ForceDeletePod(ctx context.Context, pod *corev1.Pod) error
	// PatchPod applies a strategic merge patch to a pod (adoption, release).
	PatchPod(ctx context.Context, namespace, name string, patch []byte) error

	// GetService returns a Service from the cache.
	GetService(namespace, name string) (*corev1.Service, error)
	// CreateService creates svc.
	CreateService(ctx context.Context, svc *corev1.Service) error
	// UpdateService updates svc (a copy the caller owns).
	UpdateService(ctx context.Context, svc *corev1.Service) error
	// PatchService applies a strategic merge patch to a Service (adoption).
	PatchService(ctx context.Context, namespace, name string, patch []byte) error
}

// NewMemberControl returns the MemberControl that writes through client
// and reads through the pod informer's cache and the Service lister.
func NewMemberControl(client kubernetes.Interface, pods coreinformers.PodInformer, serviceLister corelisters.ServiceLister) MemberControl {
	return &realMemberControl{client: client, podLister: pods.Lister(), podIndexer: pods.Informer().GetIndexer(), serviceLister: serviceLister}
}

type realMemberControl struct {
	client        kubernetes.Interface
	podLister     corelisters.PodLister
	podIndexer    cache.Indexer
	serviceLister corelisters.ServiceLister
}

var _ MemberControl = &realMemberControl{}

func (c *realMemberControl) GetPod(namespace, name string) (*corev1.Pod, error) {
	return c.podLister.Pods(namespace).Get(name)
}

// GetPodLive lists the one pod of that name: the controller may list and
// watch pods, never get one (its ClusterRole), and the list is as fresh.
func (c *realMemberControl) GetPodLive(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	list, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Name == name {
			return &list.Items[i], nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

func (c *realMemberControl) ListPods(namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	return c.podLister.Pods(namespace).List(selector)
}

func (c *realMemberControl) ListHelperPods(namespace string, flockUID types.UID) ([]*corev1.Pod, error) {
	return byIndex[*corev1.Pod](c.podIndexer, podControllerUIDIndex, helperIndexKey(namespace, flockUID))
}

func (c *realMemberControl) ListNodeAgentPods(namespace, node string) ([]*corev1.Pod, error) {
	return byIndex[*corev1.Pod](c.podIndexer, podControllerUIDIndex, nodeAgentIndexKey(namespace, node))
}

// byIndex returns the objects of indexer under key of index, as T.
func byIndex[T any](indexer cache.Indexer, index, key string) ([]T, error) {
	objs, err := indexer.ByIndex(index, key)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, obj := range objs {
		out = append(out, obj.(T))
	}
	return out, nil
}

func (c *realMemberControl) ListPodsLive(ctx context.Context, namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	list, err := c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	return itemPointers(list.Items), nil
}

// itemPointers returns pointers to the items of a list the caller owns.
func itemPointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

func (c *realMemberControl) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	_, err := c.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: FieldManager})
	return err
}

func (c *realMemberControl) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *realMemberControl) ForceDeletePod(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	var zero int64
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *realMemberControl) PatchPod(ctx context.Context, namespace, name string, patch []byte) error {
	_, err := c.client.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

func (c *realMemberControl) GetService(namespace, name string) (*corev1.Service, error) {
	return c.serviceLister.Services(namespace).Get(name)
}

func (c *realMemberControl) CreateService(ctx context.Context, svc *corev1.Service) error {
	_, err := c.client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{FieldManager: FieldManager})
	return err
}

func (c *realMemberControl) UpdateService(ctx context.Context, svc *corev1.Service) error {
	_, err := c.client.CoreV1().Services(svc.Namespace).Update(ctx, svc, metav1.UpdateOptions{FieldManager: FieldManager})
	return err
}

func (c *realMemberControl) PatchService(ctx context.Context, namespace, name string, patch []byte) error {
	_, err := c.client.CoreV1().Services(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

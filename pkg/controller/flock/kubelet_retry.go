// File kubelet_retry.go: a member pod that a kubelet could not start because the
// node authorizer did not yet know the pod was on its node. kubelet reads a
// pod's claim the moment the pod reaches it; kube-apiserver's node authorizer
// lets it only once its own graph has seen the pod bound to that node, which
// can come a few milliseconds later (kubernetes/kubernetes#113429). kubelet
// then fails the pod's sync ("Unable to attach or mount volumes: ... no
// relationship found between node ...", a FailedMount event) and, whatever
// the cause, tries the pod again only after its sync backoff: 10-15 s. On two
// real nodes about one run in twenty lost those 15 s (issue 17). Any change of
// the pod's labels or annotations makes kubelet sync it again at once, so a
// small controller beside the member loop watches for that event on member
// pods and annotates the pod (flock.dev/kubelet-retry), at most
// maxKubeletRetries times per pod.

package flock

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

const (
	// AnnotationKubeletRetry on a member pod counts the times the
	// controller asked its kubelet to sync it again.
	AnnotationKubeletRetry = "flock.dev/kubelet-retry"
	// maxKubeletRetries bounds those times per pod: should the node
	// authorizer keep refusing, each retry fails at once and kubelet's
	// backoff takes over again.
	maxKubeletRetries = 3
	// ReasonKubeletRetried is the Flock event's reason.
	ReasonKubeletRetried = "KubeletRetried"
)

// KubeletRetryEventSelector selects the events KubeletRetryController
// watches: kubelet's FailedMount events on pods.
const KubeletRetryEventSelector = "reason=FailedMount,involvedObject.kind=Pod,source=kubelet"

// nodeAuthorizerRefusal reports whether event e is kubelet failing a pod's
// sync because the node authorizer refused it the pod's claim or volume:
// its message is kubelet's "Unable to attach or mount volumes: ..." with
// the node authorizer's reason.
func nodeAuthorizerRefusal(e *corev1.Event) bool {
	return e.Reason == "FailedMount" && e.InvolvedObject.Kind == "Pod" && e.Source.Component == "kubelet" &&
		strings.HasPrefix(e.Message, "Unable to attach or mount volumes") &&
		strings.Contains(e.Message, "no relationship found between node")
}

// KubeletRetryController asks kubelet to sync a member pod again at once
// when the node authorizer refused it the pod's claim (see the file's
// comment).
type KubeletRetryController struct {
	kubeClient kubernetes.Interface
	podLister  corelisters.PodLister
	recorder   record.EventRecorder
	// queue holds the pods to retry, as namespace/name/uid/node (the
	// node of the kubelet that failed).
	queue  *termQueue
	events cache.Store
	synced []cache.InformerSynced

	mu sync.Mutex
	// retried counts the retries asked of each pod, by UID, until the pod
	// is deleted (the pod cache drops annotations).
	retried map[types.UID]int
}

// NewKubeletRetryController returns the controller; start the informers
// after it, then call Run. events must list only what
// KubeletRetryEventSelector selects (others are ignored).
func NewKubeletRetryController(ctx context.Context, kubeClient kubernetes.Interface, events cache.SharedIndexInformer,
	pods coreinformers.PodInformer, recorder record.EventRecorder) (*KubeletRetryController, error) {
	c := &KubeletRetryController{
		kubeClient: kubeClient,
		podLister:  pods.Lister(),
		recorder:   recorder,
		queue:      newNamedTermQueue("flock-kubelet-retry"),
		events:     events.GetStore(),
		retried:    map[types.UID]int{},
	}
	seen := func(obj any) {
		if key, ok := retryKey(obj); ok {
			c.queue.add(key)
		}
	}
	reg, err := events.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen,
		UpdateFunc: func(old, cur any) {
			// kubelet failed again (the event's count grew); a relist
			// delivers the same version, which asks for nothing.
			if o, ok := old.(*corev1.Event); ok && o.ResourceVersion != cur.(*corev1.Event).ResourceVersion {
				seen(cur)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	c.synced = append(c.synced, reg.HasSynced)
	reg, err = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if pod, ok := unwrapDeleted[*corev1.Pod](obj); ok {
				c.forget(pod.UID)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	c.synced = append(c.synced, reg.HasSynced)
	klog.FromContext(ctx).V(4).Info("Kubelet retry controller set up")
	return c, nil
}

// retryKey returns the queue key (namespace/name/uid of the pod, and the
// node of the kubelet) of an event that asks for a retry.
func retryKey(obj any) (string, bool) {
	e, ok := obj.(*corev1.Event)
	if !ok || !nodeAuthorizerRefusal(e) {
		return "", false
	}
	o := e.InvolvedObject
	return o.Namespace + "/" + o.Name + "/" + string(o.UID) + "/" + e.Source.Host, true
}

// Run retries pods with one worker until ctx ends: one leadership term. A
// later term looks at every event the cache holds again (sync skips the
// pods that started since).
func (c *KubeletRetryController) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	q := c.queue.newTerm(func(add func(string)) {
		for _, obj := range c.events.List() {
			if key, ok := retryKey(obj); ok {
				add(key)
			}
		}
	})
	defer q.ShutDown()
	if !cache.WaitForNamedCacheSync("flock-kubelet-retry", ctx.Done(), c.synced...) {
		return
	}
	klog.FromContext(ctx).Info("Starting the Flock kubelet retry controller")
	work(ctx, q, 1, c.sync, "Asking kubelet to sync a member pod again failed")
}

// sync asks kubelet to sync pod key (namespace/name/uid/node) again, when it is
// still that pod, a Flock's member, not deleted, with no container started
// yet, and retried fewer than maxKubeletRetries times.
func (c *KubeletRetryController) sync(ctx context.Context, key string) error {
	parts := strings.SplitN(key, "/", 4)
	if len(parts) != 4 {
		return nil
	}
	node := parts[3]
	pod, err := c.podLister.Pods(parts[0]).Get(parts[1])
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if string(pod.UID) != parts[2] || ref == nil || !isFlockRef(ref) || pod.DeletionTimestamp != nil || containerStarted(pod) {
		return nil
	}
	n, ok := c.next(pod.UID)
	if !ok {
		klog.FromContext(ctx).V(2).Info("Kubelet still cannot read a member pod's claim; not asking again", "pod", klog.KObj(pod), "node", node, "retries", maxKubeletRetries)
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		// The UID makes the patch fail on another pod of the name.
		"uid":         pod.UID,
		"annotations": map[string]string{AnnotationKubeletRetry: strconv.Itoa(n)},
	}})
	if err != nil {
		return err
	}
	_, err = c.kubeClient.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err):
		return nil // gone, or another pod of the name
	case err != nil:
		c.undo(pod.UID)
		return err
	}
	kubeletRetries.Inc()
	klog.FromContext(ctx).V(2).Info("Asked kubelet to sync a member pod again: the node authorizer had refused it the pod's claim",
		"pod", klog.KObj(pod), "node", node, "retry", n)
	c.recorder.Eventf(&corev1.ObjectReference{Kind: ref.Kind, APIVersion: ref.APIVersion, Name: ref.Name, Namespace: pod.Namespace, UID: ref.UID},
		corev1.EventTypeNormal, ReasonKubeletRetried,
		"kubelet on node %s could not read the claim of pod %s yet (the node authorizer had not seen the pod on its node) and would try again in 10-15 s; asked it to try again now (%d of %d)",
		node, pod.Name, n, maxKubeletRetries)
	return nil
}

// containerStarted reports whether kubelet started any of pod's containers
// (so it mounted its volumes).
func containerStarted(pod *corev1.Pod) bool {
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if cs.State.Running != nil || cs.State.Terminated != nil {
				return true
			}
		}
	}
	return pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// next counts one more retry of pod uid and returns its number, or false
// when it had maxKubeletRetries.
func (c *KubeletRetryController) next(uid types.UID) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.retried[uid] >= maxKubeletRetries {
		return 0, false
	}
	c.retried[uid]++
	return c.retried[uid], true
}

// undo takes back a retry whose patch failed.
func (c *KubeletRetryController) undo(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retried[uid]--
}

func (c *KubeletRetryController) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.retried, uid)
}

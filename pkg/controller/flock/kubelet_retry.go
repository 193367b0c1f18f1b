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
// maxKubeletRetries times per pod. The same controller asks kube-scheduler
// to try a member pod again (scheduler_retry.go).

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
	"k8s.io/apimachinery/pkg/labels"
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

// KubeletRetryEventSelector selects the events PodRetryController
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

// PodRetryController asks kubelet or kube-scheduler to try a member pod
// again at once when either refused it for a reason that passed (see the
// file's comment and scheduler_retry.go).
type PodRetryController struct {
	kubeClient  kubernetes.Interface
	podLister   corelisters.PodLister
	claimLister corelisters.PersistentVolumeClaimLister
	recorder    record.EventRecorder
	// queue holds the pods to retry: namespace/name/uid/node for kubelet
	// (the node of the kubelet that failed), namespace/name/uid for
	// kube-scheduler.
	queue  *termQueue
	events cache.Store
	synced []cache.InformerSynced

	// kubelet and scheduler count the retries asked of each pod, by UID,
	// until the pod is deleted (the pod cache drops annotations).
	kubelet, scheduler retryCounts
}

// NewPodRetryController returns the controller; start the informers
// after it, then call Run. events must list only what
// KubeletRetryEventSelector selects (others are ignored).
func NewPodRetryController(ctx context.Context, kubeClient kubernetes.Interface, events cache.SharedIndexInformer,
	pods coreinformers.PodInformer, claims coreinformers.PersistentVolumeClaimInformer, recorder record.EventRecorder) (*PodRetryController, error) {
	c := &PodRetryController{
		kubeClient:  kubeClient,
		podLister:   pods.Lister(),
		claimLister: claims.Lister(),
		recorder:    recorder,
		queue:       newNamedTermQueue("flock-pod-retry"),
		events:      events.GetStore(),
		kubelet:     retryCounts{max: maxKubeletRetries},
		scheduler:   retryCounts{max: MaxSchedulerRetries},
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
	refused := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && refusedForUnboundClaim(pod) {
			c.queue.addAfter(schedulerRetryKey(pod), schedulerRetryDelay)
		}
	}
	reg, err = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    refused,
		UpdateFunc: func(_, cur any) { refused(cur) },
		DeleteFunc: func(obj any) {
			if pod, ok := unwrapDeleted[*corev1.Pod](obj); ok {
				c.kubelet.forget(pod.UID)
				c.scheduler.forget(pod.UID)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	c.synced = append(c.synced, reg.HasSynced, claims.Informer().HasSynced)
	klog.FromContext(ctx).V(4).Info("Pod retry controller set up")
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
// later term looks at every event the cache holds again, and at every pod
// kube-scheduler refused for an unbound claim (sync skips the pods that
// started or were scheduled since).
func (c *PodRetryController) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	q := c.queue.newTerm(func(add func(string)) {
		for _, obj := range c.events.List() {
			if key, ok := retryKey(obj); ok {
				add(key)
			}
		}
		pods, _ := c.podLister.List(labels.Everything())
		for _, pod := range pods {
			if refusedForUnboundClaim(pod) {
				add(schedulerRetryKey(pod))
			}
		}
	})
	defer q.ShutDown()
	if !cache.WaitForNamedCacheSync("flock-pod-retry", ctx.Done(), c.synced...) {
		return
	}
	klog.FromContext(ctx).Info("Starting the Flock pod retry controller")
	work(ctx, q, 1, c.sync, "Asking kubelet or kube-scheduler to try a member pod again failed")
}

// sync handles a key of either kind (see queue).
func (c *PodRetryController) sync(ctx context.Context, key string) error {
	parts := strings.Split(key, "/")
	switch len(parts) {
	case 3:
		return c.syncScheduler(ctx, key, parts[0], parts[1], types.UID(parts[2]))
	case 4:
		return c.syncKubelet(ctx, parts[0], parts[1], types.UID(parts[2]), parts[3])
	}
	return nil
}

// syncKubelet asks kubelet to sync pod namespace/name again, when it is
// still the pod of that uid, a Flock's member, not deleted, with no container started
// yet, and retried fewer than maxKubeletRetries times.
func (c *PodRetryController) syncKubelet(ctx context.Context, namespace, name string, uid types.UID, node string) error {
	pod, err := c.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if pod.UID != uid || ref == nil || !IsFlockRef(ref) || pod.DeletionTimestamp != nil || containerStarted(pod) {
		return nil
	}
	n, exhausted, err := askAgain(ctx, &c.kubelet, pod.UID, pod.UID, AnnotationKubeletRetry, func(ctx context.Context, patch []byte) error {
		_, err := c.kubeClient.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
		return err
	})
	if exhausted {
		klog.FromContext(ctx).V(2).Info("Kubelet still cannot read a member pod's claim; not asking again", "pod", klog.KObj(pod), "node", node, "retries", maxKubeletRetries)
	}
	if n == 0 {
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

// askAgain counts one more retry of pod in counts and writes its number in
// annotation key of an object (the pod, or its claim) by a merge patch that
// carries the object's objUID, so that it fails on another object of the
// name. It returns the retry's number, or 0 when it wrote none: the pod had
// all its retries (exhausted), the object is gone or replaced, or the patch
// failed (err, the retry not counted).
func askAgain(ctx context.Context, counts *retryCounts, pod, objUID types.UID, key string,
	patch func(ctx context.Context, data []byte) error) (n int, exhausted bool, err error) {
	n, ok := counts.next(pod)
	if !ok {
		return 0, true, nil
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         objUID,
		"annotations": map[string]string{key: strconv.Itoa(n)},
	}})
	if err == nil {
		err = patch(ctx, data)
	}
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err):
		return 0, false, nil // gone, or another object of the name
	case err != nil:
		counts.undo(pod)
		return 0, false, err
	}
	return n, false, nil
}

// retryCounts counts the retries asked of each pod, by UID, up to max.
type retryCounts struct {
	max     int
	mu      sync.Mutex
	retried map[types.UID]int
}

// next counts one more retry of pod uid and returns its number, or false
// when it had max.
func (r *retryCounts) next(uid types.UID) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retried == nil {
		r.retried = map[types.UID]int{}
	}
	if r.retried[uid] >= r.max {
		return 0, false
	}
	r.retried[uid]++
	return r.retried[uid], true
}

// undo takes back a retry whose write failed.
func (r *retryCounts) undo(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retried[uid]--
}

func (r *retryCounts) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.retried, uid)
}

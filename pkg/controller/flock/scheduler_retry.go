// File scheduler_retry.go: a member pod that kube-scheduler refused for an
// unbound claim when the claim was bound. The Flock controller completes a
// member claim's binding itself and creates the member pod right after.
// kube-scheduler can see the pod before the claim's update: it refuses the
// pod ("pod has unbound immediate PersistentVolumeClaims") and parks it until
// an event of the claim. That event can requeue the pod before the volume
// binding plugin's own claim cache has taken the update (two handlers of one
// informer, in no set order; kubernetes/kubernetes#93552): the pod is refused
// again and, with no later event, waits for the scheduler's flush of parked
// pods, 5 minutes. In a 1,000 x 3 run on kwok nodes 13 of 3,000 member pods
// were refused (issue 17). A member pod still unscheduled for that reason
// schedulerRetryDelay after it was seen refused, whose claims are all Bound,
// gets one of its claims annotated (flock.dev/scheduler-retry): an update of
// the claim, on which the scheduler tries the pod again, with a claim cache
// long up to date by then. At most MaxSchedulerRetries times per pod, each a
// schedulerRetryDelay after the last.

package flock

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

const (
	// AnnotationSchedulerRetry on a member's claim counts the times the
	// controller asked kube-scheduler to try the member's pod again.
	AnnotationSchedulerRetry = "flock.dev/scheduler-retry"
	// MaxSchedulerRetries bounds those times per pod.
	MaxSchedulerRetries = 3
	// ReasonSchedulerRetried is the Flock event's reason.
	ReasonSchedulerRetried = "SchedulerRetried"
	// unboundClaimRefusal is kube-scheduler's word for the refusal, in
	// the pod's PodScheduled condition (volume binding plugin, v1.37).
	unboundClaimRefusal = "pod has unbound immediate PersistentVolumeClaims"
)

// schedulerRetryDelay is how long a refused pod is left to the scheduler
// first: a pod requeued by its claim's event is tried again after its
// backoff, 1-2 s for a pod refused once or twice. A variable for tests.
var schedulerRetryDelay = 3 * time.Second

// schedulerFlush is kube-scheduler's flush of parked pods
// (DefaultPodMaxInUnschedulablePodsDuration, v1.37): a pod refused that
// long ago is tried again by the scheduler itself.
const schedulerFlush = 5 * time.Minute

// refusedForUnboundClaim reports whether pod is a Flock's member, not
// deleted, that kube-scheduler has not placed and last refused for an
// unbound claim.
func refusedForUnboundClaim(pod *corev1.Pod) bool {
	_, ok := unboundClaimRefusalSince(pod)
	return ok
}

// unboundClaimRefusalSince returns when kube-scheduler first refused pod
// for an unbound claim (its PodScheduled condition's last transition),
// when pod is a Flock's member, not deleted, not placed and last refused
// so.
func unboundClaimRefusalSince(pod *corev1.Pod) (time.Time, bool) {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return time.Time{}, false
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref == nil || !IsFlockRef(ref) {
		return time.Time{}, false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.LastTransitionTime.Time, c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
				strings.Contains(c.Message, unboundClaimRefusal)
		}
	}
	return time.Time{}, false
}

// schedulerRetryKey is the queue key of pod's scheduler retry:
// namespace/name/uid.
func schedulerRetryKey(pod *corev1.Pod) string {
	return pod.Namespace + "/" + pod.Name + "/" + string(pod.UID)
}

// syncScheduler asks kube-scheduler to try pod namespace/name again when it
// is still the pod of that uid, still refused for an unbound claim, every
// claim it mounts is Bound, and it was retried fewer than
// MaxSchedulerRetries times; then it looks again after schedulerRetryDelay.
// A claim not Bound yet is looked at again after that delay too, as its
// binding's event may meet the same race, until the scheduler's own flush
// would try the pod again anyway.
func (c *PodRetryController) syncScheduler(ctx context.Context, key, namespace, name string, uid types.UID) error {
	pod, err := c.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	since, refused := unboundClaimRefusalSince(pod)
	if pod.UID != uid || !refused {
		return nil
	}
	claim, err := c.boundClaim(pod)
	if err != nil || claim == nil {
		if time.Since(since) < schedulerFlush {
			c.queue.addAfter(key, schedulerRetryDelay)
		}
		return err
	}
	n, exhausted, err := askAgain(ctx, &c.scheduler, pod.UID, claim.UID, AnnotationSchedulerRetry, func(ctx context.Context, patch []byte) error {
		_, err := c.kubeClient.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
		return err
	})
	if exhausted {
		klog.FromContext(ctx).V(2).Info("kube-scheduler still refuses a member pod for an unbound claim; not asking again",
			"pod", klog.KObj(pod), "claim", klog.KObj(claim), "retries", MaxSchedulerRetries)
	}
	if n == 0 {
		return err
	}
	schedulerRetries.Inc()
	klog.FromContext(ctx).V(2).Info("Asked kube-scheduler to try a member pod again: it had refused the pod for an unbound claim that is Bound",
		"pod", klog.KObj(pod), "claim", klog.KObj(claim), "retry", n)
	ref := metav1.GetControllerOfNoCopy(pod)
	c.recorder.Eventf(&corev1.ObjectReference{Kind: ref.Kind, APIVersion: ref.APIVersion, Name: ref.Name, Namespace: pod.Namespace, UID: ref.UID},
		corev1.EventTypeNormal, ReasonSchedulerRetried,
		"kube-scheduler refused pod %s for an unbound claim although claim %s is Bound (its cache was behind) and would try again only in up to 5 minutes; asked it to try again now (%d of %d)",
		pod.Name, claim.Name, n, MaxSchedulerRetries)
	c.queue.addAfter(key, schedulerRetryDelay)
	return nil
}

// boundClaim returns the first claim pod mounts when every claim it mounts
// is cached and its binding complete (a volume named, the bind-completed
// annotation, the phase Bound), nil otherwise.
func (c *PodRetryController) boundClaim(pod *corev1.Pod) (*corev1.PersistentVolumeClaim, error) {
	var first *corev1.PersistentVolumeClaim
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		claim, err := c.claimLister.PersistentVolumeClaims(pod.Namespace).Get(v.PersistentVolumeClaim.ClaimName)
		if apierrors.IsNotFound(err) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		if claim.Spec.VolumeName == "" || !metav1.HasAnnotation(claim.ObjectMeta, annBindCompleted) || claim.Status.Phase != corev1.ClaimBound {
			return nil, nil
		}
		if first == nil {
			first = claim
		}
	}
	return first, nil
}

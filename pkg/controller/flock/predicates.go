// File predicates.go: predicates on pods and nodes: terminating, terminal, running and
// ready, available after minReadySeconds, must be force-deleted, is (not)
// the member it claims to be, shows a failure. Pure.

package flock

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// podReadyCondition returns the Ready condition of a pod, or nil.
func podReadyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func isTerminating(pod *corev1.Pod) bool { return pod.DeletionTimestamp != nil }

func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// HelperSucceeded reports whether a helper pod has done its job: its phase
// is Succeeded, or it is never restarted and every container it reports has
// exited with code 0. kubelet reports a container's exit at the relist that
// sees it, but the phase Succeeded only once it has stopped the pod's
// sandbox, about a second later on a real node; what the helper did is done
// at the exit. The bench's timeline counts a helper done by it too.
func HelperSucceeded(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded {
		return true
	}
	cs := pod.Status.ContainerStatuses
	if pod.Status.Phase == corev1.PodFailed || pod.Spec.RestartPolicy != corev1.RestartPolicyNever || len(cs) == 0 {
		return false
	}
	return !slices.ContainsFunc(cs, func(s corev1.ContainerStatus) bool {
		return s.State.Terminated == nil || s.State.Terminated.ExitCode != 0
	})
}

// helperFinished reports whether nothing of a helper pod runs any more: its
// phase is terminal, or it succeeded (HelperSucceeded) before kubelet says so.
func helperFinished(pod *corev1.Pod) bool { return isTerminal(pod) || HelperSucceeded(pod) }

// isRunningAndReady: Running, Ready and not being deleted.
func isRunningAndReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || isTerminating(pod) {
		return false
	}
	c := podReadyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}

// availableAfter returns how long until a Running and Ready pod has been
// Ready for minReadySeconds (<= 0: it is available), and false when the pod
// is not Running and Ready.
func availableAfter(pod *corev1.Pod, minReadySeconds int32, now time.Time) (time.Duration, bool) {
	if !isRunningAndReady(pod) {
		return 0, false
	}
	if minReadySeconds <= 0 {
		return 0, true
	}
	since := podReadyCondition(pod).LastTransitionTime.Time
	return since.Add(time.Duration(minReadySeconds) * time.Second).Sub(now), true
}

// isAvailable: Running and Ready for at least minReadySeconds.
func isAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	d, ok := availableAfter(pod, minReadySeconds, now)
	return ok && d <= 0
}

// mustForceDelete reports whether pod has to be deleted with grace period
// 0: the node it is pinned to is gone, or tainted
// node.kubernetes.io/out-of-service, so no kubelet will ever confirm that
// it stopped. A pod on a node that is merely NotReady is never
// force-deleted: the node may be partitioned and still run it.
func mustForceDelete(pod *corev1.Pod, nodes map[string]*corev1.Node) bool {
	name := PinnedNode(pod)
	if name == "" {
		return false
	}
	return nodeConfirmedDown(nodes[name])
}

// followsVolume reports whether member ord of f goes where its volume can
// be used rather than to a recorded node: with a claim template, unless
// spec.placement.nodes names its node. Its pod is then not pinned, and its
// recorded node follows the pod (planFollow).
func followsVolume(f *v1alpha1.Flock, ord int32) bool {
	return usesClaimTemplate(f) && int(ord) >= len(f.Spec.Placement.Nodes)
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

// identityMismatch says why pod cannot be member m of Flock f ("" when it
// can): it must be pinned to m.Node (unless the member follows its volume,
// see followsVolume), carry the member's hostname and subdomain, and mount
// the member's claim as the volume storage.volumeName. These fields cannot
// change on a pod, so a mismatching pod has to be replaced (a pod made by an
// earlier version, with a hostPath data volume, too).
func identityMismatch(f *v1alpha1.Flock, m v1alpha1.FlockMember, pod *corev1.Pod) string {
	if node := PinnedNode(pod); node != m.Node && !followsVolume(f, m.Ordinal) {
		if node == "" {
			return fmt.Sprintf("pod %s is not pinned to node %s", pod.Name, m.Node)
		}
		return fmt.Sprintf("pod %s is on node %s, but member %d is assigned to node %s", pod.Name, node, m.Ordinal, m.Node)
	}
	if pod.Spec.Hostname != pod.Name || pod.Spec.Subdomain != serviceNameOf(f) {
		return fmt.Sprintf("pod %s has hostname %q and subdomain %q, want %q and %q",
			pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain, pod.Name, serviceNameOf(f))
	}
	want := memberDataVolume(f, m.Ordinal)
	if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == want.Name && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == want.PersistentVolumeClaim.ClaimName
	}) {
		return fmt.Sprintf("pod %s does not mount claim %s as volume %q", pod.Name, want.PersistentVolumeClaim.ClaimName, want.Name)
	}
	return ""
}

// failingWaitingReasons are container waiting reasons that show a
// template cannot work: a rollout need not wait longer to call it halted.
var failingWaitingReasons = map[string]bool{
	"CrashLoopBackOff": true, "ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// podFailure says how a pod shows that it cannot run ("" when it does not).
func podFailure(pod *corev1.Pod) string {
	if pod.Status.Phase == corev1.PodFailed {
		msg := "it failed"
		if pod.Status.Reason != "" {
			msg += ": " + pod.Status.Reason
		}
		return msg
	}
	statuses := append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && failingWaitingReasons[w.Reason] {
			msg := fmt.Sprintf("container %s is in %s", cs.Name, w.Reason)
			if w.Message != "" {
				msg += ": " + w.Message
			}
			return msg
		}
	}
	return ""
}

// helperFinishedAt returns when a terminated helper's container finished,
// or its creation time when that is unknown.
func helperFinishedAt(pod *corev1.Pod) time.Time {
	var t time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.FinishedAt.After(t) {
			t = term.FinishedAt.Time
		}
	}
	if t.IsZero() {
		return pod.CreationTimestamp.Time
	}
	return t
}

// podFailureSummary says briefly why a terminated pod failed.
func podFailureSummary(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.ExitCode != 0 {
			msg := fmt.Sprintf("exit code %d", term.ExitCode)
			if term.Reason != "" {
				msg += ", " + term.Reason
			}
			return msg
		}
	}
	if pod.Status.Reason != "" {
		return pod.Status.Reason
	}
	return "phase Failed"
}

// nodeConfirmedDown reports whether node (nil: its object is gone) is known
// to run no pod any more: it is gone, or an administrator tainted it
// node.kubernetes.io/out-of-service.
func nodeConfirmedDown(node *corev1.Node) bool {
	if node == nil {
		return true
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			return true
		}
	}
	return false
}

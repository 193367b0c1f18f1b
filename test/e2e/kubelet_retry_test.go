package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flockcontroller "flock.dev/flock/pkg/controller/flock"
)

// unschedulableMember creates a 1-member Flock name in a new namespace whose
// pod is not scheduled (unschedulable changes its template), and returns
// the namespace and the member pod once its PodScheduled condition is
// false.
func unschedulableMember(t *testing.T, name string, unschedulable func(*corev1.PodSpec)) (string, *corev1.Pod) {
	ns := newNamespace(t)
	f := newFlock(name, ns, 1)
	unschedulable(&f.Spec.Template.Spec)
	createFlock(t, f)
	var pod *corev1.Pod
	eventually(t, 90*time.Second, "member pod "+name+"-0 not scheduled", func(ctx context.Context) error {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name+"-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				pod = p
				return nil
			}
		}
		return fmt.Errorf("conditions %v", p.Status.Conditions)
	})
	return ns, pod
}

// TestKubeletRetryOnNodeAuthorizerRefusal: kubelet's FailedMount event for a
// member pod whose claim the node authorizer refused (kubelet then waits its
// 10-15 s sync backoff; kubernetes/kubernetes#113429) gets the pod annotated,
// which makes kubelet sync it again at once, and a KubeletRetried event on the
// Flock. It runs on the real control plane with the controller's own RBAC;
// the event is written here as kubelet writes it (the race that makes a real
// kubelet write it cannot be forced; the real-node bench meets it about once
// in twenty runs). The member's pod cannot be scheduled (it asks for more CPU
// than any node has), so no container starts.
func TestKubeletRetryOnNodeAuthorizerRefusal(t *testing.T) {
	ns, pod := unschedulableMember(t, "refused", func(spec *corev1.PodSpec) {
		spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4000")}
	})
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "refused-0.", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
		Reason:         "FailedMount",
		Type:           corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "kubelet", Host: "kwok-node-0"},
		Count:          1,
		FirstTimestamp: metav1.Now(),
		LastTimestamp:  metav1.Now(),
		Message:        fmt.Sprintf(`Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC %[1]s/data-refused-0: failed to fetch PVC from API server: persistentvolumeclaims "data-refused-0" is forbidden: User "system:node:kwok-node-0" cannot get resource "persistentvolumeclaims" in API group "" in the namespace "%[1]s": node: no relationship found between node 'kwok-node-0' and this object`, ns),
	}
	if _, err := env.Kube.CoreV1().Events(ns).Create(ctxFor(t), ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "pod refused-0 annotated "+flockcontroller.AnnotationKubeletRetry, func(ctx context.Context) error {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "refused-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := p.Annotations[flockcontroller.AnnotationKubeletRetry]; got != "1" {
			return fmt.Errorf("annotation %q, want 1", got)
		}
		return nil
	})
	lcWaitEvent(t, ns, "refused", flockcontroller.ReasonKubeletRetried, "refused-0", "kwok-node-0")
}

// TestSchedulerRetryOnStaleClaimRefusal: a member pod that kube-scheduler
// refused for an unbound claim while the claim is Bound (its volume binding
// plugin's claim cache was behind the event that requeued the pod,
// kubernetes/kubernetes#93552; the pod then waits up to 5 minutes for the
// scheduler's flush) gets its claim annotated, an update on which the
// scheduler tries the pod again, and a SchedulerRetried event on the Flock.
// It runs on the real control plane with the controller's own RBAC; the
// refusal is written here into the pod's PodScheduled condition as
// kube-scheduler writes it (the race cannot be forced; a 1,000 x 3 bench run
// met it for 13 of 3,000 pods). The member's pod has a scheduling gate, so
// that it stays unscheduled and the scheduler does not write its condition
// over the one written here (a pod it could try, it would try again on any
// node added by a test running beside this one).
func TestSchedulerRetryOnStaleClaimRefusal(t *testing.T) {
	ns, pod := unschedulableMember(t, "stale", func(spec *corev1.PodSpec) {
		spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "flock.dev/e2e-hold"}}
	})
	claim := "data-stale-0"
	c, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctxFor(t), claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim %s is %s, want Bound before its pod is made", claim, c.Status.Phase)
	}
	for i := range pod.Status.Conditions {
		if cond := &pod.Status.Conditions[i]; cond.Type == corev1.PodScheduled {
			cond.Reason = corev1.PodReasonUnschedulable
			cond.Message = "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found"
			cond.LastTransitionTime = metav1.Now()
		}
	}
	if _, err := env.Kube.CoreV1().Pods(ns).UpdateStatus(ctxFor(t), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "claim "+claim+" annotated "+flockcontroller.AnnotationSchedulerRetry, func(ctx context.Context) error {
		c, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := c.Annotations[flockcontroller.AnnotationSchedulerRetry]; got != "1" {
			return fmt.Errorf("annotation %q, want 1", got)
		}
		return nil
	})
	lcWaitEvent(t, ns, "stale", flockcontroller.ReasonSchedulerRetried, "stale-0", claim+" is Bound")
	// Here the pod is gated, so the claim's update does not make the
	// scheduler try it (for a pod the volume binding plugin refused, any
	// update of the pod's claim does) and the written refusal stays: the
	// controller asks again after each delay, up to its bound, then no more.
	want := strconv.Itoa(flockcontroller.MaxSchedulerRetries)
	claimRetries := func(ctx context.Context) error {
		c, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := c.Annotations[flockcontroller.AnnotationSchedulerRetry]; got != want {
			return fmt.Errorf("annotation %q, want %s", got, want)
		}
		return nil
	}
	eventually(t, 60*time.Second, "claim "+claim+" retried "+want+" times", claimRetries)
	consistently(t, 10*time.Second, "no retry of "+claim+" after the last", claimRetries)
}

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flockcontroller "flock.dev/flock/pkg/controller/flock"
)

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
	ns := newNamespace(t)
	f := newFlock("refused", ns, 1)
	f.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4000")}
	createFlock(t, f)
	var pod *corev1.Pod
	eventually(t, 90*time.Second, "member pod refused-0", func(ctx context.Context) error {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "refused-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod = p
		return nil
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

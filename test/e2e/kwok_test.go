package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/test/cluster"
)

// The fake kubelet behaves as the stages in hack/kwok/stages.yaml promise:
// later tests build on these behaviours.
func TestKwokStages(t *testing.T) {
	ns := newNamespace(t)
	ctx := ctxFor(t)
	pods := env.Kube.CoreV1().Pods(ns)
	mk := func(name string, labels, annotations map[string]string, restart corev1.RestartPolicy) {
		t.Helper()
		_, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{
				RestartPolicy: restart,
				Containers:    []corev1.Container{{Name: "c", Image: "busybox:1.36"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	mk("ready", nil, nil, corev1.RestartPolicyAlways)
	mk("unready-label", map[string]string{cluster.NeverReadyMarker: "true"}, nil, corev1.RestartPolicyAlways)
	mk("unready-annotation", nil, map[string]string{cluster.NeverReadyMarker: "true"}, corev1.RestartPolicyAlways)
	mk("once", nil, nil, corev1.RestartPolicyNever)

	type want struct {
		phase corev1.PodPhase
		ready corev1.ConditionStatus
		ip    bool
	}
	for name, w := range map[string]want{
		"ready":              {corev1.PodRunning, corev1.ConditionTrue, true},
		"unready-label":      {corev1.PodRunning, corev1.ConditionFalse, true},
		"unready-annotation": {corev1.PodRunning, corev1.ConditionFalse, true},
		"once":               {corev1.PodSucceeded, corev1.ConditionFalse, true},
	} {
		eventually(t, 60*time.Second, "pod "+name, func(ctx context.Context) error {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ready := corev1.ConditionUnknown
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					ready = c.Status
				}
			}
			if p.Status.Phase != w.phase || ready != w.ready || (p.Status.PodIP != "") != w.ip || p.Spec.NodeName == "" {
				return fmt.Errorf("phase %s ready %s ip %q node %q, want %+v", p.Status.Phase, ready, p.Status.PodIP, p.Spec.NodeName, w)
			}
			return nil
		})
	}

	// A node can be made NotReady and Ready again.
	node := env.NodeNames[len(env.NodeNames)-1]
	nodeReady := func(want corev1.ConditionStatus) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			n, err := env.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == want {
					return nil
				}
			}
			return fmt.Errorf("node %s conditions %v, want Ready=%s", node, n.Status.Conditions, want)
		}
	}
	setLabel := func(ctx context.Context, value *string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, cluster.NodeNotReadyLabel)
		if value != nil {
			patch = fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, cluster.NodeNotReadyLabel, *value)
		}
		if _, err := env.Kube.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		setLabel(ctx, nil)
	})
	on := "true"
	setLabel(ctx, &on)
	eventually(t, 60*time.Second, "node NotReady", nodeReady(corev1.ConditionFalse))
	setLabel(ctx, nil)
	eventually(t, 60*time.Second, "node Ready again", nodeReady(corev1.ConditionTrue))
}

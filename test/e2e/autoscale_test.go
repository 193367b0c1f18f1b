package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flock.dev/flock/test/cluster"
)

// hpaWait bounds the HPA controller's first pass over a new autoscaler: it
// takes a new HorizontalPodAutoscaler up at once, then every 15 s.
const hpaWait = 90 * time.Second

// A HorizontalPodAutoscaler drives a Flock as it drives a StatefulSet:
// `kubectl autoscale` finds the Flock's scale subresource by discovery, and
// kube-controller-manager's HPA controller reads and writes it through the
// aggregator. The cluster has no metrics API, so the autoscaler acts on its
// bounds alone: replicas below --min are raised to it, replicas above --max
// lowered to it. A minimum more than
// the eligible nodes hold is refused by the scale's capacity check; the
// autoscaler reports the refusal (AbleToScale False, a FailedRescale event,
// both with the capacity message) and the Flock stays as it was.
func TestHorizontalPodAutoscaler(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		createFlock(t, newFlock("web", ns, 1))
		createFlock(t, newFlock("big", ns, 1))
		if out := kubectl(t, k, "autoscale", "fl/web", "-n", ns, "--min=2", "--max=3"); strings.TrimSpace(out) != "horizontalpodautoscaler.autoscaling/web autoscaled" {
			t.Errorf("kubectl autoscale printed %q", out)
		}
		// The cluster's 3 kwok nodes are the eligible ones.
		kubectl(t, k, "autoscale", "fl/big", "-n", ns, "--min=4", "--max=5")

		eventually(t, hpaWait, "the autoscaler raises Flock web to its minimum", func(ctx context.Context) error {
			return specReplicas(ctx, ns, "web", 2)
		})
		eventually(t, hpaWait, "the autoscaler of web reports the rescale", func(ctx context.Context) error {
			h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if h.Spec.ScaleTargetRef.Kind != "Flock" || h.Spec.ScaleTargetRef.APIVersion != "flock.dev/v1alpha1" {
				return fmt.Errorf("scaleTargetRef %+v, want the Flock", h.Spec.ScaleTargetRef)
			}
			if h.Status.DesiredReplicas != 2 || h.Status.LastScaleTime == nil {
				return fmt.Errorf("status desiredReplicas %d, lastScaleTime %v; want 2 and set", h.Status.DesiredReplicas, h.Status.LastScaleTime)
			}
			if c := hpaCondition(h, autoscalingv2.AbleToScale); c == nil || c.Status != corev1.ConditionTrue {
				return fmt.Errorf("AbleToScale %+v, want True", c)
			}
			return hpaEvent(ctx, ns, h, "SuccessfulRescale", "New size: 2; reason: Current number of replicas below Spec.MinReplicas")
		})

		// Above --max: a lowered maximum scales the Flock down to it.
		kubectl(t, k, "scale", "fl/web", "-n", ns, "--replicas=3")
		kubectl(t, k, "patch", "hpa/web", "-n", ns, "--type=merge", "-p", `{"spec":{"maxReplicas":2}}`)
		eventually(t, hpaWait, "the autoscaler lowers Flock web to its new maximum", func(ctx context.Context) error {
			if err := specReplicas(ctx, ns, "web", 2); err != nil {
				return err
			}
			h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			return hpaEvent(ctx, ns, h, "SuccessfulRescale", "New size: 2; reason: Current number of replicas above Spec.MaxReplicas")
		})

		// What the autoscaler's metrics would select the members by.
		scale, err := env.Flock.FlockV1alpha1().Flocks(ns).GetScale(ctxFor(t), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if scale.Status.Selector != "app=web" {
			t.Errorf("scale subresource status.selector %q, want app=web", scale.Status.Selector)
		}

		const capacity = "spec.replicas: Invalid value: 4: only 3 of 3 nodes are eligible"
		eventually(t, hpaWait, "the autoscaler of big reports the refused scale", func(ctx context.Context) error {
			h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "big", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := hpaCondition(h, autoscalingv2.AbleToScale)
			if c == nil || c.Status != corev1.ConditionFalse || c.Reason != "FailedUpdateScale" || !strings.Contains(c.Message, capacity) {
				return fmt.Errorf("AbleToScale %+v, want False, FailedUpdateScale, with %q", c, capacity)
			}
			return hpaEvent(ctx, ns, h, "FailedRescale", capacity)
		})
		f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "big", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ptr.Deref(f.Spec.Replicas, 0); got != 1 || f.Generation != 1 {
			t.Errorf("Flock big after a refused scale: spec.replicas %d, generation %d; want 1 and 1", got, f.Generation)
		}
	})
}

// specReplicas returns nil once Flock name's spec.replicas is want.
func specReplicas(ctx context.Context, ns, name string, want int32) error {
	f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got := ptr.Deref(f.Spec.Replicas, 0); got != want {
		return fmt.Errorf("spec.replicas %d, want %d", got, want)
	}
	return nil
}

func hpaCondition(h *autoscalingv2.HorizontalPodAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range h.Status.Conditions {
		if h.Status.Conditions[i].Type == typ {
			return &h.Status.Conditions[i]
		}
	}
	return nil
}

// hpaEvent returns nil once the autoscaler has an event of reason whose
// message contains want.
func hpaEvent(ctx context.Context, ns string, h *autoscalingv2.HorizontalPodAutoscaler, reason, want string) error {
	evs, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(h.UID)})
	if err != nil {
		return err
	}
	var seen []string
	for _, e := range evs.Items {
		if e.Reason == reason && strings.Contains(e.Message, want) {
			return nil
		}
		seen = append(seen, e.Reason+": "+e.Message)
	}
	return fmt.Errorf("no %s event with %q; events: %q", reason, want, seen)
}

package flock

import (
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func TestNewPodDisruptionBudget(t *testing.T) {
	tests := []struct {
		name     string
		replicas int32
		budget   v1alpha1.FlockDisruptionBudget
		want     *intstr.IntOrString // minAvailable; nil: no budget
	}{
		{"default: one may go", 3, v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.ManagedDisruptionBudget}, ptr.To(intstr.FromInt32(2))},
		{"maxUnavailable 2", 5, v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.ManagedDisruptionBudget, MaxUnavailable: ptr.To(intstr.FromInt32(2))}, ptr.To(intstr.FromInt32(3))},
		{"percentage rounds down", 5, v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.ManagedDisruptionBudget, MaxUnavailable: ptr.To(intstr.FromString("50%"))}, ptr.To(intstr.FromInt32(3))},
		{"small percentage is at least one", 3, v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.ManagedDisruptionBudget, MaxUnavailable: ptr.To(intstr.FromString("10%"))}, ptr.To(intstr.FromInt32(2))},
		{"more than replicas: zero", 1, v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.ManagedDisruptionBudget, MaxUnavailable: ptr.To(intstr.FromInt32(3))}, ptr.To(intstr.FromInt32(0))},
		{"None: no budget", 3, v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.NoDisruptionBudget}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &v1alpha1.Flock{
				ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "uid-1"},
				Spec: v1alpha1.FlockSpec{
					Replicas:         ptr.To(tc.replicas),
					Selector:         &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
					DisruptionBudget: tc.budget,
				},
			}
			got := NewPodDisruptionBudget(f)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("budget %+v, want none", got.Spec)
				}
				return
			}
			if got == nil || got.Spec.MinAvailable == nil || *got.Spec.MinAvailable != *tc.want || got.Spec.MaxUnavailable != nil {
				t.Fatalf("budget %+v, want minAvailable %v", got, tc.want)
			}
			if got.Name != "db" || got.Namespace != "ns" {
				t.Errorf("budget %s/%s, want ns/db", got.Namespace, got.Name)
			}
			if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != "uid-1" || ref.Kind != "Flock" {
				t.Errorf("controller %+v, want the Flock", ref)
			}
			sel := got.Spec.Selector.MatchLabels
			if sel["app"] != "db" || sel[v1alpha1.LabelFlockName] != "db" || len(sel) != 2 {
				t.Errorf("selector %v, want the members' labels", sel)
			}
			if got.Spec.UnhealthyPodEvictionPolicy == nil || *got.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
				t.Errorf("unhealthyPodEvictionPolicy %v, want AlwaysAllow", got.Spec.UnhealthyPodEvictionPolicy)
			}
		})
	}
}

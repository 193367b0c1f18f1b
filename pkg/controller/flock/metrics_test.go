package flock

import (
	"errors"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

// memberGauges returns the flock_controller_members series of one Flock,
// by state.
func memberGauges(t *testing.T, namespace, name string) map[string]float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range families {
		if mf.GetName() != "flock_controller_members" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !testutil.LabelsMatch(m, map[string]string{"namespace": namespace, "flock": name}) {
				continue
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

func TestMemberMetrics(t *testing.T) {
	registerMetrics()
	f := newFixture(t, "n-a", "n-b")
	f.createFlock(newFlock("metrics", 3))
	f.settle("metrics")
	want := map[string]float64{"Ready": 2, "NotReady": 0, "Missing": 0, "Blocked": 0, "Unplaced": 1}
	if got := memberGauges(t, testNamespace, "metrics"); !maps.Equal(got, want) {
		t.Fatalf("members metric = %v, want %v", got, want)
	}
	errorsBefore, _ := testutil.GetCounterMetricValue(syncTotal.WithLabelValues("error"))
	f.members.failNext("DeletePod", 1, errors.New("injected"))
	f.updatePod("metrics-0", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
	_ = f.sync("metrics")
	if after, _ := testutil.GetCounterMetricValue(syncTotal.WithLabelValues("error")); after != errorsBefore+1 {
		t.Errorf("error syncs %v -> %v, want one more", errorsBefore, after)
	}

	if err := f.flockClient.FlockV1alpha1().Flocks(testNamespace).Delete(f.ctx, "metrics", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refreshFlocks()
	f.mustSync("metrics")
	if got := memberGauges(t, testNamespace, "metrics"); len(got) != 0 {
		t.Fatalf("series left for a deleted Flock: %v", got)
	}
}

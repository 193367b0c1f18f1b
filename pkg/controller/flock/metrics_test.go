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

// memberGauges returns the flock_controller_members series, by state,
// and flock_controller_flocks.
func memberGauges(t *testing.T) (map[string]float64, float64) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, s := range AllMemberStates {
		out[string(s)] = 0 // a state without a series yet counts none
	}
	var flocks float64
	for _, mf := range families {
		switch mf.GetName() {
		case "flock_controller_flocks":
			flocks = mf.GetMetric()[0].GetGauge().GetValue()
		case "flock_controller_members":
			for _, m := range mf.GetMetric() {
				if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetName() != "state" {
					t.Fatalf("flock_controller_members has labels %v, want only state", m.GetLabel())
				}
				out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	return out, flocks
}

// minus returns a - b by key.
func minus(a, b map[string]float64) map[string]float64 {
	out := maps.Clone(a)
	for k, v := range b {
		out[k] -= v
	}
	return out
}

func TestMemberMetrics(t *testing.T) {
	registerMetrics()
	f := newFixture(t, "n-a", "n-b")
	// Other Flocks of the process count too: compare differences.
	before, flocksBefore := memberGauges(t)
	f.createFlock(newFlock("metrics", 3))
	f.settle("metrics")
	after, flocksAfter := memberGauges(t)
	if got, want := minus(after, before), map[string]float64{"Ready": 2, "NotReady": 0, "Missing": 0, "Blocked": 0, "Unplaced": 1}; !maps.Equal(got, want) {
		t.Fatalf("members metric grew by %v, want %v", got, want)
	}
	if flocksAfter != flocksBefore+1 {
		t.Errorf("flocks %v -> %v, want one more", flocksBefore, flocksAfter)
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
	gone, flocksGone := memberGauges(t)
	if !maps.Equal(gone, before) || flocksGone != flocksBefore {
		t.Fatalf("after the Flock is deleted: members %v, flocks %v; want them back to %v, %v", gone, flocksGone, before, flocksBefore)
	}
}

// File metrics.go: the controller's metrics (members by state).

package flock

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	// Registers the Prometheus provider of workqueue metrics (depth, adds,
	// latency, ...) for the controller's queue, named "flock".
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
)

const metricsSubsystem = "flock_controller"

var (
	syncTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "syncs_total",
		Help:           "Number of Flock syncs, by result (success or error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	syncDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "sync_duration_seconds",
		Help:           "Duration of one Flock sync in seconds.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	})

	membersByState = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "members",
		Help:           "Number of members (ordinals below spec.replicas) of each Flock, by state (Ready, NotReady, Missing, Blocked, Unplaced).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "flock", "state"})
)

var registerOnce sync.Once

// registerMetrics registers the controller's metrics with the legacy
// registry, once per process.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(syncTotal, syncDuration, membersByState)
	})
}

// setMemberMetrics publishes the member counts of one Flock.
func setMemberMetrics(namespace, name string, states map[MemberState]int) {
	for _, s := range AllMemberStates {
		membersByState.WithLabelValues(namespace, name, string(s)).Set(float64(states[s]))
	}
}

// deleteMemberMetrics removes the series of a Flock that is gone.
func deleteMemberMetrics(namespace, name string) {
	for _, s := range AllMemberStates {
		membersByState.DeleteLabelValues(namespace, name, string(s))
	}
}

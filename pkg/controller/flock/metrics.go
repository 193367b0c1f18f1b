// File metrics.go: the controller's metrics, bounded in cardinality:
// members by state summed over all Flocks, sync counts and durations, and
// the workqueue's metrics. Per-Flock state is in each Flock's status.

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
		Help:           "Number of members (ordinals below spec.replicas) of all Flocks together, by state (Ready, NotReady, Missing, Blocked, Unplaced).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"state"})

	flocksTracked = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "flocks",
		Help:           "Number of Flocks whose members the controller counts in flock_controller_members.",
		StabilityLevel: metrics.ALPHA,
	})

	kubeletRetries = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "kubelet_retries_total",
		Help:           "Number of times a kubelet was asked to sync a member pod again after the node authorizer refused it the pod's claim (kubelet_retry.go).",
		StabilityLevel: metrics.ALPHA,
	})

	schedulerRetries = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "scheduler_retries_total",
		Help:           "Number of times kube-scheduler was asked to try a member pod again after it refused the pod for an unbound claim that was Bound (scheduler_retry.go).",
		StabilityLevel: metrics.ALPHA,
	})

	namespaceGoneDeletes = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "namespace_gone_deletes_total",
		Help:           "Number of Flocks deleted because their namespace no longer existed (namespace_gone.go).",
		StabilityLevel: metrics.ALPHA,
	})

	// totals holds each Flock's last member counts so that the
	// flock_controller_members totals can be adjusted by difference.
	totals = newMemberTotals()
)

var registerOnce sync.Once

// registerMetrics registers the controller's metrics with the legacy
// registry, once per process.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(syncTotal, syncDuration, membersByState, flocksTracked, kubeletRetries, schedulerRetries, namespaceGoneDeletes)
	})
}

// memberTotals sums member counts over Flocks. Its memory grows with the
// number of Flocks; its series do not.
type memberTotals struct {
	mu     sync.Mutex
	flocks map[string]map[MemberState]int
	sum    map[MemberState]int
}

func newMemberTotals() *memberTotals {
	return &memberTotals{flocks: map[string]map[MemberState]int{}, sum: map[MemberState]int{}}
}

// set records the member counts of the Flock with key (nil forgets it)
// and publishes the new totals.
func (t *memberTotals) set(key string, states map[MemberState]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s, n := range t.flocks[key] {
		t.sum[s] -= n
	}
	if states == nil {
		delete(t.flocks, key)
	} else {
		counts := make(map[MemberState]int, len(states))
		for s, n := range states {
			counts[s] = n
			t.sum[s] += n
		}
		t.flocks[key] = counts
	}
	for _, s := range AllMemberStates {
		membersByState.WithLabelValues(string(s)).Set(float64(t.sum[s]))
	}
	flocksTracked.Set(float64(len(t.flocks)))
}

// setMemberMetrics records the member counts of one Flock in the totals.
func setMemberMetrics(key string, states map[MemberState]int) {
	totals.set(key, states)
}

// deleteMemberMetrics removes a Flock that is gone from the totals.
func deleteMemberMetrics(key string) {
	totals.set(key, nil)
}

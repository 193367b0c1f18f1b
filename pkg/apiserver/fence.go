package apiserver

// fence.go keeps a replica that lost the controller lease from writing. A
// replica frozen longer than the lease (SIGSTOP, a stalled VM, a long GC
// pause) wakes up with its workers in the middle of syncs and its caches
// from before the freeze, while another replica already leads. client-go
// ends the term only once the elector goroutine runs again and fails to
// renew; until then the workers would write from stale caches (the fault
// suite saw a deleted Flock's data helper pods made again this way). The
// fence refuses every write of the controller's clients unless this replica
// holds the lease and renewed it within the renew deadline, so the check
// sits right before each request is sent.

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// writeFence decides whether the controller may write now. Its zero value
// lets every write through (no leader election).
type writeFence struct {
	check atomic.Pointer[func() error]
}

// set makes check decide; a nil check opens the fence.
func (f *writeFence) set(check func() error) {
	if check == nil {
		f.check.Store(nil)
		return
	}
	f.check.Store(&check)
}

// allow returns why a write may not be sent now, or nil.
func (f *writeFence) allow() error {
	if c := f.check.Load(); c != nil {
		return (*c)()
	}
	return nil
}

// wrap is a rest.Config WrapTransport: reads (GET, HEAD, OPTIONS, so lists
// and watches too) pass; any other request is sent only while the fence
// allows it, else it fails before it leaves the process.
func (f *writeFence) wrap(next http.RoundTripper) http.RoundTripper {
	return fencedTransport{fence: f, next: next}
}

type fencedTransport struct {
	fence *writeFence
	next  http.RoundTripper
}

func (t fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if err := t.fence.allow(); err != nil {
			fencedWrites.Inc()
			return nil, fmt.Errorf("flock-controller did not send %s %s: %w", req.Method, req.URL.Path, err)
		}
	}
	return t.next.RoundTrip(req)
}

// errNoLease is the fence's answer while this replica does not lead.
var errNoLease = fmt.Errorf("this replica does not hold the Flock controller lease")

// leaseCheck is the fence of a replica under leader election: it allows
// writes while elector says this replica holds the lease and its last
// successful renewal (or acquisition) is at most renewDeadline old. The
// elector itself gives up after renewDeadline without a renewal, and other
// replicas take over only after the whole lease duration, so a replica
// stops writing before another may start.
func leaseCheck(elector *leaderelection.LeaderElector, leaseDuration, renewDeadline time.Duration) func() error {
	return func() error {
		if !elector.IsLeader() {
			return errNoLease
		}
		if err := elector.Check(renewDeadline - leaseDuration); err != nil {
			return fmt.Errorf("the Flock controller lease was not renewed within the renew deadline (%s): %w", renewDeadline, err)
		}
		return nil
	}
}

var (
	fencedWrites = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      "flock_controller",
		Name:           "fenced_writes_total",
		Help:           "Number of the controller's writes not sent because this replica did not hold a freshly renewed lease.",
		StabilityLevel: metrics.ALPHA,
	})
	fenceMetricsOnce sync.Once
)

func registerFenceMetrics() {
	fenceMetricsOnce.Do(func() { legacyregistry.MustRegister(fencedWrites) })
}

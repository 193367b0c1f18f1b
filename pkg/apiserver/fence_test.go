package apiserver

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// countingTransport counts the requests that reach it.
type countingTransport struct{ sent atomic.Int32 }

func (c *countingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	c.sent.Add(1)
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

// send sends one request of method through rt and reports its error.
func send(t *testing.T, rt http.RoundTripper, method string) error {
	t.Helper()
	req, err := http.NewRequest(method, "https://core.example/api/v1/namespaces/flock-system/pods", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// A replica whose elector is stuck (as a replica frozen by SIGSTOP is: its
// lease renewals do not run, so client-go has not ended the term and the
// replica still reads as leader) stops writing once its last renewal is
// older than the renew deadline; reads go on. Without the fence the writes
// of its workers, running on stale caches, would reach the cluster.
func TestFenceClosesWhenTheLeaseIsNotRenewedInTime(t *testing.T) {
	const leaseDuration, renewDeadline, retry = 3 * time.Second, 2 * time.Second, 200 * time.Millisecond
	client := fake.NewClientset()
	var stuck atomic.Bool
	release := make(chan struct{})
	client.PrependReactor("*", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if stuck.Load() {
			<-release // the elector's goroutine does not run on
		}
		return false, nil, nil
	})
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, "kube-system", "flock-controller",
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: "replica-a"})
	if err != nil {
		t.Fatal(err)
	}
	led := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retry,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { close(led); <-ctx.Done() },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	fence := &writeFence{}
	fence.set(func() error { return errNoLease })
	next := &countingTransport{}
	rt := fence.wrap(next)

	if err := send(t, rt, http.MethodPost); !errors.Is(err, errNoLease) {
		t.Fatalf("a write before the first term: got %v, want it refused with %v", err, errNoLease)
	}
	fence.set(leaseCheck(elector, leaseDuration, renewDeadline))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); elector.Run(ctx) }()
	select {
	case <-led:
	case <-time.After(10 * time.Second):
		t.Fatal("the elector did not acquire the free lease within 10s")
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet} {
		if err := send(t, rt, m); err != nil {
			t.Fatalf("%s while leading: %v", m, err)
		}
	}

	stuck.Store(true) // from here no renewal completes
	deadline := time.Now().Add(renewDeadline + 3*time.Second)
	for {
		err := send(t, rt, http.MethodPost)
		if err != nil {
			if !strings.Contains(err.Error(), "renew deadline") {
				t.Fatalf("refused write says %q, want it to name the renew deadline", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still sent %s after the renewals stopped", renewDeadline+3*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !elector.IsLeader() {
		t.Fatal("the stuck elector no longer reads as leader: the test does not show the fence closing before client-go ends the term")
	}
	before := next.sent.Load()
	if err := send(t, rt, http.MethodGet); err != nil {
		t.Fatalf("a read while fenced: %v", err)
	}
	if err := send(t, rt, http.MethodDelete); err == nil {
		t.Fatal("a DELETE while fenced was sent")
	}
	if got := next.sent.Load() - before; got != 1 {
		t.Fatalf("%d requests reached the cluster while fenced, want only the read", got)
	}
	close(release)
	cancel()
	<-done
}

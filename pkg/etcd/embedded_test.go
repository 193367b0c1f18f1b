package etcd

import (
	"context"
	"testing"
	"time"

	"flock.dev/flock/test/cluster"
)

func freePort(t *testing.T) int {
	t.Helper()
	port, err := cluster.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func startMember(t *testing.T) *Server {
	t.Helper()
	s, err := Start(context.Background(), Config{DataDir: t.TempDir(), ClientPort: freePort(t), PeerPort: freePort(t)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFailureShowsOnLivez: when the running member's server stops by
// itself, Failed is closed and the /livez check fails with the reason.
func TestFailureShowsOnLivez(t *testing.T) {
	s := startMember(t)
	defer s.Stop()
	if err := s.LivezCheck().Check(nil); err != nil {
		t.Fatalf("livez of a serving member: %v", err)
	}
	s.etcd.Server.Stop() // what a fatal raft or storage error does
	select {
	case <-s.Failed():
	case <-time.After(30 * time.Second):
		t.Fatal("Failed not closed 30s after the member's server stopped")
	}
	if err := s.LivezCheck().Check(nil); err == nil {
		t.Fatal("livez passes after the member failed")
	}
	if s.LivezCheck().Name() != "embedded-etcd" {
		t.Errorf("livez check named %q", s.LivezCheck().Name())
	}
}

// TestStopIsNoFailure: stopping the member on purpose is not a failure.
func TestStopIsNoFailure(t *testing.T) {
	s := startMember(t)
	s.Stop()
	select {
	case <-s.Failed():
		t.Fatalf("Failed closed after Stop: %v", s.Err())
	case <-time.After(2 * time.Second):
	}
	if err := s.Err(); err != nil {
		t.Fatalf("Err after Stop: %v", err)
	}
}

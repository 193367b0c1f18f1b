// Package etcd runs the embedded etcd member that flock-apiserver stores
// Flocks in when no external etcd cluster is given: a single member on
// loopback, or one member of a cluster formed by several flock-apiserver
// replicas (cluster.go).
package etcd

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"
)

// Config is the configuration of an embedded etcd member.
type Config struct {
	// DataDir holds the member's data; Flocks survive a restart on the same DataDir.
	DataDir string
	// ClientPort and PeerPort are the loopback ports of a single member
	// (Cluster nil).
	ClientPort, PeerPort int
	// Cluster, when set, makes this member one of a cluster, over TLS.
	Cluster *ClusterConfig
	// UnsafeNoFsync turns off fsync (tests and benchmarks only).
	UnsafeNoFsync bool
	// Defrag says when the member gives the free space of its database
	// file back (defrag.go); the zero value never does.
	Defrag DefragPolicy
}

// The raft log kept in memory by a single member: a snapshot every
// singleMemberSnapshotCount entries, singleMemberCatchUpEntries kept after it.
const (
	singleMemberSnapshotCount  = 2000
	singleMemberCatchUpEntries = 500
)

// readyTimeout bounds the wait for the member to serve.
const readyTimeout = time.Minute

// Server is a running embedded etcd member.
type Server struct {
	etcd *embed.Etcd
	// failed is closed when the member fails while running; err says how.
	failed   chan struct{}
	mu       sync.Mutex
	err      error
	stopping bool
}

// Start starts an embedded member and waits until it serves.
func Start(ctx context.Context, c Config) (*Server, error) {
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = c.DataDir
	cfg.LogLevel = "warn"
	cfg.UnsafeNoFsync = c.UnsafeNoFsync
	// A metrics listener of its own is not needed: etcd's metrics are not
	// served by flock-apiserver.
	cfg.ListenMetricsUrls = nil
	if c.Cluster == nil {
		clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", c.ClientPort)}
		peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", c.PeerPort)}
		cfg.Name = "flock"
		cfg.ListenClientUrls = []url.URL{clientURL}
		cfg.AdvertiseClientUrls = []url.URL{clientURL}
		cfg.ListenPeerUrls = []url.URL{peerURL}
		cfg.AdvertisePeerUrls = []url.URL{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		// A lone member keeps no raft entries for followers, and a
		// snapshot (only membership data; Flocks are in the backend) is
		// cheap: keep the in-memory raft log short. etcd's defaults (a
		// snapshot every 10,000 entries, 5,000 kept after it) held up to
		// 15,000 Flock writes, ~90 MB at 1,000 Flocks' status updates.
		cfg.SnapshotCount = singleMemberSnapshotCount
		cfg.SnapshotCatchUpEntries = singleMemberCatchUpEntries
	} else if err := c.Cluster.apply(ctx, c.DataDir, cfg); err != nil {
		return nil, fmt.Errorf("embedded etcd member: %w", err)
	}

	logger.Info("Starting embedded etcd", "name", cfg.Name, "dataDir", c.DataDir,
		"clientURL", cfg.AdvertiseClientUrls[0].String(), "clusterState", cfg.ClusterState)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: cannot start member %s (client %s, peer %s): %w",
			cfg.Name, cfg.ListenClientUrls[0].String(), cfg.ListenPeerUrls[0].String(), err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-time.After(readyTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready after %s", readyTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	logger.Info("Embedded etcd is ready", "name", cfg.Name, "clientURL", cfg.AdvertiseClientUrls[0].String())
	s := &Server{etcd: e, failed: make(chan struct{})}
	go s.watch()
	go s.runDefrag(ctx, c.Defrag)
	return s, nil
}

// watch records the first failure of the running member: an error from
// one of its serving goroutines, or its server stopping, other than by Stop.
func (s *Server) watch() {
	var err error
	select {
	case err = <-s.etcd.Err():
		if err == nil {
			err = fmt.Errorf("a listener stopped serving")
		}
	case <-s.etcd.Server.StopNotify():
		err = fmt.Errorf("the etcd server stopped")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return
	}
	s.err = fmt.Errorf("embedded etcd failed: %w", err)
	close(s.failed)
}

// Failed is closed when the running member fails; Err then says how.
func (s *Server) Failed() <-chan struct{} { return s.failed }

// Err returns the failure of the running member, or nil while it serves.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// LivezCheck is the /livez check of the member: it fails once the member
// has failed, so that a supervisor restarts flock-apiserver.
func (s *Server) LivezCheck() healthz.HealthChecker {
	return healthz.NamedCheck("embedded-etcd", func(*http.Request) error { return s.Err() })
}

// ReadyzCheck is the /readyz check of the member: it fails while the member
// knows no leader, that is while its cluster has no quorum, so that a load
// balancer sends no request to a replica that cannot write.
func (s *Server) ReadyzCheck() healthz.HealthChecker {
	return healthz.NamedCheck("embedded-etcd-quorum", func(*http.Request) error {
		if err := s.Err(); err != nil {
			return err
		}
		if s.etcd.Server.Leader() == 0 {
			return fmt.Errorf("embedded etcd member %s knows no leader: its cluster has no quorum", s.etcd.Config().Name)
		}
		return nil
	})
}

// ClientURL is the member's advertised client URL.
func (s *Server) ClientURL() string {
	cfg := s.etcd.Config()
	return cfg.AdvertiseClientUrls[0].String()
}

// Stop stops the member gracefully.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.etcd.Close()
}

// Package etcd runs the embedded etcd member that flock-apiserver stores
// Flocks in when no external etcd cluster is given.
package etcd

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/klog/v2"
)

// Config is the configuration of an embedded etcd member on loopback.
type Config struct {
	// DataDir holds the member's data; Flocks survive a restart on the same DataDir.
	DataDir string
	// ClientPort and PeerPort are the loopback ports of the member.
	ClientPort, PeerPort int
	// ReadyTimeout bounds the wait for the member to serve.
	ReadyTimeout time.Duration
}

// Server is a running embedded etcd member.
type Server struct {
	etcd      *embed.Etcd
	clientURL string
}

// ClientURL is the URL clients reach the member at.
func (s *Server) ClientURL() string { return s.clientURL }

// Start starts an embedded member and waits until it serves.
func Start(ctx context.Context, c Config) (*Server, error) {
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", c.ClientPort)}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", c.PeerPort)}
	cfg := embed.NewConfig()
	cfg.Name = "flock"
	cfg.Dir = c.DataDir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	// A metrics listener of its own is not needed: etcd's metrics are not
	// served by flock-apiserver.
	cfg.ListenMetricsUrls = nil

	logger.Info("Starting embedded etcd", "dataDir", c.DataDir, "clientURL", clientURL.String())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: cannot start on 127.0.0.1:%d/%d: %w", c.ClientPort, c.PeerPort, err)
	}
	timeout := c.ReadyTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-time.After(timeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready after %s", timeout)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	logger.Info("Embedded etcd is ready", "clientURL", clientURL.String())
	return &Server{etcd: e, clientURL: clientURL.String()}, nil
}

// Err reports a failure of the running member.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Stop stops the member gracefully.
func (s *Server) Stop() {
	s.etcd.Close()
}

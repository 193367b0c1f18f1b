package etcd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"flock.dev/flock/test/cluster"
)

// testCluster is three member configurations on loopback with TLS.
type testCluster struct {
	configs []Config
	servers []*Server
}

func newTestCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	dir := t.TempDir()
	ca, kp, err := cluster.NewLoopbackEtcdTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := TLSFiles{CertFile: kp.CertFile, KeyFile: kp.KeyFile, TrustedCAFile: ca.CertFile}
	initial := map[string]string{}
	var clientURLs []string
	for i := range n {
		name := fmt.Sprintf("flock-%d", i)
		initial[name] = fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
		clientURLs = append(clientURLs, fmt.Sprintf("https://127.0.0.1:%d", freePort(t)))
	}
	tc := &testCluster{servers: make([]*Server, n)}
	for i := range n {
		tc.configs = append(tc.configs, Config{
			DataDir: filepath.Join(dir, fmt.Sprintf("data-%d", i)),
			Cluster: &ClusterConfig{
				Name: fmt.Sprintf("flock-%d", i), InitialCluster: initial,
				ClientURL: clientURLs[i], ClusterClientURLs: clientURLs,
				Peer: files, Client: files, Token: "test",
			},
		})
	}
	t.Cleanup(func() {
		for _, s := range tc.servers {
			if s != nil {
				s.Stop()
			}
		}
	})
	return tc
}

func (tc *testCluster) start(t *testing.T, i int) {
	t.Helper()
	s, err := Start(context.Background(), tc.configs[i])
	if err != nil {
		t.Fatalf("member %d: %v", i, err)
	}
	tc.servers[i] = s
}

func (tc *testCluster) stop(i int) {
	tc.servers[i].Stop()
	tc.servers[i] = nil
}

// client returns a client of member i alone.
func (tc *testCluster) client(t *testing.T, i int) *clientv3.Client {
	t.Helper()
	c := tc.configs[i].Cluster
	tlsConfig, err := (&transport.TLSInfo{CertFile: c.Client.CertFile, KeyFile: c.Client.KeyFile, TrustedCAFile: c.Client.TrustedCAFile}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{c.ClientURL}, TLS: tlsConfig, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// readKey reads key through member i (a linearizable read: it needs quorum).
func (tc *testCluster) readKey(t *testing.T, i int, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tc.client(t, i).Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s through member %d: %v", key, i, err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("get %s through member %d: %d keys", key, i, len(resp.Kvs))
	}
	return string(resp.Kvs[0].Value)
}

// startedMembers returns the names of the members that have started, and
// the number of members.
func (tc *testCluster) members(t *testing.T, i int) (started map[string]uint64, total int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tc.client(t, i).MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	started = map[string]uint64{}
	for _, m := range resp.Members {
		if m.Name != "" {
			started[m.Name] = m.ID
		}
	}
	return started, len(resp.Members)
}

// TestClusterLifecycle: three members bootstrap from their static names;
// a member restarted with its data rejoins with it; a member restarted
// with an empty data directory is removed and re-added (a new ID) and
// catches up; with two of three down the last one fails /readyz.
func TestClusterLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three etcd members")
	}
	tc := newTestCluster(t, 3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() {
			s, err := Start(context.Background(), tc.configs[i])
			tc.servers[i], errs[i] = s, err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("bootstrap of member %d: %v", i, err)
		}
	}
	ctx := context.Background()
	if _, err := tc.client(t, 0).Put(ctx, "/before", "v1"); err != nil {
		t.Fatal(err)
	}
	started, total := tc.members(t, 0)
	if len(started) != 3 || total != 3 {
		t.Fatalf("after bootstrap: %d started of %d members (%v)", len(started), total, started)
	}
	for i, s := range tc.servers {
		if err := s.ReadyzCheck().Check(nil); err != nil {
			t.Errorf("readyz of member %d: %v", i, err)
		}
	}

	// Restart with data: same identity, writes made meanwhile arrive.
	tc.stop(1)
	if _, err := tc.client(t, 0).Put(ctx, "/while-1-down", "v2"); err != nil {
		t.Fatalf("write with 2 of 3 members: %v", err)
	}
	tc.start(t, 1)
	if got := tc.readKey(t, 1, "/while-1-down"); got != "v2" {
		t.Errorf("member 1 after restart reads %q", got)
	}
	after, _ := tc.members(t, 1)
	if after["flock-1"] != started["flock-1"] {
		t.Errorf("member 1 restarted with its data has ID %x, was %x", after["flock-1"], started["flock-1"])
	}

	// Restart with empty data: removed, re-added with a new ID, caught up.
	tc.stop(2)
	if err := os.RemoveAll(tc.configs[2].DataDir); err != nil {
		t.Fatal(err)
	}
	tc.start(t, 2)
	if got := tc.readKey(t, 2, "/before"); got != "v1" {
		t.Errorf("member 2 with fresh data reads %q", got)
	}
	after, total = tc.members(t, 0)
	if len(after) != 3 || total != 3 {
		t.Fatalf("after replacing member 2's data: %d started of %d members (%v)", len(after), total, after)
	}
	if after["flock-2"] == started["flock-2"] {
		t.Errorf("member 2 with empty data kept its old ID %x", after["flock-2"])
	}

	// Two of three down: the last member has no quorum and fails readyz.
	tc.stop(1)
	tc.stop(2)
	deadline := time.Now().Add(30 * time.Second)
	for tc.servers[0].ReadyzCheck().Check(nil) == nil {
		if time.Now().After(deadline) {
			t.Fatal("readyz of the last member still passes 30s after two of three stopped")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// One returns: quorum again.
	tc.start(t, 1)
	if got := tc.readKey(t, 0, "/before"); got != "v1" {
		t.Errorf("after one member returned, member 0 reads %q", got)
	}
	if err := tc.servers[0].ReadyzCheck().Check(nil); err != nil {
		t.Errorf("readyz of member 0 with quorum back: %v", err)
	}
}

func TestParseInitialCluster(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"a=https://a:2380,b=https://b:2380,c=https://c:2380", 3, false},
		{"a=https://a:2380", 1, false},
		{"a=https://a:2380,a=https://b:2380", 0, true},
		{"a", 0, true},
		{"=https://a:2380", 0, true},
		{"", 0, true},
	} {
		m, err := ParseInitialCluster(tc.in)
		if (err != nil) != tc.wantErr || len(m) != tc.want {
			t.Errorf("ParseInitialCluster(%q) = %v, %v", tc.in, m, err)
		}
	}
}

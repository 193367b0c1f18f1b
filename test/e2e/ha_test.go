package e2e

// Issue 18, HA without a disk provisioner: three flock-apiservers whose
// embedded etcd members form one cluster, behind HAProxy. Under a steady
// create/update load through kube-apiserver, losing one replica loses no
// acknowledged write; losing two stops writes (no split brain) until one
// returns; a replica whose data is gone rejoins as a new member; and the
// write throughput of the three members is printed next to one member's.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/etcd"
	"flock.dev/flock/test/cluster"
)

const (
	// haLoadInterval paces each load writer.
	haLoadInterval = 50 * time.Millisecond
	// haWriteTimeout bounds one write while a majority is down.
	haWriteTimeout = 15 * time.Second
)

func TestHAEmbeddedEtcdCluster(t *testing.T) {
	if _, err := cluster.HAProxyPath(); err != nil {
		t.Fatal(err)
	}
	c := ownControlPlane(t, "ha", cluster.Options{FlockReplicas: 3, Nodes: 3, WithoutDNS: true,
		FlockArgs: []string{"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}})
	ctx := ctxFor(t)
	ns := "ha"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	etcdClient := haEtcdClient(t, c)
	membersBefore := startedMembers(t, etcdClient)
	if len(membersBefore) != 3 {
		t.Fatalf("etcd members after start: %v", membersBefore)
	}

	t.Run("SIGKILL one replica under load", func(t *testing.T) {
		load := startHALoad(c, ns)
		time.Sleep(2 * time.Second)
		var leader int
		eventually(t, 30*time.Second, "a replica leads the controller", func(ctx context.Context) error {
			var err error
			if leader, err = c.ReplicaLeading(ctx); err == nil && leader < 0 {
				err = errors.New("no leader yet")
			}
			return err
		})
		// Kill the leader: the controller must move too.
		killedAt := time.Now()
		if err := c.KillReplica(leader); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "APIService Available after the kill", func(ctx context.Context) error {
			ok, err := c.APIServiceAvailable(ctx)
			if ok {
				return nil
			}
			return err
		})
		eventually(t, 30*time.Second, "a write through kube-apiserver after the kill", func(ctx context.Context) error {
			if load.acked.Load() == 0 {
				return errors.New("no write acknowledged yet")
			}
			before := load.acked.Load()
			time.Sleep(500 * time.Millisecond)
			if load.acked.Load() == before {
				return fmt.Errorf("no write acknowledged in 500ms (%d so far, last error %v)", before, load.lastErr())
			}
			return nil
		})
		t.Logf("writes flow again %s after SIGKILL of replica %d", time.Since(killedAt).Round(100*time.Millisecond), leader)
		eventually(t, 45*time.Second, "the controller leader moves", func(ctx context.Context) error {
			now, err := c.ReplicaLeading(ctx)
			if err == nil && (now < 0 || now == leader) {
				err = fmt.Errorf("leader is replica %d", now)
			}
			return err
		})
		if err := c.StartReplica(ctx, leader); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		created, updated := load.stop()
		t.Logf("load: %d creates and %d updates acknowledged, %d creates failed", len(created), len(updated), load.failed.Load())
		if len(created) == 0 || len(updated) == 0 {
			t.Fatal("no create or no update acknowledged")
		}
		for _, name := range created {
			if _, err := c.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("acknowledged create %s is not readable: %v", name, err)
			}
		}
		for _, name := range updated {
			f, err := c.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || f.Labels["updated"] != "yes" {
				t.Errorf("acknowledged update of %s is not readable (labels %v, err %v)", name, f.GetLabels(), err)
			}
		}
		after := startedMembers(t, etcdClient)
		name := fmt.Sprintf("flock-%d", leader)
		if after[name] != membersBefore[name] || len(after) != 3 {
			t.Errorf("replica %s did not rejoin with its data: members before %v, after %v", name, membersBefore, after)
		}
		// Its own member holds the data: a serializable read of it alone.
		eventually(t, 30*time.Second, "the restarted member holds the acknowledged creates", func(ctx context.Context) error {
			return memberHasFlocks(ctx, haReplicaClient(t, c, leader), ns, created)
		})
	})

	t.Run("kill two of three", func(t *testing.T) {
		for _, i := range []int{1, 2} {
			if err := c.KillReplica(i); err != nil {
				t.Fatal(err)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, haWriteTimeout)
		_, err := c.Flock.FlockV1alpha1().Flocks(ns).Create(wctx, newFlock("no-quorum", ns, 0), metav1.CreateOptions{})
		cancel()
		if err == nil {
			t.Fatal("a create succeeded with two of three etcd members down")
		}
		var status apierrors.APIStatus
		if !(errors.As(err, &status) && status.Status().Code >= 500) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("create without quorum: want a 5xx or a timeout, got %v", err)
		}
		t.Logf("create without quorum: %v", err)
		if err := c.StartReplica(ctx, 1); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "writes resume with one replica back", func(ctx context.Context) error {
			_, err := c.Flock.FlockV1alpha1().Flocks(ns).Create(ctx, newFlock("quorum-back", ns, 0), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
		if err := c.StartReplica(ctx, 2); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("replica with empty data rejoins as a new member", func(t *testing.T) {
		before := startedMembers(t, etcdClient)
		if err := c.KillReplica(2); err != nil {
			t.Fatal(err)
		}
		if err := c.EmptyReplicaData(2); err != nil {
			t.Fatal(err)
		}
		if err := c.StartReplica(ctx, 2); err != nil {
			t.Fatal(err)
		}
		after := startedMembers(t, etcdClient)
		if len(after) != 3 || after["flock-2"] == 0 || after["flock-2"] == before["flock-2"] {
			t.Errorf("members before %v, after %v: want flock-2 with a new ID among 3", before, after)
		}
		for i := range 3 {
			eventually(t, 30*time.Second, fmt.Sprintf("member %d healthy with the data", i), func(ctx context.Context) error {
				cl := haReplicaClient(t, c, i)
				if _, err := cl.Status(ctx, c.Replicas()[i].EtcdURL); err != nil {
					return err
				}
				return memberHasFlocks(ctx, cl, ns, []string{"quorum-back"})
			})
		}
		// The replica serves the Flocks written before its data was emptied.
		if _, err := c.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, "quorum-back", metav1.GetOptions{}); err != nil {
			t.Error(err)
		}
	})

	t.Run("write throughput, 3 members vs 1", func(t *testing.T) {
		// One member in cluster mode: TLS like the three, so that only the
		// replication differs.
		peer := fmt.Sprintf("https://127.0.0.1:%d", freeTCPPort(t))
		client := fmt.Sprintf("https://127.0.0.1:%d", freeTCPPort(t))
		files := etcd.TLSFiles{CertFile: c.EtcdCert.CertFile, KeyFile: c.EtcdCert.KeyFile, TrustedCAFile: c.PKI.ClusterCA.CertFile}
		single, err := etcd.Start(ctx, etcd.Config{DataDir: t.TempDir(), Cluster: &etcd.ClusterConfig{
			Name: "single", InitialCluster: map[string]string{"single": peer}, ClientURL: client, ClusterClientURLs: []string{client},
			Peer: files, Client: files, Token: "single"}})
		if err != nil {
			t.Fatal(err)
		}
		defer single.Stop()
		one := etcdClientOf(t, c, []string{single.ClientURL()})
		three := haReplicaClient(t, c, 0)
		r3 := putRate(ctx, three, 3*time.Second)
		r1 := putRate(ctx, one, 3*time.Second)
		t.Logf("etcd write throughput over TLS (8 writers, 1 KiB values, both with fsync): 3-member cluster %.0f puts/s, single member %.0f puts/s, ratio %.2f", r3, r1, r3/r1)
	})
}

// haLoad creates and updates Flocks through kube-apiserver until stopped.
type haLoad struct {
	acked, failed    atomic.Int64
	mu               sync.Mutex
	created, updated []string
	last             error
	cancel           context.CancelFunc
	wg               sync.WaitGroup
}

func startHALoad(c *cluster.Cluster, ns string) *haLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &haLoad{cancel: cancel}
	for w := range 2 {
		l.wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("load-%d-%d", w, i)
				rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := c.Flock.FlockV1alpha1().Flocks(ns).Create(rctx, newFlock(name, ns, 0), metav1.CreateOptions{})
				if err == nil {
					l.acked.Add(1)
					l.mu.Lock()
					l.created = append(l.created, name)
					l.mu.Unlock()
					f, gerr := c.Flock.FlockV1alpha1().Flocks(ns).Get(rctx, name, metav1.GetOptions{})
					if gerr == nil {
						f.Labels = map[string]string{"updated": "yes"}
						if _, gerr = c.Flock.FlockV1alpha1().Flocks(ns).Update(rctx, f, metav1.UpdateOptions{}); gerr == nil {
							l.mu.Lock()
							l.updated = append(l.updated, name)
							l.mu.Unlock()
						}
					}
				} else {
					l.failed.Add(1)
					l.mu.Lock()
					l.last = err
					l.mu.Unlock()
				}
				rcancel()
				time.Sleep(haLoadInterval)
			}
		})
	}
	return l
}

func (l *haLoad) lastErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// stop ends the load and returns the names of the Flocks whose create, and
// whose update, was acknowledged.
func (l *haLoad) stop() (created, updated []string) {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.created, l.updated
}

// haEtcdClient is a client of the HA cluster's etcd members.
func haEtcdClient(t *testing.T, c *cluster.Cluster) *clientv3.Client {
	t.Helper()
	var urls []string
	for _, r := range c.Replicas() {
		urls = append(urls, r.EtcdURL)
	}
	return etcdClientOf(t, c, urls)
}

// haReplicaClient is a client of replica i's etcd member alone.
func haReplicaClient(t *testing.T, c *cluster.Cluster, i int) *clientv3.Client {
	t.Helper()
	return etcdClientOf(t, c, []string{c.Replicas()[i].EtcdURL})
}

func etcdClientOf(t *testing.T, c *cluster.Cluster, endpoints []string) *clientv3.Client {
	t.Helper()
	tlsConfig, err := (&transport.TLSInfo{CertFile: c.EtcdCert.CertFile, KeyFile: c.EtcdCert.KeyFile, TrustedCAFile: c.PKI.ClusterCA.CertFile}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsConfig, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// startedMembers maps the names of the started etcd members to their IDs.
func startedMembers(t *testing.T, cl *clientv3.Client) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.MemberList(ctx)
	if err != nil {
		t.Fatalf("etcd member list: %v", err)
	}
	out := map[string]uint64{}
	for _, m := range resp.Members {
		if m.Name != "" {
			out[m.Name] = m.ID
		}
	}
	if len(out) != len(resp.Members) {
		t.Logf("etcd has %d members, %d started", len(resp.Members), len(out))
	}
	return out
}

// memberHasFlocks checks, by a serializable read of the member cl talks to,
// that it stores the Flocks names in namespace ns.
func memberHasFlocks(ctx context.Context, cl *clientv3.Client, ns string, names []string) error {
	resp, err := cl.Get(ctx, "/registry/flock.dev/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSerializable())
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = true
	}
	for _, name := range names {
		found := false
		for k := range have {
			if strings.HasSuffix(k, "/"+ns+"/"+name) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("member has no key for Flock %s/%s (%d keys)", ns, name, len(have))
		}
	}
	return nil
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	ports, err := cluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}

// putRate runs 8 writers of 1 KiB values for d and returns puts per second.
func putRate(ctx context.Context, cl *clientv3.Client, d time.Duration) float64 {
	var n atomic.Int64
	value := string(make([]byte, 1024))
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				if _, err := cl.Put(ctx, fmt.Sprintf("/throughput/%d/%d", w, i), value); err == nil {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

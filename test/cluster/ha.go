// This file runs flock-apiserver in HA mode (Options.FlockReplicas > 1):
// N replicas whose embedded etcd members form one cluster over TLS, and
// HAProxy in front, health-checking each replica's /readyz over TLS, on the
// port the APIService's Service points at.

package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FlockReplica is one flock-apiserver of an HA control plane with its
// embedded etcd member.
type FlockReplica struct {
	// Name is the replica's (and its etcd member's) stable name, flock-<i>.
	Name string
	// URL is the replica's own https://127.0.0.1:<port>, bypassing HAProxy.
	URL                                string
	Port, EtcdClientPort, EtcdPeerPort int
	// EtcdURL is its member's client URL (TLS, client certificate EtcdCert).
	EtcdURL string
	// DataDir is its member's data directory.
	DataDir string

	args []string
	proc *Process
}

// Process returns the replica's current process (nil before its first start).
func (r *FlockReplica) Process() *Process { return r.proc }

// replicaName is the stable name of replica i.
func replicaName(i int) string { return "flock-" + strconv.Itoa(i) }

// Replicas returns the HA replicas (empty unless Options.FlockReplicas > 1).
func (c *Cluster) Replicas() []*FlockReplica {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replicas
}

// HAProxyPath returns the haproxy binary, or an error saying how to install it.
func HAProxyPath() (string, error) {
	for _, p := range []string{"haproxy", "/usr/sbin/haproxy"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", errors.New("haproxy is not installed (Debian: apt-get install haproxy; hack/doctor installs it)")
}

// startFlockReplicas starts Options.FlockReplicas replicas together (their
// members bootstrap the cluster), then HAProxy on Ports.FlockAPIServer, and
// waits until Flocks are served through kube-apiserver.
func (c *Cluster) startFlockReplicas(ctx context.Context) error {
	haproxy, err := HAProxyPath()
	if err != nil {
		return err
	}
	n := c.opts.FlockReplicas
	ports, err := FreePorts(3 * n)
	if err != nil {
		return err
	}
	pkiDir := c.path("pki")
	if c.EtcdCert, err = c.PKI.ClusterCA.IssueServerClient(pkiDir, "flock-etcd", "flock-etcd",
		[]string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return fmt.Errorf("etcd member certificate: %w", err)
	}
	var initial, clientURLs []string
	replicas := make([]*FlockReplica, n)
	for i := range n {
		r := &FlockReplica{Name: replicaName(i), Port: ports[3*i], EtcdClientPort: ports[3*i+1], EtcdPeerPort: ports[3*i+2],
			DataDir: c.path("flock", replicaName(i), "etcd")}
		r.URL = "https://127.0.0.1:" + strconv.Itoa(r.Port)
		r.EtcdURL = "https://127.0.0.1:" + strconv.Itoa(r.EtcdClientPort)
		initial = append(initial, fmt.Sprintf("%s=https://127.0.0.1:%d", r.Name, r.EtcdPeerPort))
		clientURLs = append(clientURLs, r.EtcdURL)
		replicas[i] = r
	}
	ca := c.PKI.ClusterCA.CertFile
	for _, r := range replicas {
		cluster := []string{
			"--embedded-etcd-name=" + r.Name,
			"--embedded-etcd-initial-cluster=" + strings.Join(initial, ","),
			"--embedded-etcd-client-url=" + r.EtcdURL,
			"--embedded-etcd-cluster-client-urls=" + strings.Join(clientURLs, ","),
			"--embedded-etcd-peer-cert-file=" + c.EtcdCert.CertFile,
			"--embedded-etcd-peer-key-file=" + c.EtcdCert.KeyFile,
			"--embedded-etcd-peer-trusted-ca-file=" + ca,
			"--embedded-etcd-client-cert-file=" + c.EtcdCert.CertFile,
			"--embedded-etcd-client-key-file=" + c.EtcdCert.KeyFile,
			"--embedded-etcd-client-trusted-ca-file=" + ca,
		}
		r.args = c.flockArgs(r.Port, r.EtcdClientPort, r.EtcdPeerPort, r.DataDir, append(cluster, c.opts.FlockArgs...))
	}
	c.mu.Lock()
	c.replicas = replicas
	c.mu.Unlock()
	// All at once: a member's etcd is ready only with a quorum.
	errs := make(chan error, n)
	for i := range replicas {
		go func() { errs <- c.StartReplica(ctx, i) }()
	}
	for range n {
		if err := <-errs; err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.flock = replicas[0].proc
	c.mu.Unlock()

	cfg := c.path("haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxyConfig(c.Ports.FlockAPIServer, ca, replicas)), 0o644); err != nil {
		return err
	}
	p, err := c.startPath(ctx, "haproxy", haproxy, []string{"-db", "-f", cfg}, nil)
	if err != nil {
		return err
	}
	c.HAProxy = p
	return c.waitFlockServed(ctx, p)
}

// haproxyConfig balances TCP (TLS passes through to the replicas) on port
// over the replicas that pass GET /readyz over TLS, checked every second.
func haproxyConfig(port int, caFile string, replicas []*FlockReplica) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
  maxconn 2000

defaults
  mode tcp
  timeout connect 2s
  timeout client 10m
  timeout server 10m
  timeout check 2s

frontend flock-apiserver
  bind 127.0.0.1:%d
  default_backend flock-replicas

backend flock-replicas
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  default-server check check-ssl verify required ca-file %s inter 1s fall 2 rise 1 on-marked-down shutdown-sessions
`, port, caFile)
	for _, r := range replicas {
		fmt.Fprintf(&b, "  server %s 127.0.0.1:%d\n", r.Name, r.Port)
	}
	return b.String()
}

// StartReplica starts replica i (again) with its flags and data directory
// and waits until it is ready.
func (c *Cluster) StartReplica(ctx context.Context, i int) error {
	r := c.Replicas()[i]
	p, err := c.start(ctx, r.Name, "flock-apiserver", r.args, nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	r.proc = p
	c.mu.Unlock()
	return c.waitFlockReady(ctx, p, r.URL)
}

// KillReplica SIGKILLs replica i (its etcd member dies with it) and waits
// until it is gone.
func (c *Cluster) KillReplica(i int) error {
	return c.Replicas()[i].proc.Kill()
}

// EmptyReplicaData replaces replica i's etcd data directory (the replica
// must be stopped) with an empty one.
func (c *Cluster) EmptyReplicaData(i int) error {
	r := c.Replicas()[i]
	if r.proc != nil && !r.proc.Exited() {
		return fmt.Errorf("replica %s is running", r.Name)
	}
	if err := os.RemoveAll(r.DataDir); err != nil {
		return err
	}
	return os.MkdirAll(r.DataDir, 0o700)
}

// ReplicaLeading returns the index of the replica whose identity holds the
// controller Lease, or -1.
func (c *Cluster) ReplicaLeading(ctx context.Context) (int, error) {
	lease, err := c.Kube.CoordinationV1().Leases(FlockNamespace).Get(ctx, "flock-controller", metav1.GetOptions{})
	if err != nil {
		return -1, err
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return -1, nil
	}
	for i, r := range c.Replicas() {
		p := r.proc
		if p == nil || p.Exited() {
			continue
		}
		if log, err := os.ReadFile(p.LogFile); err == nil && strings.Contains(string(log), `identity="`+*lease.Spec.HolderIdentity+`"`) {
			return i, nil
		}
	}
	return -1, nil
}

// Command local-up runs a local control plane with flock-apiserver registered
// (`make local-up`): it brings everything up with package cluster, prints how
// to use it, stays in the foreground until Ctrl-C or SIGTERM, then stops every
// process it started and exits 0.
//
// Environment: NODES (kwok nodes, default 3), REAL_NODES (real nodes: kubelet
// with containerd on this machine; default 1 when the machine can run one,
// else 0 and a one-line reason), KUBE_APISERVER_PORT (default 6443),
// FLOCK_APISERVER_PORT (default 9443; 0 picks free ports), DNS_PORT (CoreDNS,
// UDP and TCP; default 0: a free port, printed), FLOCK_ARGS (extra
// flock-apiserver flags, space separated), FLOCK_REPLICAS (HA mode: 3 runs
// three flock-apiservers whose embedded etcd members form one cluster, behind
// HAProxy on FLOCK_APISERVER_PORT; needs haproxy).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"flock.dev/flock/test/cluster"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("local-up", flag.ExitOnError)
	klog.InitFlags(fs)
	binDir := fs.String("bin-dir", "", "directory with the control-plane binaries and flock-apiserver (default <repo>/_output/bin)")
	workDir := fs.String("work-dir", "", "directory for certificates, data, kubeconfig and logs (default <repo>/_output/local-up)")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)

	opts, err := options(*binDir, *workDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "local-up:", err)
		return 2
	}
	if opts.WithoutDNS {
		fmt.Fprintf(os.Stderr, "local-up: WARNING: no coredns in %s; starting without cluster DNS (`make tools` builds it)\n", opts.BinDir)
	}
	fmt.Printf("local-up: starting a local control plane in %s with %d kwok nodes and %d real nodes ...\n", opts.WorkDir, max(opts.Nodes, 0), opts.RealNodes)
	c, err := cluster.Up(ctx, opts)
	if err != nil {
		var running *cluster.AlreadyRunningError
		var inUse *cluster.PortInUseError
		switch {
		case errors.As(err, &running), errors.As(err, &inUse):
			fmt.Fprintln(os.Stderr, "local-up:", err)
		case ctx.Err() != nil:
			fmt.Fprintln(os.Stderr, "local-up: interrupted during start-up; everything started was stopped")
			return 0
		default:
			fmt.Fprintf(os.Stderr, "local-up: start-up failed: %v\nlocal-up: logs are in %s\n", err, filepath.Join(opts.WorkDir, "logs"))
		}
		return 1
	}
	printBanner(c, opts)

	// Stay in the foreground; say so when a component dies on its own.
	reported := map[*cluster.Process]bool{}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			for _, p := range c.Processes() {
				if p.Unexpected() && !reported[p] {
					reported[p] = true
					fmt.Fprintf(os.Stderr, "local-up: WARNING: %s exited unexpectedly (%v); see %s\n", p.Name, p.ExitErr(), p.LogFile)
				}
			}
		}
	}
	fmt.Println("\nlocal-up: stopping ...")
	if err := c.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "local-up: stopping:", err)
		return 1
	}
	fmt.Println("local-up: stopped every process; bye")
	return 0
}

func options(binDir, workDir string) (cluster.Options, error) {
	root, err := cluster.FindRepoRoot()
	if err != nil {
		return cluster.Options{}, err
	}
	if binDir == "" {
		binDir = filepath.Join(root, "_output", "bin")
	}
	if workDir == "" {
		workDir = filepath.Join(root, "_output", "local-up")
	}
	opts := cluster.Options{BinDir: binDir, WorkDir: workDir, RepoRoot: root, Nodes: 3}
	if v := os.Getenv("NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return opts, fmt.Errorf("NODES=%q: want a number >= 0", v)
		}
		opts.Nodes = n
		if n == 0 {
			opts.Nodes = -1
		}
	}
	if opts.Ports.KubeAPIServer, err = portEnv("KUBE_APISERVER_PORT", 6443); err != nil {
		return opts, err
	}
	if opts.Ports.FlockAPIServer, err = portEnv("FLOCK_APISERVER_PORT", 9443); err != nil {
		return opts, err
	}
	if opts.Ports.DNS, err = portEnv("DNS_PORT", 0); err != nil {
		return opts, err
	}
	// `make local-up` builds coredns into the bin directory (`make tools`);
	// a bin directory assembled by hand may lack it: then run without
	// cluster DNS, and say so (printBanner).
	if st, err := os.Stat(filepath.Join(binDir, "coredns")); err != nil || st.IsDir() {
		opts.WithoutDNS = true
	}
	opts.FlockArgs = strings.Fields(os.Getenv("FLOCK_ARGS"))
	if v := os.Getenv("FLOCK_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 7 || n%2 == 0 {
			return opts, fmt.Errorf("FLOCK_REPLICAS=%q: want 1, 3, 5 or 7 (an odd number of etcd members)", v)
		}
		opts.FlockReplicas = n
	}
	if err := realNodes(&opts); err != nil {
		return opts, err
	}
	return opts, nil
}

// realNodes applies REAL_NODES: by default one real node when this machine
// can run it, else none with the reason on one line.
func realNodes(opts *cluster.Options) error {
	support := cluster.RealNodeSupport(opts.BinDir)
	if support == nil && opts.WithoutDNS {
		support = errors.New("real nodes need the cluster DNS (coredns)")
	}
	v := os.Getenv("REAL_NODES")
	switch {
	case v == "" && support != nil:
		fmt.Fprintf(os.Stderr, "local-up: no real node: %v\n", support)
		return nil
	case v == "":
		opts.RealNodes = 1
	default:
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 8 {
			return fmt.Errorf("REAL_NODES=%q: want a number from 0 to 8", v)
		}
		if n > 0 && support != nil {
			return fmt.Errorf("REAL_NODES=%d: %w", n, support)
		}
		opts.RealNodes = n
	}
	if opts.RealNodes > 0 {
		// Members' data directories, on the real nodes' host; the cleanup
		// helper runs the offline test image (no registry is reachable);
		// the taint keeps Flocks of registry images (the example's nginx)
		// off the real nodes.
		opts.DataRoot = filepath.Join(opts.WorkDir, "data")
		opts.TaintRealNodes = true
		opts.FlockArgs = append([]string{"--helper-image=" + cluster.TestImage}, opts.FlockArgs...)
	}
	return nil
}

func portEnv(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 65535 {
		return 0, fmt.Errorf("%s=%q: want a port number (0 = any free port)", name, v)
	}
	return n, nil
}

func printBanner(c *cluster.Cluster, opts cluster.Options) {
	rel := func(p string) string {
		if r, err := filepath.Rel(opts.RepoRoot, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return p
	}
	fmt.Printf(`
local-up: ready. flock-apiserver is registered as APIService %s (Available).

  export KUBECONFIG=%s
  export PATH=%s:$PATH    # kubectl v1.37 (optional)

Try:
  kubectl get apiservice %s
  kubectl api-resources --api-group=flock.dev
  kubectl get nodes -L topology.kubernetes.io/zone
  kubectl explain flock.spec
  kubectl apply -f artifacts/examples/flock.yaml
  kubectl get flocks -A
%s
kube-apiserver:  %s
flock-apiserver: %s%s
cluster DNS:     %s
nodes:           %s
real nodes:      %s
logs:            %s/*.log

Press Ctrl-C to stop everything.
`, cluster.APIServiceName, c.KubeconfigPath, opts.BinDir, cluster.APIServiceName,
		dnsExample(c), c.KubeAPIServerURL, c.FlockAPIServerURL, haSummary(c), dnsSummary(c), strings.Join(c.NodeNames, " "), realSummary(c), rel(c.LogDir()))
}

// haSummary says what the flock-apiserver URL is: the server itself, or
// HAProxy in front of the replicas of HA mode, listed.
func haSummary(c *cluster.Cluster) string {
	var b strings.Builder
	for _, r := range c.Replicas() {
		fmt.Fprintf(&b, "\n  replica %s:   %s, etcd member %s, data %s", r.Name, r.URL, r.EtcdURL, r.DataDir)
	}
	if b.Len() == 0 {
		return " (direct; needs a client certificate)"
	}
	return " (HAProxy, health-checking /readyz, in front of the replicas; each needs a client certificate)" + b.String()
}

// realSummary lists the real nodes with their address, and where members'
// data directories are on this machine.
func realSummary(c *cluster.Cluster) string {
	rns := c.RealNodes()
	if len(rns) == 0 {
		return "none (REAL_NODES=0, or this machine cannot run one)"
	}
	var parts []string
	for _, rn := range rns {
		parts = append(parts, fmt.Sprintf("%s (%s, pods in %s)", rn.Name, rn.BridgeIP, rn.Subnet))
	}
	return fmt.Sprintf(`%s
                 label %s=true, taint %s:NoSchedule; offline image %s
                 data directories: %s/<namespace>/<flock> on each node, i.e. here
                 in %s/<namespace>/<flock> (each node has its own mount namespace)
                 try: kubectl apply -f artifacts/examples/flock-real-node.yaml`,
		strings.Join(parts, " "), cluster.RealNodeLabel, cluster.RealNodeTaint, cluster.TestImage, c.DataRoot(),
		filepath.Join(filepath.Dir(rns[0].Dir), "real-<i>", filepath.Base(rns[0].DataDir())))
}

// dnsSummary names CoreDNS's address and port and the zones it serves.
func dnsSummary(c *cluster.Cluster) string {
	addr := c.DNSAddr()
	if addr == "" {
		return "not started: no coredns in the bin directory (`make tools` builds it)"
	}
	return fmt.Sprintf("%s (UDP and TCP), port %d; zones %s", addr, c.Ports.DNS, strings.Join(cluster.DNSZones(), " "))
}

// dnsExample shows how to query the members of the example Flock
// (artifacts/examples/flock.yaml: web, 3 members, port http, namespace
// default) once it is applied.
func dnsExample(c *cluster.Cluster) string {
	if c.DNSAddr() == "" {
		return ""
	}
	return fmt.Sprintf(`
Cluster DNS (CoreDNS, port %[1]d), after applying the example Flock:
  dig @127.0.0.1 -p %[1]d web-0.web.default.svc.%[2]s
  dig @127.0.0.1 -p %[1]d SRV _http._tcp.web.default.svc.%[2]s
  dig @127.0.0.1 -p %[1]d -x $(kubectl get pod web-0 -o jsonpath='{.status.podIP}')
`, c.Ports.DNS, cluster.ClusterDomain)
}

package cluster

// Real nodes: a kubelet with containerd, runc and the CNI bridge plugin on
// this machine, registered as node real-<i> next to the kwok nodes, so member
// pods really run, mount their data directory and resolve names. Only one
// harness on a machine may run real nodes at a time (fixed cgroup names,
// bridges and paths): a lock file says who.
//
// Each node i gets its own bridge flockbr<i> with address 10.88.<i>.1/24
// (created here; the CNI bridge plugin runs with isGateway and ipMasq off,
// so the machine's forwarding and iptables stay as they are, and pods reach
// only pods on their bridge and the bridge address), a cgroup root
// /flock-real-<i> in every hierarchy, a CoreDNS on the bridge address (the
// pods' clusterDNS: there is no kube-proxy, so no ClusterIP works from
// pods), and a kubelet serving on the bridge address for kube-apiserver's
// logs and exec. Images come from the offline test images (flock-test).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	criv1 "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// Names and addresses of the real nodes.
const (
	// RealNodePrefix starts every real node's name: real-1, real-2, ...
	RealNodePrefix = "real-"
	// RealNodeLabel ("true") marks the real nodes; kwok nodes have type=kwok,
	// real ones type=real.
	RealNodeLabel = "flock.dev/real-node"
	// RealNodeTaint is the NoSchedule taint key of real nodes started with
	// Options.TaintRealNodes, so only pods that tolerate it land there.
	RealNodeTaint = "flock.dev/real-node"
	// RealNodeCIDR holds every real node's bridge subnet 10.88.<i>.0/24.
	RealNodeCIDR = "10.88.0.0/16"
	// CNIBinDir holds the CNI plugins (Debian containernetworking-plugins).
	CNIBinDir = "/usr/lib/cni"
	// RealNodeLockFile is the machine-wide lock of the real nodes.
	RealNodeLockFile = "/run/flock-real-nodes.lock"
	// maxRealNodes bounds N: one /24 per node inside RealNodeCIDR.
	maxRealNodes = 8
)

// realNodeBinaries are what a real node needs in BinDir (`make tools build`).
var realNodeBinaries = []string{"kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "flock-test", "flock-node-agent", "coredns"}

// RealNode is a kubelet with its container runtime on this machine.
type RealNode struct {
	// Name is real-<Index>.
	Name  string
	Index int
	// Dir holds the node's kubelet root, containerd root and state,
	// certificates and CNI configuration (logs go to the cluster's LogDir).
	Dir string
	// Bridge, BridgeIP and Subnet are the node's pod network; BridgeIP is
	// also its InternalIP, its kubelet's address and its pods' DNS server.
	Bridge   string
	BridgeIP string
	Subnet   string
	// CgroupRoot is kubelet's cgroupRoot, e.g. /flock-real-1.
	CgroupRoot string
	// KubeletPort is kubelet's HTTPS port on BridgeIP.
	KubeletPort int
	// ContainerdSocket is containerd's gRPC socket.
	ContainerdSocket string

	containerd, kubelet, dns *Process
}

// Kubelet is the node's kubelet process (tests stop it to lose the node).
func (rn *RealNode) Kubelet() *Process { return rn.kubelet }

// DataDir is where, on this machine, the node's data root is: the node's
// containerd and kubelet see it at the cluster's DataRoot (Options.DataRoot),
// so members' data directories <DataRoot>/<namespace>/<flock> of this node
// are under DataDir()/<namespace>/<flock> here.
func (rn *RealNode) DataDir() string { return filepath.Join(rn.Dir, "data") }

// Tools that give each real node its own mount namespace (util-linux).
const (
	unsharePath = "/usr/bin/unshare"
	nsenterPath = "/usr/bin/nsenter"
)

// RealNodesUnavailableError says why this machine cannot run real nodes.
type RealNodesUnavailableError struct{ Reason string }

func (e *RealNodesUnavailableError) Error() string { return "real nodes unavailable: " + e.Reason }

// RealNodeSupport returns nil when this machine can run real nodes with the
// binaries in binDir, else a *RealNodesUnavailableError with the reason
// (another harness holding the real nodes is one).
func RealNodeSupport(binDir string) error {
	no := func(format string, a ...any) error {
		return &RealNodesUnavailableError{Reason: fmt.Sprintf(format, a...)}
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return no("needs linux/amd64, this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if os.Geteuid() != 0 {
		return no("needs root (cgroups, mounts, a bridge)")
	}
	for _, b := range realNodeBinaries {
		if st, err := os.Stat(filepath.Join(binDir, b)); err != nil || st.Mode()&0o111 == 0 {
			return no("no %s in %s (`make tools build` builds it)", b, binDir)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(CNIBinDir, p)); err != nil {
			return no("no CNI plugin %s in %s (Debian package containernetworking-plugins)", p, CNIBinDir)
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return no("no `ip` command (Debian package iproute2)")
	}
	for _, p := range []string{unsharePath, nsenterPath} {
		if _, err := os.Stat(p); err != nil {
			return no("no %s (Debian package util-linux)", p)
		}
	}
	if len(cgroupHierarchies()) == 0 {
		return no("no cgroup hierarchies under %s", cgroupV1Root)
	}
	_, cidr, _ := net.ParseCIDR(RealNodeCIDR)
	ifaces, _ := net.InterfaceAddrs()
	for _, a := range ifaces {
		if ipn, ok := a.(*net.IPNet); ok && cidr.Contains(ipn.IP) && !strings.HasPrefix(ifaceOf(ipn.IP), "flockbr") {
			return no("%s is already used on this machine (%s)", RealNodeCIDR, ipn)
		}
	}
	if pid, held := realNodeLockHolder(); held {
		return no("another harness (pid %d) runs the real nodes of this machine (lock %s)", pid, RealNodeLockFile)
	}
	return nil
}

// ifaceOf names the interface that has ip, or "".
func ifaceOf(ip net.IP) string {
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(ip) {
				return i.Name
			}
		}
	}
	return ""
}

// realNodeLockHolder reports whether another process holds the machine's
// real-node lock, and its pid.
func realNodeLockHolder() (int, bool) {
	l, err := lockFile(RealNodeLockFile, true)
	if err == nil {
		l.release()
		return 0, false
	}
	var running *AlreadyRunningError
	if errors.As(err, &running) {
		return running.PID, true
	}
	return 0, false
}

// RealNodes are the running real nodes, in order.
func (c *Cluster) RealNodes() []*RealNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*RealNode(nil), c.realNodes...)
}

// DataRoot is flock-apiserver's --data-root: the host directory of members'
// data directories (<DataRoot>/<namespace>/<flock> on a real node).
func (c *Cluster) DataRoot() string { return c.opts.DataRoot }

// AddRealNodes starts n more real nodes and waits until each is Ready. The
// first call takes the machine's real-node lock (a *RealNodesUnavailableError
// when another harness holds it) and records what the teardown restores;
// StopRealNodes or Down tears them down.
func (c *Cluster) AddRealNodes(ctx context.Context, n int) ([]*RealNode, error) {
	c.realMu.Lock()
	defer c.realMu.Unlock()
	if c.realLock == nil {
		if err := RealNodeSupport(c.opts.BinDir); err != nil {
			return nil, err
		}
		l, err := lockFile(RealNodeLockFile, true)
		if err != nil {
			return nil, &RealNodesUnavailableError{Reason: err.Error()}
		}
		c.realLock = l
		c.realFixed = snapshotFixedPaths()
		c.realTunables = readSysctls(kubeletTunables)
		if err := sweepRealNodeLeftovers(ctx); err != nil {
			return nil, err
		}
	}
	var added []*RealNode
	for range n {
		idx := len(c.RealNodes()) + 1
		if idx > maxRealNodes {
			return added, fmt.Errorf("at most %d real nodes", maxRealNodes)
		}
		rn, err := c.startRealNode(ctx, idx)
		if rn != nil {
			c.mu.Lock()
			c.realNodes = append(c.realNodes, rn)
			c.mu.Unlock()
		}
		if err != nil {
			return added, fmt.Errorf("real node %s%d: %w", RealNodePrefix, idx, err)
		}
		added = append(added, rn)
	}
	return added, c.ensureNodeAgents(ctx, added)
}

// sweepRealNodeLeftovers removes what a harness that died without its
// teardown left (we hold the lock, so nothing of it is in use): processes in
// real-node cgroups, the bridges, the cgroups.
func sweepRealNodeLeftovers(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	var errs []error
	for _, h := range cgroupHierarchies() {
		roots, _ := filepath.Glob(filepath.Join(cgroupV1Root, h, "flock-real-*"))
		for _, root := range roots {
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					for _, f := range strings.Fields(readString(filepath.Join(p, "tasks"))) {
						if pid, _ := strconv.Atoi(f); pid > 0 {
							_ = syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
				return nil
			})
			logger.Info("Removing a real node's leftover cgroup", "cgroup", root)
		}
	}
	links, _ := filepath.Glob("/sys/class/net/flockbr*")
	for _, l := range links {
		logger.Info("Removing a real node's leftover bridge", "bridge", filepath.Base(l))
		errs = append(errs, ipCmd("link", "del", filepath.Base(l)))
	}
	time.Sleep(200 * time.Millisecond) // killed tasks leave their cgroups
	roots := map[string]bool{}
	for _, h := range cgroupHierarchies() {
		found, _ := filepath.Glob(filepath.Join(cgroupV1Root, h, "flock-real-*"))
		for _, f := range found {
			roots[filepath.Base(f)] = true
		}
	}
	for r := range roots {
		errs = append(errs, removeCgroup(r))
	}
	return errors.Join(errs...)
}

// startRealNode brings up real-<idx>. On error the returned node (if any)
// holds what was started, for StopRealNodes.
func (c *Cluster) startRealNode(ctx context.Context, idx int) (*RealNode, error) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	name := RealNodePrefix + strconv.Itoa(idx)
	rn := &RealNode{
		Name:       name,
		Index:      idx,
		Dir:        c.path("real", name),
		Bridge:     "flockbr" + strconv.Itoa(idx),
		BridgeIP:   fmt.Sprintf("10.88.%d.1", idx),
		Subnet:     fmt.Sprintf("10.88.%d.0/24", idx),
		CgroupRoot: "/flock-real-" + strconv.Itoa(idx),
	}
	rn.ContainerdSocket = filepath.Join(rn.Dir, "containerd.sock")
	if len(rn.ContainerdSocket)+len(".ttrpc") >= 100 {
		return nil, fmt.Errorf("containerd socket path %s is too long for a unix socket; use a shorter work directory", rn.ContainerdSocket)
	}
	for _, d := range []string{"kubelet", "containerd/root", "containerd/state", "runc", "cni/net.d", "cni/ipam", "pki", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(rn.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	rn.KubeletPort = ports[0]
	healthzPort := ports[1]

	// The pod network: a bridge we own, with the node's address.
	if err := ipCmd("link", "add", "name", rn.Bridge, "type", "bridge"); err != nil {
		return nil, err
	}
	if err := ipCmd("addr", "add", rn.BridgeIP+"/24", "dev", rn.Bridge); err != nil {
		return rn, err
	}
	if err := ipCmd("link", "set", rn.Bridge, "up"); err != nil {
		return rn, err
	}
	if err := makeCgroup(strings.TrimPrefix(rn.CgroupRoot, "/")); err != nil {
		return rn, err
	}
	cniConf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "flock-%[1]s",
  "plugins": [{
    "type": "bridge",
    "bridge": %[2]q,
    "isGateway": false,
    "isDefaultGateway": false,
    "ipMasq": false,
    "hairpinMode": false,
    "ipam": {
      "type": "host-local",
      "dataDir": %[3]q,
      "ranges": [[{"subnet": %[4]q, "rangeStart": "10.88.%[5]d.10", "rangeEnd": "10.88.%[5]d.250"}]]
    }
  }]
}
`, name, rn.Bridge, filepath.Join(rn.Dir, "cni", "ipam"), rn.Subnet, idx)
	if err := os.WriteFile(filepath.Join(rn.Dir, "cni", "net.d", "10-flock.conflist"), []byte(cniConf), 0o644); err != nil {
		return rn, err
	}

	// containerd, with the offline images imported.
	if err := os.WriteFile(filepath.Join(rn.Dir, "containerd.toml"), []byte(c.containerdConfig(rn)), 0o644); err != nil {
		return rn, err
	}
	// containerd (and so the shims, runc and the containers) and kubelet
	// share a mount namespace of the node's own, in which the data root is
	// the node's data directory: every real node has its own data root at
	// the same path, as separate machines would.
	env := []string{"PATH=" + c.opts.BinDir + ":" + os.Getenv("PATH")}
	wrapper, args := []string{}, []string{"--config", filepath.Join(rn.Dir, "containerd.toml")}
	if c.opts.DataRoot != "" {
		if err := os.MkdirAll(rn.DataDir(), 0o755); err != nil {
			return rn, err
		}
		wrapper = []string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c",
			`mkdir -p "$1" && mount --bind "$2" "$1" && shift 2 && exec "$@"`, "sh", c.opts.DataRoot, rn.DataDir(), c.bin("containerd")}
	}
	if len(wrapper) > 0 {
		rn.containerd, err = c.startPath(ctx, name+"-containerd", unsharePath, append(wrapper, args...), env)
	} else {
		rn.containerd, err = c.start(ctx, name+"-containerd", "containerd", args, env)
	}
	if err != nil {
		return rn, err
	}
	if err := c.waitFor(ctx, rn.containerd, name+" containerd", func(ctx context.Context) (bool, error) {
		_, err := rn.ctr(ctx, c.opts.BinDir, "version")
		return err == nil, err
	}); err != nil {
		return rn, err
	}
	tarball := filepath.Join(rn.Dir, "images.tar")
	if err := WriteTestImages(filepath.Join(c.opts.BinDir, "flock-test"), tarball); err != nil {
		return rn, err
	}
	if out, err := rn.ctr(ctx, c.opts.BinDir, "-n", "k8s.io", "images", "import", tarball); err != nil {
		return rn, fmt.Errorf("import the test images: %w: %s", err, out)
	}
	if c.opts.DataRoot != "" {
		if err := c.importNodeAgentImage(ctx, rn); err != nil {
			return rn, err
		}
	}

	// The pods' DNS server: CoreDNS on the bridge address.
	if err := c.startNodeDNS(ctx, rn); err != nil {
		return rn, err
	}

	// kubelet: its certificates, kubeconfig and configuration.
	serving, err := c.PKI.ClusterCA.issue(filepath.Join(rn.Dir, "pki"), certSpec{name: "kubelet-serving", cn: name, server: true,
		dnsNames: []string{name, "localhost"}, ips: []net.IP{net.ParseIP(rn.BridgeIP), net.ParseIP("127.0.0.1")}})
	if err != nil {
		return rn, err
	}
	client, err := c.PKI.ClusterCA.issue(filepath.Join(rn.Dir, "pki"), certSpec{name: "kubelet-client", cn: "system:node:" + name,
		orgs: []string{"system:nodes"}, client: true})
	if err != nil {
		return rn, err
	}
	kubeconfig := filepath.Join(rn.Dir, "kubelet.kubeconfig")
	if err := writeKubeconfig(kubeconfig, c.KubeAPIServerURL, c.PKI.ClusterCA.CertPEM(),
		kubeconfigUser{name: "system:node:" + name, certPEM: client.CertPEM, keyPEM: client.KeyPEM}); err != nil {
		return rn, err
	}
	config := filepath.Join(rn.Dir, "kubelet.yaml")
	if err := os.WriteFile(config, []byte(c.kubeletConfig(rn, serving, healthzPort)), 0o644); err != nil {
		return rn, err
	}
	labels := []string{"type=real", RealNodeLabel + "=true", corev1.LabelInstanceTypeStable + "=real", LabelRegion + "=" + Region,
		LabelZone + "=zone-real"}
	args = []string{
		"--config=" + config,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(rn.Dir, "kubelet"),
		"--cert-dir=" + filepath.Join(rn.Dir, "pki"),
		"--hostname-override=" + name,
		"--node-ip=" + rn.BridgeIP,
		"--node-labels=" + strings.Join(labels, ","),
		"--v=2",
	}
	if c.opts.TaintRealNodes {
		args = append(args, "--register-with-taints="+RealNodeTaint+"=true:NoSchedule")
	}
	if c.opts.DataRoot != "" {
		ns := fmt.Sprintf("--mount=/proc/%d/ns/mnt", rn.containerd.PID())
		rn.kubelet, err = c.startPath(ctx, name+"-kubelet", nsenterPath, append([]string{ns, "--", c.bin("kubelet")}, args...), env)
	} else {
		rn.kubelet, err = c.start(ctx, name+"-kubelet", "kubelet", args, env)
	}
	if err != nil {
		return rn, err
	}
	err = c.waitFor(ctx, rn.kubelet, "node "+name+" Ready", func(ctx context.Context) (bool, error) {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		// Ready, and the node lifecycle controller has lifted its
		// not-ready taint (until then no Flock counts the node eligible).
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
				return false, fmt.Errorf("node %s still has taint %s", name, taint.Key)
			}
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, fmt.Errorf("node %s Ready=%s: %s", name, cond.Status, cond.Message)
			}
		}
		return false, fmt.Errorf("node %s has no Ready condition yet", name)
	})
	// kubelet sets its kernel tunables once, when it starts: put them back.
	if rerr := writeSysctls(c.realTunables); rerr != nil {
		logger.Error(rerr, "Restoring the sysctls kubelet changed")
	}
	if err != nil {
		return rn, err
	}
	logger.Info("Real node is Ready", "node", name, "bridge", rn.Bridge, "address", rn.BridgeIP, "elapsed", time.Since(start).Round(time.Millisecond))
	return rn, nil
}

// ctr runs ctr against the node's containerd.
func (rn *RealNode) ctr(ctx context.Context, binDir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "ctr"), append([]string{"--address", rn.ContainerdSocket}, args...)...).CombinedOutput()
	return string(out), err
}

// containerdConfig renders the node's containerd configuration: roots under
// the node's directory, runc with restricted oom_score_adj (root here lacks
// CAP_SYS_RESOURCE), the node's CNI configuration, the offline pause image,
// network namespaces under the state directory, and the plugins that would
// touch fixed paths (opt, NRI, tracing) off.
func (c *Cluster) containerdConfig(rn *RealNode) string {
	return fmt.Sprintf(`# Written by the local control plane (flock.dev/flock/test/cluster).
version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = []
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[5]q
        Root = %[6]q
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[7]q]
    conf_dir = %[8]q
    max_conf_num = 1

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[9]q

[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(rn.Dir, "containerd", "root"), filepath.Join(rn.Dir, "containerd", "state"),
		rn.ContainerdSocket, rn.ContainerdSocket+".ttrpc",
		filepath.Join(c.opts.BinDir, "runc"), filepath.Join(rn.Dir, "runc"),
		CNIBinDir, filepath.Join(rn.Dir, "cni", "net.d"), PauseImage)
}

// kubeletConfig renders the node's KubeletConfiguration (see the package
// comment of this file for the choices).
func (c *Cluster) kubeletConfig(rn *RealNode, serving *KeyPair, healthzPort int) string {
	return fmt.Sprintf(`# Written by the local control plane (flock.dev/flock/test/cluster).
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
tlsCertFile: %[4]s
tlsPrivateKeyFile: %[5]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[6]s}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://%[7]s
cgroupDriver: cgroupfs
cgroupRoot: %[8]s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: false
makeIPTablesUtilChains: false
clusterDNS: [%[1]s]
clusterDomain: %[9]s
resolvConf: ""
podLogsDir: %[10]s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
staticPodPath: ""
maxPods: 50
shutdownGracePeriod: 0s
`, rn.BridgeIP, rn.KubeletPort, healthzPort, serving.CertFile, serving.KeyFile, c.PKI.ClusterCA.CertFile,
		rn.ContainerdSocket, rn.CgroupRoot, ClusterDomain, filepath.Join(rn.Dir, "pod-logs"))
}

// startNodeDNS runs a CoreDNS for the node's pods on its bridge address,
// port 53, with the cluster CoreDNS's zones and credentials.
func (c *Cluster) startNodeDNS(ctx context.Context, rn *RealNode) error {
	kubeconfig := c.path("coredns", "kubeconfig")
	if _, err := os.Stat(kubeconfig); err != nil {
		return fmt.Errorf("real nodes need the cluster DNS (CoreDNS); it is not running: %w", err)
	}
	conf := filepath.Join(rn.Dir, "Corefile")
	if err := os.WriteFile(conf, []byte(corefile(rn.BridgeIP, 53, kubeconfig, DNSZones())), 0o644); err != nil {
		return err
	}
	p, err := c.start(ctx, rn.Name+"-coredns", "coredns", []string{"-conf", conf}, nil)
	if err != nil {
		return err
	}
	rn.dns = p
	addr := net.JoinHostPort(rn.BridgeIP, "53")
	want := "kubernetes.default.svc." + ClusterDomain + "."
	return c.waitFor(ctx, p, "coredns on "+addr, func(ctx context.Context) (bool, error) {
		ips, err := queryA(ctx, "udp", addr, want)
		return len(ips) > 0, err
	})
}

// StopRealNodes tears every real node down in the order that leaks nothing:
// delete its pods and wait (bounded) until kubelet has stopped them; stop
// kubelet; stop and remove what is left through the runtime (CRI); stop
// containerd and the node's CoreDNS; unmount everything under the node's
// directory; delete the bridge; remove the cgroups; then remove what appeared
// at the fixed paths, put kubelet's sysctls back, delete the Node objects and
// release the machine's lock. It is safe to call more than once.
func (c *Cluster) StopRealNodes(ctx context.Context) error {
	c.realMu.Lock()
	defer c.realMu.Unlock()
	c.mu.Lock()
	nodes := c.realNodes
	c.realNodes = nil
	c.mu.Unlock()
	var errs []error
	for i := len(nodes) - 1; i >= 0; i-- {
		errs = append(errs, c.stopRealNode(ctx, nodes[i]))
	}
	if c.realLock != nil {
		errs = append(errs, c.realFixed.restore(), writeSysctls(c.realTunables))
		c.realLock.release()
		c.realLock = nil
	}
	return errors.Join(errs...)
}

func (c *Cluster) stopRealNode(ctx context.Context, rn *RealNode) error {
	logger := klog.FromContext(ctx)
	var errs []error
	if rn.kubelet != nil && !rn.kubelet.Exited() && c.Kube != nil {
		errs = append(errs, c.drainRealNode(ctx, rn))
	}
	if rn.kubelet != nil {
		errs = append(errs, rn.kubelet.Stop(DefaultStopGrace))
	}
	if rn.containerd != nil && !rn.containerd.Exited() {
		errs = append(errs, rn.removeAllPods(ctx))
		errs = append(errs, rn.containerd.Stop(DefaultStopGrace))
	}
	if rn.dns != nil {
		errs = append(errs, rn.dns.Stop(DefaultStopGrace))
	}
	errs = append(errs, killShims(c.opts.BinDir, rn.ContainerdSocket))
	errs = append(errs, unmountUnder(rn.Dir))
	if _, err := os.Stat(filepath.Join("/sys/class/net", rn.Bridge)); err == nil {
		errs = append(errs, ipCmd("link", "del", rn.Bridge))
	}
	errs = append(errs, removeCgroup(strings.TrimPrefix(rn.CgroupRoot, "/")))
	if c.Kube != nil {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := c.Kube.CoreV1().Nodes().Delete(dctx, rn.Name, metav1.DeleteOptions{}); err != nil {
			logger.V(1).Info("Deleting the node object", "node", rn.Name, "err", err)
		}
		cancel()
	}
	err := errors.Join(errs...)
	logger.Info("Stopped real node", "node", rn.Name, "err", err)
	return err
}

// drainRealNode cordons rn and taints it NoExecute (so nothing new is
// scheduled there and the taint manager evicts what does not tolerate it),
// deletes the pods bound to it, and waits (bounded) until the API lists
// none and the runtime runs no task.
func (c *Cluster) drainRealNode(ctx context.Context, rn *RealNode) error {
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":true,"taints":[{"key":%q,"value":"stopping","effect":"NoExecute"}]}}`, RealNodeTaint)
	if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, rn.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		klog.FromContext(ctx).Info("Cordoning the real node before its teardown", "node", rn.Name, "err", err)
	}
	grace := int64(1)
	sel := fields.OneTermEqualSelector("spec.nodeName", rn.Name).String()
	for {
		pods, err := c.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return fmt.Errorf("list the pods of %s: %w", rn.Name, err)
		}
		tasks, _ := rn.ctr(ctx, c.opts.BinDir, "-n", "k8s.io", "tasks", "ls")
		if len(pods.Items) == 0 && !strings.Contains(tasks, "RUNNING") {
			return nil
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				_ = c.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
			}
		}
		select {
		case <-ctx.Done():
			return nil // what is left goes through the runtime
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// removeAllPods stops and removes every pod sandbox and container left in
// the node's runtime through the CRI, as kubelet would (so CNI releases the
// pod's network).
func (rn *RealNode) removeAllPods(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+rn.ContainerdSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := criv1.NewRuntimeServiceClient(conn)
	var errs []error
	ctrs, err := rt.ListContainers(ctx, &criv1.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("CRI list containers of %s: %w", rn.Name, err)
	}
	for _, ct := range ctrs.Containers {
		if _, err := rt.StopContainer(ctx, &criv1.StopContainerRequest{ContainerId: ct.Id, Timeout: 2}); err != nil {
			errs = append(errs, err)
		}
		if _, err := rt.RemoveContainer(ctx, &criv1.RemoveContainerRequest{ContainerId: ct.Id}); err != nil {
			errs = append(errs, err)
		}
	}
	sbs, err := rt.ListPodSandbox(ctx, &criv1.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("CRI list pod sandboxes of %s: %w", rn.Name, err)
	}
	for _, sb := range sbs.Items {
		if _, err := rt.StopPodSandbox(ctx, &criv1.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, err)
		}
		if _, err := rt.RemovePodSandbox(ctx, &criv1.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, err)
		}
	}
	if n := len(ctrs.Containers) + len(sbs.Items); n > 0 {
		klog.FromContext(ctx).Info("Removed what kubelet left in the runtime", "node", rn.Name, "containers", len(ctrs.Containers), "sandboxes", len(sbs.Items))
	}
	return errors.Join(errs...)
}

// killShims kills (by pid) the runc shims of the containerd at socket that
// outlived it; normally there are none.
func killShims(binDir, socket string) error {
	shim := filepath.Join(binDir, "containerd-shim-runc-v2")
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	var errs []error
	for _, p := range procs {
		exe, err := os.Readlink(p)
		if err != nil || strings.TrimSuffix(exe, " (deleted)") != shim {
			continue
		}
		dir := filepath.Dir(p)
		if !strings.Contains(strings.ReplaceAll(readString(filepath.Join(dir, "cmdline")), "\x00", " "), socket) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill shim %d: %w", pid, err))
		}
	}
	return errors.Join(errs...)
}

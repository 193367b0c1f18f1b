// Package cluster runs a real local Kubernetes control plane on 127.0.0.1 with
// flock-apiserver registered behind kube-apiserver's aggregation layer: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok with fake
// nodes, CoreDNS serving the cluster domain from kube-apiserver, optionally
// real nodes (kubelet with containerd, see realnode.go), and flock-apiserver
// authenticated as its ServiceAccount. It is the one
// implementation behind `make local-up` and the e2e suite.
//
// Every process is started by the harness, tracked by PID, logs to
// WorkDir/logs/<name>.log, and is stopped by Down (SIGTERM, then SIGKILL after
// a bounded wait). Children also get SIGKILL if the harness itself dies.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"flock.dev/flock/internal/syskubectl"
	flockclient "flock.dev/flock/pkg/generated/clientset/versioned"
)

// Names of the objects that register flock-apiserver.
const (
	FlockNamespace      = "flock-system"
	FlockServiceAccount = "flock-apiserver"
	// ControllerServiceAccount is the embedded controller's own identity
	// (--controller-kubeconfig).
	ControllerServiceAccount = "flock-controller"
	FlockServiceName         = "flock-apiserver"
	APIServiceName           = "v1alpha1.flock.dev"
	// KwokNodeAnnotation marks the nodes kwok manages.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// PodCIDR is the range kwok assigns pod IPs from.
	PodCIDR = "10.244.0.0/16"
	// ServiceCIDR is kube-apiserver's service cluster IP range.
	ServiceCIDR = "10.0.0.0/24"
)

// Binaries the harness needs in Options.BinDir.
var requiredBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"}

// Options configure a local control plane.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubectl, kwok, coredns (`make tools`) and flock-apiserver
	// (`make build`). Required.
	BinDir string
	// WorkDir receives certificates, kubeconfigs, data and logs. The harness
	// locks it (WorkDir/harness.pid) and replaces what an earlier run left
	// there. Required.
	WorkDir string
	// RepoRoot is the Flock checkout (for artifacts/ and hack/kwok/).
	// Default: found by walking up from the working directory.
	RepoRoot string
	// Nodes is the number of kwok nodes (node-1 ... node-N). Default 3; a
	// negative value means none.
	Nodes int
	// Zones are spread round-robin over the nodes as topology.kubernetes.io/zone.
	// Default zone-a, zone-b, zone-c.
	Zones []string
	// Ports fixes ports; zero fields get free ports.
	Ports Ports
	// FlockArgs are extra flock-apiserver flags, after the harness's own.
	FlockArgs []string
	// FlockEnv are extra environment variables of flock-apiserver
	// (NAME=value), e.g. GOMEMLIMIT.
	FlockEnv []string
	// Extra flags for the other components, after the harness's own.
	KubeAPIServerArgs     []string
	ControllerManagerArgs []string
	SchedulerArgs         []string
	KwokArgs              []string
	// FlockReplicas > 1 runs that many flock-apiservers whose embedded etcd
	// members form one cluster, behind HAProxy on Ports.FlockAPIServer (HA
	// mode, ha.go). It needs haproxy. An odd number; 0 or 1: one server.
	FlockReplicas int
	// WithoutFlock brings up the control plane without flock-apiserver and
	// without applying the registration manifests.
	WithoutFlock bool
	// WithoutDNS brings it up without CoreDNS (then BinDir needs no coredns
	// and DNSAddr is empty).
	WithoutDNS bool
	// RealNodes is the number of real nodes (real-1 ... real-N: kubelet
	// with containerd on this machine) Up starts; more can be added later
	// with AddRealNodes. RealNodeSupport says whether the machine can.
	RealNodes int
	// TaintRealNodes registers real nodes with the NoSchedule taint
	// RealNodeTaint, so only pods that tolerate it run there.
	TaintRealNodes bool
	// DataRoot, when set, is flock-apiserver's --data-root (where members'
	// data directories are on real nodes). Default: flock-apiserver's own.
	DataRoot string
	// SystemKubectl is a second kubectl (the system's, an older version).
	// Default: the first `kubectl` on PATH that is not BinDir/kubectl, else
	// BinDir/kubectl-1.32 (syskubectl.Find).
	SystemKubectl string
	// ReadyTimeout bounds the wait for each component. Default 90s.
	ReadyTimeout time.Duration
}

// Cluster is a running local control plane.
type Cluster struct {
	opts Options

	// PKI holds every CA, certificate and key.
	PKI *PKI
	// Ports are the ports in use.
	Ports Ports
	// KubeconfigPath is an admin (system:masters) kubeconfig for kube-apiserver.
	KubeconfigPath string
	// FlockKubeconfigPath is the kubeconfig flock-apiserver runs with: the
	// token of ServiceAccount flock-system/flock-apiserver.
	FlockKubeconfigPath string
	// ControllerKubeconfigPath is flock-apiserver's --controller-kubeconfig:
	// the token of ServiceAccount flock-system/flock-controller.
	ControllerKubeconfigPath string
	// KubeAPIServerURL is https://127.0.0.1:<port>.
	KubeAPIServerURL string
	// FlockAPIServerURL is flock-apiserver's own URL (bypassing the aggregator).
	FlockAPIServerURL string
	// EtcdURL is kube-apiserver's etcd; FlockEtcdURL is flock-apiserver's
	// embedded etcd (empty with --etcd-servers in FlockArgs).
	EtcdURL      string
	FlockEtcdURL string
	// RESTConfig is an admin config through kube-apiserver.
	RESTConfig *rest.Config
	// Kube and Flock are clientsets through kube-apiserver, as admin.
	Kube  kubernetes.Interface
	Flock flockclient.Interface
	// NodeNames are the kwok nodes created by Up.
	NodeNames []string
	// HA mode (Options.FlockReplicas > 1): HAProxy, and the certificate of
	// the etcd members (server and client, for 127.0.0.1).
	HAProxy  *Process
	EtcdCert *KeyPair

	mu        sync.Mutex
	procs     []*Process
	realNodes []*RealNode
	// realMu serializes starting and stopping real nodes; realLock is the
	// machine's real-node lock while any run, realFixed and realTunables
	// what their teardown restores.
	realMu       sync.Mutex
	realLock     *dirLock
	realFixed    fixedPathState
	realTunables map[string]string

	flock    *Process
	replicas []*FlockReplica
	nodeSeq  int
	lock     *dirLock
	downOnce sync.Once
	downErr  error
}

// MissingBinariesError lists binaries that are not in BinDir.
type MissingBinariesError struct {
	BinDir  string
	Missing []string
}

func (e *MissingBinariesError) Error() string {
	return fmt.Sprintf("missing binaries in %s: %v (run `make tools build` first)", e.BinDir, e.Missing)
}

func (o *Options) complete() error {
	if o.BinDir == "" || o.WorkDir == "" {
		return errors.New("cluster: Options.BinDir and Options.WorkDir are required")
	}
	var err error
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return err
	}
	if o.WorkDir, err = filepath.Abs(o.WorkDir); err != nil {
		return err
	}
	if o.RepoRoot == "" {
		if o.RepoRoot, err = FindRepoRoot(); err != nil {
			return err
		}
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Nodes < 0 {
		o.Nodes = 0
	}
	if len(o.Zones) == 0 {
		o.Zones = []string{"zone-a", "zone-b", "zone-c"}
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 90 * time.Second
	}
	if o.FlockReplicas > 1 && o.FlockReplicas%2 == 0 {
		return fmt.Errorf("cluster: FlockReplicas must be odd (a majority of etcd members must survive a failure), got %d", o.FlockReplicas)
	}
	bins := requiredBinaries
	if !o.WithoutDNS {
		bins = append(bins[:len(bins):len(bins)], "coredns")
	}
	if !o.WithoutFlock {
		bins = append(bins[:len(bins):len(bins)], "flock-apiserver")
	}
	var missing []string
	for _, b := range bins {
		if st, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return &MissingBinariesError{BinDir: o.BinDir, Missing: missing}
	}
	if o.SystemKubectl == "" {
		o.SystemKubectl = syskubectl.Find(os.Getenv("PATH"), o.BinDir)
	}
	return nil
}

// FindRepoRoot walks up from the working directory to the directory whose
// go.mod declares module flock.dev/flock.
func FindRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePathIs(data, "flock.dev/flock") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cluster: cannot find the flock.dev/flock checkout above the working directory; set Options.RepoRoot")
		}
		dir = parent
	}
}

// SuiteDirs resolves, for a test suite run by `make <target>` (which sets
// FLOCK_BIN), the checkout's root, the tools directory (FLOCK_BIN, made
// absolute) and a fresh work directory _output/<suite>/<time>-<pid>, so
// that two runs in one checkout do not collide.
func SuiteDirs(suite, target string) (root, binDir, workDir string, err error) {
	binDir = os.Getenv("FLOCK_BIN")
	if binDir == "" {
		return "", "", "", fmt.Errorf("FLOCK_BIN is not set. Run `make %s`, which builds the control-plane tools and flock-apiserver into _output/bin and sets FLOCK_BIN", target)
	}
	if root, err = FindRepoRoot(); err != nil {
		return "", "", "", err
	}
	if !filepath.IsAbs(binDir) {
		binDir = filepath.Join(root, binDir)
	}
	workDir = filepath.Join(root, "_output", suite, time.Now().Format("20060102-150405")+"-"+strconv.Itoa(os.Getpid()))
	return root, binDir, workDir, nil
}

func modulePathIs(gomod []byte, path string) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		if strings.TrimSpace(line) == "module "+path {
			return true
		}
	}
	return false
}

// stateDirs are the entries of WorkDir that Up owns and recreates.
var stateDirs = []string{"pki", "logs", "etcd", "flock", "kwok", "coredns", "home", "extra", "kubeconfig", "flock-apiserver.kubeconfig", "real", "data"}

// Up brings up a local control plane and, unless WithoutFlock, flock-apiserver
// registered as v1alpha1.flock.dev. On error everything started is stopped.
func Up(ctx context.Context, opts Options) (_ *Cluster, retErr error) {
	logger := klog.FromContext(ctx)
	if err := opts.complete(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
		return nil, err
	}
	lock, err := lockDir(opts.WorkDir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, lock: lock, Ports: opts.Ports}
	defer func() {
		if retErr != nil {
			if err := c.Down(); err != nil {
				logger.Error(err, "Stopping after a failed start")
			}
		}
	}()
	for _, d := range stateDirs {
		// A real node that died without its teardown may have left mounts.
		if err := unmountUnder(filepath.Join(opts.WorkDir, d)); err != nil {
			return nil, err
		}
		if err := os.RemoveAll(filepath.Join(opts.WorkDir, d)); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(c.LogDir(), 0o755); err != nil {
		return nil, err
	}
	ports := c.Ports.named()
	if opts.WithoutDNS {
		c.Ports.DNS = 0
		ports = slices.DeleteFunc(ports, func(np namedPort) bool { return np.port == &c.Ports.DNS })
	}
	if err := allocatePorts(ports); err != nil {
		return nil, err
	}
	start := time.Now()
	if c.PKI, err = NewPKI(c.path("pki")); err != nil {
		return nil, fmt.Errorf("generate certificates: %w", err)
	}
	c.KubeAPIServerURL = "https://127.0.0.1:" + strconv.Itoa(c.Ports.KubeAPIServer)
	c.FlockAPIServerURL = "https://127.0.0.1:" + strconv.Itoa(c.Ports.FlockAPIServer)
	c.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(c.Ports.Etcd)

	if err := c.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := c.startKubeAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := c.startControllers(ctx); err != nil {
		return nil, err
	}
	if err := c.createNodes(ctx); err != nil {
		return nil, err
	}
	if !opts.WithoutDNS {
		if err := c.startCoreDNS(ctx); err != nil {
			return nil, err
		}
	}
	if opts.RealNodes > 0 {
		if opts.WithoutDNS {
			return nil, errors.New("real nodes need the cluster DNS; do not set WithoutDNS")
		}
		if _, err := c.AddRealNodes(ctx, opts.RealNodes); err != nil {
			return nil, err
		}
	}
	if !opts.WithoutFlock {
		if err := c.startFlock(ctx); err != nil {
			return nil, err
		}
	}
	logger.Info("Local control plane is ready", "elapsed", time.Since(start).Round(time.Millisecond), "kubeconfig", c.KubeconfigPath)
	return c, nil
}

// Down stops every process the harness started, newest first (SIGTERM, then
// SIGKILL after DefaultStopGrace), and releases WorkDir. Real nodes go first,
// in their safe order (StopRealNodes), after the flock-apiservers, whose
// controller would otherwise recreate the pods being removed. It is safe to
// call more than once and from several goroutines.
func (c *Cluster) Down() error {
	c.downOnce.Do(func() {
		c.realMu.Lock()
		real := c.realLock != nil
		c.realMu.Unlock()
		c.mu.Lock()
		procs := append([]*Process(nil), c.procs...)
		c.mu.Unlock()
		var errs []error
		if real {
			for _, p := range procs {
				if strings.HasPrefix(p.Name, "flock-apiserver") {
					errs = append(errs, p.Stop(DefaultStopGrace))
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			errs = append(errs, c.StopRealNodes(ctx))
			cancel()
		}
		for i := len(procs) - 1; i >= 0; i-- {
			if err := procs[i].Stop(DefaultStopGrace); err != nil {
				errs = append(errs, err)
			}
		}
		c.lock.release()
		c.downErr = errors.Join(errs...)
	})
	return c.downErr
}

// WorkDir is the cluster's work directory.
func (c *Cluster) WorkDir() string { return c.opts.WorkDir }

// LogDir holds one log file per component.
func (c *Cluster) LogDir() string { return c.path("logs") }

// BinDir is where the binaries come from.
func (c *Cluster) BinDir() string { return c.opts.BinDir }

// RepoRoot is the Flock checkout the manifests come from.
func (c *Cluster) RepoRoot() string { return c.opts.RepoRoot }

// Processes returns the processes started so far (running or not), oldest first.
func (c *Cluster) Processes() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Process(nil), c.procs...)
}

// FlockProcess is the flock-apiserver that the APIService routes to.
func (c *Cluster) FlockProcess() *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flock
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.opts.WorkDir}, elem...)...)
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.opts.BinDir, name) }

// start launches a component and records it.
func (c *Cluster) start(ctx context.Context, name, binary string, args, env []string) (*Process, error) {
	return c.startPath(ctx, name, c.bin(binary), args, env)
}

// startPath is start for a program given by its path.
func (c *Cluster) startPath(ctx context.Context, name, path string, args, env []string) (*Process, error) {
	p, err := StartProcess(name, path, args, env, filepath.Join(c.LogDir(), name+".log"), c.opts.WorkDir)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	klog.FromContext(ctx).Info("Started", "component", name, "pid", p.PID(), "log", p.LogFile)
	return p, nil
}

// waitFor polls check every interval until it returns true, the process
// exits, or the ready timeout passes; errors name the component and show the
// end of its log.
func (c *Cluster) waitFor(ctx context.Context, p *Process, what string, check func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ReadyTimeout)
	defer cancel()
	start := time.Now()
	var lastErr error
	attempts := 0
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if p != nil && p.Exited() {
			return fmt.Errorf("waiting for %s: %s", what, p.exitDescription())
		}
		ok, err := check(ctx)
		if ok {
			klog.FromContext(ctx).V(1).Info("Ready", "what", what, "elapsed", time.Since(start).Round(time.Millisecond))
			return nil
		}
		attempts++
		// An attempt cut short by the wait's own deadline says nothing
		// about the component: keep the error before it.
		if err != nil && (ctx.Err() == nil || lastErr == nil) {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("%s not ready after %s and %d attempts", what, time.Since(start).Round(time.Second), attempts)
			if lastErr != nil {
				msg += fmt.Sprintf(" (last error: %v)", lastErr)
			}
			if p != nil {
				msg += fmt.Sprintf("; last lines of %s:\n%s", p.LogFile, p.LogTail(25))
			}
			return errors.New(msg)
		case <-tick.C:
		}
	}
}

// httpOK reports whether GET url returns 200 using client.
func httpOK(ctx context.Context, client *http.Client, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	return doOK(client, req)
}

// doOK reports whether req returns 200.
func doOK(client *http.Client, req *http.Request) (bool, error) {
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body := make([]byte, 2048)
	n, _ := resp.Body.Read(body)
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%s %s: %d %s", req.Method, req.URL, resp.StatusCode, body[:n])
	}
	return true, nil
}

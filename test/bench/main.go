// Command bench (`make bench-e2e`) measures Flock against the built-ins on
// the project's local control plane (issue 17): API throughput and latency
// for a CRD of the same shape as a Flock, StatefulSets (replicas 0), Flocks
// through the aggregator and Flocks straight at flock-apiserver; then the
// time from create to all members Ready for Flocks and two anchors, a
// StatefulSet without volumes and a StatefulSet+PV whose members each claim
// a node-local PersistentVolume (a Flock member has one); then each
// process's peak RSS. It prints one table with ratios and writes the
// raw results as JSON. With -real-nodes=N the readiness comparison runs
// instead on N real nodes (realnode.go). It is a measurement, not a
// pass/fail test: timings on a shared machine are noisy, so compare the
// ratios of one run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockclient "flock.dev/flock/pkg/generated/clientset/versioned"
	"flock.dev/flock/test/cluster"
)

// Sizes and rates; flags.
var (
	outPath      = flag.String("out", "_output/bench-e2e.json", "where the raw results go (JSON)")
	workDir      = flag.String("workdir", "", "the control plane's work directory (default: a temporary one)")
	createN      = flag.Int("create", 200, "objects created per create case")
	getN         = flag.Int("get", 1000, "GETs in the get case")
	listSize     = flag.Int("list", 2000, "objects in the LIST case")
	watchN       = flag.Int("watch", 20, "create->watch samples")
	scaleN       = flag.Int("scale", 100, "the scale case: N nodes and N objects x 3 members (the issue's full size is 1000)")
	controlQPS   = flag.Int("controller-qps", 200, "client QPS of both the Flock controller and kube-controller-manager (burst 2x)")
	profile      = flag.String("profile", "_output/bench-e2e-flock-apiserver.pprof", "where a CPU profile of flock-apiserver during the Flock's first run of -profile-case goes, kube-apiserver's and kube-controller-manager's beside it (flock-apiserver in the name becomes the server's name; empty: none)")
	profileCase  = flag.String("profile-case", "50 x 3", "the readiness case whose Flock run -profile profiles: the first whose name starts with this (e.g. \"300 x 3\" with -scale=300)")
	profileSecs  = flag.Int("profile-seconds", 10, "how long -profile profiles, from the Flock run's start")
	apiProfile   = flag.Int("api-profile", 0, "after the API cases, profile flock-apiserver and kube-apiserver (CPU) for this many seconds of Flock creates and of gets, each c=16 through the aggregator and direct (0: none)")
	flockArgs    = flag.String("flock-args", "", "extra flock-apiserver flags, space-separated (for experiments, e.g. --disable-admission-plugins=FlockMemberDryRun)")
	kcmArgs      = flag.String("kcm-args", "", "extra kube-controller-manager flags, space-separated (for experiments, e.g. -v=5 to log each PersistentVolume sync; see -pv-syncs)")
	pvSyncsLog   = flag.String("pv-syncs", "", "only read this kube-controller-manager log (at -v=5; logs/kube-controller-manager.log of a -workdir) and print how long its PersistentVolume controller's volume syncs took, those that wrote a volume's phase and the others")
	bin          = flag.String("bin", "", "directory of the binaries, flock-apiserver and the control plane's (empty: _output/bin); for A/B runs of two builds of flock-apiserver")
	flockEnv     = flag.String("flock-env", "", "extra environment of flock-apiserver, space-separated NAME=value (e.g. GOMEMLIMIT=200MiB)")
	apiOnly      = flag.Bool("api-only", false, "run only the API cases (no readiness cases)")
	memoryN      = flag.Int("memory", 0, "run only the memory case: N nodes, N Flocks x 3, 3N unrelated pods; resident sets after each stage (the issue's size is 1000)")
	memoryWait   = flag.Duration("memory-wait", 45*time.Minute, "how long the memory case waits for the members to be Ready before it measures anyway (the stage then says how many were)")
	memorySettle = flag.Duration("memory-settle", 0, "in the memory case, how long to stay idle after the last stage before one more record (etcd compaction runs every 5m; 0: none)")
	heapPath     = flag.String("heap-profile", "_output/bench-e2e-memory-heap.pprof", "where heap profiles of flock-apiserver after each stage of the memory case go (-<stage> added; empty: none)")
	smoke        = flag.Bool("smoke", false, "tiny sizes (CI smoke): checks the bench runs, numbers mean little")
	withAPI      = flag.Bool("api", true, "run the API cases (false: only the readiness cases)")
	readyTimeout = flag.Duration("ready-timeout", 10*time.Minute, "how long a readiness run waits for all members to be Ready; a run that is not is recorded as such (its namespace deleted) and the next runs go on")
	timelineCase = flag.String("timeline", "", "on kwok nodes too: record when the last member passed each step (claim, volume, helper, pod) in the first readiness case whose name contains this, e.g. \"50 x 3\" (the real-node case always has it)")
	skipKinds    = flag.String("skip-kinds", "", "readiness kinds to leave out of every readiness case, comma-separated (e.g. StatefulSet+PV, which does not finish -scale=1000 on 2 cores; shown as -)")
	apiRuns      = flag.Int("api-runs", 3, "runs of the create, get and LIST cases, the four targets taking turns (the table shows medians)")
	readyRuns    = flag.Int("runs", 3, "runs of each readiness case, the kinds (StatefulSet, StatefulSet+PV, Flock) taking turns (the table shows medians)")
	floodN       = flag.Int("flood", 200, "objects flooding one namespace in the flood case, StatefulSet vs Flock (0: no flood case)")
	nodeAgents   = flag.Bool("node-agents", true, "on kwok nodes, simulate the Flock node agents (a DaemonSet kwok reports Ready, and one flock-node-agent process on this machine doing their work) so Flock members' directories are prepared as with agents on real nodes; false: prepare helper pods (kwok runs each 500 ms); not in the memory case")
	realNodesN   = flag.Int("real-nodes", 0, "run the readiness comparison on N real nodes (kubelet with containerd on this machine; needs root; 2 is what the e2e real lane runs, at most 8) "+
		"instead of the kwok nodes: the one case is N members Parallel, each kind -runs times, and the kwok readiness and flood cases do not run (0: off)")
)

// simulatedAgents: the kwok nodes' node agents run (-node-agents), so the
// agents of nodes added for a case are waited for too.
var simulatedAgents bool

// clientQPS is the benchmark clients' rate limit, the same for every
// target and high enough not to limit them.
const clientQPS = 5000

// row is one measured value for each target of a case.
type row struct {
	Case   string             `json:"case"`
	Unit   string             `json:"unit"`
	Higher bool               `json:"higherIsBetter"`
	Values map[string]float64 `json:"values"`
	// Samples are the values of each run where Values are their medians.
	Samples map[string][]float64 `json:"samples,omitempty"`
	// Unfinished says, by kind, why a readiness run has no sample (its
	// members were not all Ready within -ready-timeout).
	Unfinished map[string]string `json:"unfinished,omitempty"`
	// Stuck says, for each unfinished run, what its members that were not
	// Ready were waiting for (stuckReport).
	Stuck []string `json:"stuck,omitempty"`
}

// results is what the JSON file holds.
type results struct {
	Started       time.Time `json:"started"`
	Machine       string    `json:"machine"`
	ClientQPS     int       `json:"clientQPS"`
	ControllerQPS int       `json:"controllerQPS"`
	ReadyRuns     int       `json:"readyRuns"`
	APIRuns       int       `json:"apiRuns,omitempty"`
	// KwokNodeAgents: the kwok nodes' node agents were simulated
	// (-node-agents).
	KwokNodeAgents bool  `json:"kwokNodeAgents,omitempty"`
	RealNodes      int   `json:"realNodes,omitempty"`
	API            []row `json:"api"`
	Ready          []row `json:"ready"`
	// Timeline is the real-node case's: when the last member passed each step.
	Timeline []row `json:"timeline,omitempty"`
	// PVController: kube-controller-manager's PersistentVolume controller
	// during the Flock's runs of the timeline's case (pvcontroller.go).
	PVController []row              `json:"pvController,omitempty"`
	PeakRSSMiB   map[string]float64 `json:"peakRSSMiB"`
	// PeakRSSAnonMiB is the highest anonymous resident set sampled
	// (anon_peak.go).
	PeakRSSAnonMiB map[string]float64 `json:"peakRSSAnonMiB,omitempty"`
	Memory         []memoryStage      `json:"memory,omitempty"`
}

func main() {
	flag.Parse()
	if *pvSyncsLog != "" {
		if err := printVolumeSyncs(*pvSyncsLog); err != nil {
			fmt.Fprintln(os.Stderr, "bench-e2e:", err)
			os.Exit(1)
		}
		return
	}
	if *smoke {
		*createN, *getN, *listSize, *watchN, *scaleN, *readyRuns, *apiRuns, *floodN = 20, 50, 50, 3, 0, 1, 1, 20
		*readyTimeout = 3 * time.Minute
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-e2e:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	root, err := cluster.FindRepoRoot()
	if err != nil {
		return err
	}
	dir := *workDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "flock-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	qps := strconv.Itoa(*controlQPS)
	burst := strconv.Itoa(2 * *controlQPS)
	binDir := *bin
	if binDir == "" {
		binDir = filepath.Join(root, "_output", "bin")
	}
	opts := cluster.Options{
		BinDir: binDir, WorkDir: dir, RepoRoot: root,
		Nodes: 50, WithoutDNS: true,
		// Both etcds without fsync: the local control plane's etcd runs
		// with --unsafe-no-fsync, and CRDs are stored there.
		FlockArgs: append([]string{"--kube-api-qps=" + qps, "--kube-api-burst=" + burst, "--embedded-etcd-unsafe-no-fsync"},
			strings.Fields(*flockArgs)...),
		FlockEnv:              strings.Fields(*flockEnv),
		ControllerManagerArgs: append([]string{"--kube-api-qps=" + qps, "--kube-api-burst=" + burst}, strings.Fields(*kcmArgs)...),
	}
	if *realNodesN == 0 {
		// kwok renews every fake node's lease from one process. In a
		// 1,000 x 3 run on 2 cores it fell more than the default 50 s
		// behind for 73 nodes: kube-controller-manager marked them
		// NotReady and their pods not Ready, and kwok, unlike a kubelet,
		// never reports a running pod Ready again. A kubelet renews its
		// own lease from its own machine; this is the simulation's lag,
		// not a node's, so the bench's clusters allow 5 minutes of it.
		opts.ControllerManagerArgs = append(opts.ControllerManagerArgs, "--node-monitor-grace-period=5m")
	}
	kwokAgents := *nodeAgents && *realNodesN == 0 && *memoryN == 0
	if kwokAgents {
		opts.DataRoot = filepath.Join(dir, "data")
	}
	var before cluster.MachineState
	if *realNodesN > 0 {
		if err := onlyRealNodes(&opts, *realNodesN); err != nil {
			return err
		}
		before = cluster.SnapshotMachine(opts.BinDir)
	}
	fmt.Fprintln(os.Stderr, "bench-e2e: bringing up the local control plane in", dir)
	c, err := cluster.Up(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Down()

	res := &results{Started: time.Now().UTC(), Machine: machine(), ClientQPS: clientQPS, ControllerQPS: *controlQPS, ReadyRuns: *readyRuns, APIRuns: *apiRuns,
		RealNodes: len(c.RealNodes()), KwokNodeAgents: kwokAgents}
	if kwokAgents {
		if err := c.StartKwokNodeAgents(ctx); err != nil {
			return err
		}
		simulatedAgents = true
	}
	if *memoryN > 0 {
		if res.Memory, err = memoryCase(ctx, c, *memoryN, *heapPath); err != nil {
			return err
		}
		fmt.Printf("Flock bench-e2e -memory=%d, %s\nMachine: %s\n\n", *memoryN, res.Started.Format(time.RFC3339), res.Machine)
		printMemory(res.Memory)
		return writeResults(res)
	}
	anon := sampleAnonPeaks(c)
	defer anon.Stop()
	targets, err := newTargets(ctx, c)
	if err != nil {
		return err
	}
	if *withAPI {
		if res.API, err = apiCases(ctx, c, targets); err != nil {
			return err
		}
	}
	if *apiProfile > 0 {
		if err := apiProfiles(ctx, c, targets, time.Duration(*apiProfile)*time.Second); err != nil {
			return err
		}
	}
	if !*apiOnly {
		var out readyOut
		if out, err = readyCases(ctx, c); err != nil {
			return err
		}
		res.Ready, res.Timeline, res.PVController = out.rows, out.timeline, out.pvController
	}
	res.PeakRSSMiB = peakRSS(c)
	res.PeakRSSAnonMiB = anon.Stop()

	printTable(res)
	if err := writeResults(res); err != nil {
		return err
	}
	if res.RealNodes > 0 {
		return checkTeardown(c, before)
	}
	if *smoke {
		return smokeFailures(res.Ready)
	}
	return nil
}

// smokeFailures fails a smoke run (CI's) whose readiness cases did not all
// finish: the numbers of a smoke mean little, but a case that never sees
// its members Ready means the bench or the product is broken.
func smokeFailures(rows []row) error {
	var errs []error
	for _, r := range rows {
		for _, kind := range slices.Sorted(maps.Keys(r.Unfinished)) {
			errs = append(errs, fmt.Errorf("smoke: %s %s: %s", r.Case, kind, r.Unfinished[kind]))
		}
	}
	return errors.Join(errs...)
}

// writeResults writes the raw results as JSON to -out.
func writeResults(res *results) error {
	data, _ := json.MarshalIndent(res, "", "  ")
	if err := os.MkdirAll(filepath.Dir(*outPath), 0o755); err != nil {
		return err
	}
	return os.WriteFile(*outPath, data, 0o644)
}

// machine describes where the numbers come from.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs (%s/%s, %s)", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// The four API targets, in the table's column order.
const (
	tCRD       = "CRD"
	tSTS       = "StatefulSet"
	tFlockAgg  = "Flock via aggregator"
	tFlockDirs = "Flock direct"
)

var targetOrder = []string{tCRD, tSTS, tFlockAgg, tFlockDirs}

// target is one kind of object behind one endpoint.
type target struct {
	create func(ctx context.Context, ns, name string) error
	get    func(ctx context.Context, ns, name string) error
	// userGet is get as readerUser, a user outside system:masters whom
	// RBAC allows to get every object of the four kinds.
	userGet func(ctx context.Context, ns, name string) error
	list    func(ctx context.Context, ns string) (int, error)
	watch   func(ctx context.Context, ns string) (watch.Interface, error)
}

var crdGVR = schema.GroupVersionResource{Group: "bench.flock.dev", Version: "v1", Resource: "flockalikes"}

func fast(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = clientQPS, 2*clientQPS
	return cfg
}

// benchFlock is a Flock of replicas members whose JSON is about 2 KiB.
func benchFlock(ns, name string, replicas int32, policy flockv1alpha1.PodManagementPolicyType) *flockv1alpha1.Flock {
	labels := map[string]string{"app": name}
	return &flockv1alpha1.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{"bench/pad": strings.Repeat("x", 1500)}},
		Spec: flockv1alpha1.FlockSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: policy,
			Template:            podTemplate(labels),
		},
	}
}

// benchStatefulSet is the StatefulSet of the same shape.
func benchStatefulSet(ns, name string, replicas int32, policy appsv1.PodManagementPolicyType) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{"bench/pad": strings.Repeat("x", 1500)}},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			ServiceName: name, PodManagementPolicy: policy,
			Template: podTemplate(labels),
		},
	}
}

// benchStatefulSetPV is benchStatefulSet with node-local data as a user of
// StatefulSets builds it: a claim "data" per member from the StorageClass
// localClass (node-local PersistentVolumes an admin prepared), mounted at
// /data, and a required pod anti-affinity on kubernetes.io/hostname to the
// StatefulSet's own pods: one member per node, as a Flock places them.
func benchStatefulSetPV(ns, name string, replicas int32, policy appsv1.PodManagementPolicyType) *appsv1.StatefulSet {
	s := benchStatefulSet(ns, name, replicas, policy)
	s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(localClass),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: localVolumeSize}},
		},
	}}
	pod := &s.Spec.Template.Spec
	pod.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: s.Spec.Selector.DeepCopy(),
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	return s
}

func podTemplate(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "infinity"},
		}}},
	}
}

// clientSet is one identity's clients of the four targets.
type clientSet struct {
	kube          kubernetes.Interface
	dyn           dynamic.Interface
	fAgg, fDirect flockclient.Interface
}

// clientsFor returns cfg's clients, the Flock ones both through the
// aggregator and straight at flock-apiserver (flockURL).
func clientsFor(cfg *rest.Config, flockURL string) (clientSet, error) {
	var cs clientSet
	var err error
	direct := rest.CopyConfig(cfg)
	direct.Host = flockURL
	if cs.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return cs, err
	}
	if cs.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return cs, err
	}
	if cs.fAgg, err = flockclient.NewForConfig(cfg); err != nil {
		return cs, err
	}
	cs.fDirect, err = flockclient.NewForConfig(direct)
	return cs, err
}

func newTargets(ctx context.Context, c *cluster.Cluster) (map[string]target, error) {
	agg := fast(c.RESTConfig)
	admin, err := clientsFor(agg, c.FlockAPIServerURL)
	if err != nil {
		return nil, err
	}
	kube, dyn, fAgg, fDirect := admin.kube, admin.dyn, admin.fAgg, admin.fDirect
	if err := installCRD(ctx, agg); err != nil {
		return nil, err
	}
	rAgg, err := readerConfig(ctx, kube, agg)
	if err != nil {
		return nil, err
	}
	reader, err := clientsFor(rAgg, c.FlockAPIServerURL)
	if err != nil {
		return nil, err
	}
	type getFunc = func(ctx context.Context, ns, name string) error
	flockGet := func(fc flockclient.Interface) getFunc {
		return func(ctx context.Context, ns, name string) error {
			_, err := fc.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		}
	}
	crdGet := func(cs clientSet) getFunc {
		return func(ctx context.Context, ns, name string) error {
			_, err := cs.dyn.Resource(crdGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		}
	}
	stsGet := func(cs clientSet) getFunc {
		return func(ctx context.Context, ns, name string) error {
			_, err := cs.kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		}
	}
	flockTarget := func(fc, reader flockclient.Interface) target {
		return target{
			create: func(ctx context.Context, ns, name string) error {
				_, err := fc.FlockV1alpha1().Flocks(ns).Create(ctx, benchFlock(ns, name, 0, ""), metav1.CreateOptions{})
				return err
			},
			get:     flockGet(fc),
			userGet: flockGet(reader),
			list: func(ctx context.Context, ns string) (int, error) {
				l, err := fc.FlockV1alpha1().Flocks(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return 0, err
				}
				return len(l.Items), nil
			},
			watch: func(ctx context.Context, ns string) (watch.Interface, error) {
				return fc.FlockV1alpha1().Flocks(ns).Watch(ctx, metav1.ListOptions{})
			},
		}
	}
	return map[string]target{
		tCRD: {
			create: func(ctx context.Context, ns, name string) error {
				_, err := dyn.Resource(crdGVR).Namespace(ns).Create(ctx, crdObject(ns, name), metav1.CreateOptions{})
				return err
			},
			get:     crdGet(admin),
			userGet: crdGet(reader),
			list: func(ctx context.Context, ns string) (int, error) {
				l, err := dyn.Resource(crdGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return 0, err
				}
				return len(l.Items), nil
			},
			watch: func(ctx context.Context, ns string) (watch.Interface, error) {
				return dyn.Resource(crdGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{})
			},
		},
		tSTS: {
			create: func(ctx context.Context, ns, name string) error {
				_, err := kube.AppsV1().StatefulSets(ns).Create(ctx, benchStatefulSet(ns, name, 0, ""), metav1.CreateOptions{})
				return err
			},
			get:     stsGet(admin),
			userGet: stsGet(reader),
			list: func(ctx context.Context, ns string) (int, error) {
				l, err := kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return 0, err
				}
				return len(l.Items), nil
			},
			watch: func(ctx context.Context, ns string) (watch.Interface, error) {
				return kube.AppsV1().StatefulSets(ns).Watch(ctx, metav1.ListOptions{})
			},
		},
		tFlockAgg:  flockTarget(fAgg, reader.fAgg),
		tFlockDirs: flockTarget(fDirect, reader.fDirect),
	}, nil
}

// crdObject is a Flock's body under the CRD's group and kind.
func crdObject(ns, name string) *unstructured.Unstructured {
	data, _ := json.Marshal(benchFlock(ns, name, 0, ""))
	obj := map[string]any{}
	_ = json.Unmarshal(data, &obj)
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion("bench.flock.dev/v1")
	u.SetKind("Flockalike")
	return u
}

// installCRD installs flockalikes.bench.flock.dev: a Flock's shape (spec
// and status subresource; the schema keeps unknown fields, as Flock's
// validation is in code) and waits until it is served.
func installCRD(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": crdGVR.Resource + "." + crdGVR.Group},
		"spec": map[string]any{
			"group": crdGVR.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": "flockalikes", "singular": "flockalike", "kind": "Flockalike", "listKind": "FlockalikeList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type":       "object",
					"properties": map[string]any{"spec": open, "status": open},
				}},
			}},
		},
	}}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return err
	}
	for range 300 {
		if _, err = dyn.Resource(crdGVR).Namespace("default").List(ctx, metav1.ListOptions{}); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("CRD not served: %w", err)
}

// parallel runs n calls of fn with c workers and returns calls per second.
func parallel(n, c int, fn func(i int) error) (float64, error) {
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// deleteNamespace deletes namespace name and waits (at most 10 minutes)
// until it and its pods are gone.
func deleteNamespace(ctx context.Context, c *cluster.Cluster, name string) error {
	if err := c.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(time.Second) {
		_, err := c.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s not gone after 10 minutes", name)
		}
	}
}

func newNamespace(ctx context.Context, c *cluster.Cluster, name string) error {
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// apiCases measures create, get, LIST and create->watch for each target.
// Creates, gets and LISTs run *apiRuns times, the targets taking turns in
// an order that rotates each run (turns), and a row holds the medians with
// each run's values as its samples: on a shared machine an anchor's rate
// moves twofold from minute to minute, so one pass per target compares
// moments, not targets. create->watch is the median of its *watchN
// samples, one pass per target.
func apiCases(ctx context.Context, c *cluster.Cluster, targets map[string]target) ([]row, error) {
	newRow := func(name, unit string, higher bool) row {
		return row{Case: name, Unit: unit, Higher: higher, Values: map[string]float64{}, Samples: map[string][]float64{}}
	}
	var rows []row
	for _, conc := range []int{1, 16, 64} {
		r := newRow(fmt.Sprintf("create c=%d", conc), "obj/s", true)
		for run := range *apiRuns {
			for _, name := range turns(targetOrder, run) {
				ns := fmt.Sprintf("create-%d-%d-%d", conc, run, slices.Index(targetOrder, name))
				if err := newNamespace(ctx, c, ns); err != nil {
					return nil, err
				}
				t := targets[name]
				settleBefore(ctx, c, r.Case, name)
				v, err := parallel(*createN, conc, func(i int) error { return t.create(ctx, ns, fmt.Sprintf("o-%d", i)) })
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", r.Case, name, err)
				}
				r.Samples[name] = append(r.Samples[name], v)
			}
		}
		rows = append(rows, r.medians())
		fmt.Fprintf(os.Stderr, "bench-e2e: %s done\n", r.Case)
	}

	get := newRow("get c=16", "req/s", true)
	userGet := newRow("get c=16, RBAC user", "req/s", true)
	list := newRow(fmt.Sprintf("LIST %d, p50", *listSize), "ms", false)
	lat := newRow("create->watch, p50", "ms", false)
	listNS := func(name string) string { return fmt.Sprintf("list-%d", slices.Index(targetOrder, name)) }
	for _, name := range targetOrder {
		ns := listNS(name)
		if err := newNamespace(ctx, c, ns); err != nil {
			return nil, err
		}
		if _, err := parallel(*listSize, 16, func(i int) error { return targets[name].create(ctx, ns, fmt.Sprintf("o-%d", i)) }); err != nil {
			return nil, fmt.Errorf("filling %s: %w", name, err)
		}
		// The same gets as a user whom RBAC allows them (the admin's skip
		// flock-apiserver's authorization: system:masters) once RBAC has
		// reached every authorizer's cache.
		if err := retryForbidden(ctx, func() error { return targets[name].userGet(ctx, ns, "o-0") }); err != nil {
			return nil, fmt.Errorf("get as %s %s: %w", readerUser, name, err)
		}
	}
	for run := range *apiRuns {
		for _, name := range turns(targetOrder, run) {
			t, ns := targets[name], listNS(name)
			settleBefore(ctx, c, "get", name)
			v, err := parallel(*getN, 16, func(i int) error { return t.get(ctx, ns, fmt.Sprintf("o-%d", i%*listSize)) })
			if err != nil {
				return nil, fmt.Errorf("get %s: %w", name, err)
			}
			get.Samples[name] = append(get.Samples[name], v)
			v, err = parallel(*getN, 16, func(i int) error { return t.userGet(ctx, ns, fmt.Sprintf("o-%d", i%*listSize)) })
			if err != nil {
				return nil, fmt.Errorf("get as %s %s: %w", readerUser, name, err)
			}
			userGet.Samples[name] = append(userGet.Samples[name], v)
			var times []float64
			for range 5 {
				start := time.Now()
				n, err := t.list(ctx, ns)
				if err != nil || n != *listSize {
					return nil, fmt.Errorf("list %s: %d objects, %v", name, n, err)
				}
				times = append(times, float64(time.Since(start).Microseconds())/1000)
			}
			list.Samples[name] = append(list.Samples[name], median(times))
		}
	}

	for ti, name := range targetOrder {
		t := targets[name]
		wns := fmt.Sprintf("watch-%d", ti)
		if err := newNamespace(ctx, c, wns); err != nil {
			return nil, err
		}
		settleBefore(ctx, c, "create->watch", name)
		w, err := t.watch(ctx, wns)
		if err != nil {
			return nil, err
		}
		var times []float64
		for i := range *watchN {
			obj := fmt.Sprintf("w-%d", i)
			start := time.Now()
			if err := t.create(ctx, wns, obj); err != nil {
				w.Stop()
				return nil, err
			}
			if err := awaitAdded(w, obj); err != nil {
				w.Stop()
				return nil, fmt.Errorf("watch %s: %w", name, err)
			}
			times = append(times, float64(time.Since(start).Microseconds())/1000)
		}
		w.Stop()
		lat.Values[name] = median(times)
	}
	fmt.Fprintln(os.Stderr, "bench-e2e: get, LIST and watch done")
	return append(rows, get.medians(), userGet.medians(), list.medians(), lat), nil
}

// readerUser is the service account the "RBAC user" gets are made as.
const (
	readerNamespace = "bench-reader"
	readerName      = "reader"
	readerUser      = "system:serviceaccount:" + readerNamespace + ":" + readerName
)

// readerConfig makes readerUser (a service account, so outside
// system:masters), lets it get CRD objects, StatefulSets and Flocks in every
// namespace, and returns cfg with its token instead of the admin's
// certificate.
func readerConfig(ctx context.Context, kube kubernetes.Interface, cfg *rest.Config) (*rest.Config, error) {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: readerNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if _, err := kube.CoreV1().ServiceAccounts(readerNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: readerName}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-reader"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{crdGVR.Group}, Resources: []string{crdGVR.Resource}, Verbs: []string{"get"}},
			{APIGroups: []string{appsv1.GroupName}, Resources: []string{"statefulsets"}, Verbs: []string{"get"}},
			{APIGroups: []string{flockv1alpha1.GroupName}, Resources: []string{"flocks"}, Verbs: []string{"get"}},
		},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: readerNamespace, Name: readerName}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	tr, err := kube.CoreV1().ServiceAccounts(readerNamespace).CreateToken(ctx, readerName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(6 * 3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	r := rest.AnonymousClientConfig(cfg)
	r.QPS, r.Burst = cfg.QPS, cfg.Burst
	r.BearerToken = tr.Status.Token
	return r, nil
}

// retryForbidden calls f until it is not refused for a while (RBAC reaches
// the authorizers' caches within seconds), at most 30 s.
func retryForbidden(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil || !(apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func awaitAdded(w watch.Interface, name string) error {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch closed")
			}
			if m, err := metaName(ev.Object); err == nil && ev.Type == watch.Added && m == name {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("no ADDED event for %s in 30s", name)
		}
	}
}

func metaName(obj any) (string, error) {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetName(), nil
	}
	return "", fmt.Errorf("not an object: %T", obj)
}

// profiledServers are the processes -profile profiles in a readiness case.
var profiledServers = []string{"flock-apiserver", "kube-apiserver", "kube-controller-manager"}

// serverURL is where server (flock-apiserver, kube-apiserver or
// kube-controller-manager) serves its /metrics and /debug/pprof.
func serverURL(c *cluster.Cluster, server string) string {
	switch server {
	case "kube-apiserver":
		return c.KubeAPIServerURL
	case "kube-controller-manager":
		return "https://127.0.0.1:" + strconv.Itoa(c.Ports.ControllerManager)
	}
	return c.FlockAPIServerURL
}

// cpuProfiles saves CPU profiles of servers over seconds, taken at once
// straight from each one's /debug/pprof as admin, each to pathOf(server),
// and returns their errors joined.
func cpuProfiles(ctx context.Context, c *cluster.Cluster, servers []string, seconds int, pathOf func(server string) string) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, server := range servers {
		wg.Go(func() {
			errs[i] = savePprof(ctx, c, serverURL(c, server), fmt.Sprintf("profile?seconds=%d", seconds),
				time.Duration(seconds+30)*time.Second, pathOf(server))
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// serverProfilePath is where server's profile goes beside flock-apiserver's
// at path: "flock-apiserver" in its name becomes server, or "-<server>" is
// added before the extension (flock-apiserver's stays path).
func serverProfilePath(path, server string) string {
	dir, base := filepath.Split(path)
	if server == "flock-apiserver" {
		return path
	}
	if strings.Contains(base, "flock-apiserver") {
		return dir + strings.Replace(base, "flock-apiserver", server, 1)
	}
	ext := filepath.Ext(base)
	return dir + strings.TrimSuffix(base, ext) + "-" + server + ext
}

// peakRSS reads each control-plane process's peak resident set (VmHWM).
func peakRSS(c *cluster.Cluster) map[string]float64 {
	return procStatus(c, "VmHWM:")
}

// printTable prints the run's results with ratios against the anchor of
// each table (the CRD for the API; for readiness both StatefulSet kinds).
func printTable(res *results) {
	fmt.Printf("Flock bench-e2e, %s\nMachine: %s\n", res.Started.Format(time.RFC3339), res.Machine)
	fmt.Printf("Client QPS %d (burst %d) for every target; Flock controller and kube-controller-manager both at --kube-api-qps=%d --kube-api-burst=%d.\n\n",
		res.ClientQPS, 2*res.ClientQPS, res.ControllerQPS, 2*res.ControllerQPS)
	if len(res.API) > 0 {
		fmt.Printf("Clients: the StatefulSet's and the Flock's are their generated clientsets, which send and ask for protobuf;\n" +
			"the CRD's is client-go's dynamic client, JSON (custom resources have no protobuf encoding).\n\n")
		if res.APIRuns > 1 {
			fmt.Printf("API cases: medians of %d runs, the targets taking turns; ratio to the CRD (above 1 is better), each run's in brackets\n"+
				"(create->watch: the median of %d samples, one pass).\n\n", res.APIRuns, *watchN)
		}
		fmt.Printf("| | %s |\n|---|---|---|---|---|\n", strings.Join(targetOrder, " | "))
	}
	for _, r := range res.API {
		cells := []string{r.Case + ", " + r.Unit}
		for _, t := range targetOrder {
			cells = append(cells, cell(r, t, tCRD))
		}
		fmt.Printf("| %s |\n", strings.Join(cells, " | "))
	}
	if res.RealNodes > 0 {
		fmt.Printf("On %d real nodes (kubelet with containerd on this machine, no kwok node; only the real-node case ran):\n"+
			"every member pod runs %s (it idles); the Flock node agent (%s, a DaemonSet) prepares Flock members'\n"+
			"directories; StatefulSet+PV volumes are hostPath directories under each node's own data root.\n", res.RealNodes, cluster.TestImage, cluster.NodeAgentImage)
	}
	if len(res.Ready) > 0 && res.RealNodes == 0 {
		if res.KwokNodeAgents {
			fmt.Printf("\nFlock members' data directories: prepared by the node agents, simulated for the kwok nodes (a DaemonSet kwok reports\n" +
				"Ready, and one flock-node-agent process on this machine doing their work, -node-agents).\n")
		} else {
			fmt.Printf("\nFlock members' data directories: prepared by helper pods (kwok runs each 500 ms; -node-agents=false).\n")
		}
	}
	if len(res.Ready) > 0 {
		fmt.Printf("\nMedians of %d runs; ratio = Flock time / anchor time (below 1 is better), each run's ratio in brackets.\n"+
			"StatefulSet: no volumes. StatefulSet+PV: a claim per member from StorageClass %s (WaitForFirstConsumer), bound to one of\n"+
			"the hostPath PersistentVolumes with node affinity made before its timer starts; one member per node (anti-affinity).\n\n"+
			"| create -> | StatefulSet | StatefulSet+PV | Flock (ratio vs StatefulSet) (ratio vs StatefulSet+PV) |\n|---|---|---|---|\n",
			res.ReadyRuns, localClass)
	}
	partial := false
	for _, r := range res.Ready {
		cells := []string{r.Case + ", ms"}
		for _, kind := range readyKinds {
			cells = append(cells, "-")
			if _, ok := r.Values[kind]; ok {
				cells[len(cells)-1] = fmt.Sprintf("%.0f", r.Values[kind])
			}
			if why, ok := r.Unfinished[kind]; ok {
				cells[len(cells)-1] += " (" + why + ")"
			}
		}
		for _, anchor := range []string{tSTS, tSTSPV} {
			cells[len(cells)-1] += " " + readyRatio(r, anchor)
			if _, ok := r.Values[anchor]; !ok {
				partial = true
			}
		}
		fmt.Printf("| %s |\n", strings.Join(cells, " | "))
	}
	if partial {
		fmt.Printf("\n-: not run in that case (the flood case runs %s", strings.Join(floodKinds, " and "))
		if *skipKinds != "" {
			fmt.Printf("; -skip-kinds=%s left out the rest", *skipKinds)
		}
		fmt.Println(").")
	}
	printTimeline(res.Timeline)
	printPVController(res.PVController)
	printPeaks("Peak RSS (MiB)", res.PeakRSSMiB)
	if len(res.PeakRSSAnonMiB) > 0 {
		printPeaks(fmt.Sprintf("Peak anonymous RSS (MiB; RssAnon sampled every %v)", anonSampleEvery), res.PeakRSSAnonMiB)
	}
}

// printPeaks prints one line of each process's peak, by process name.
func printPeaks(title string, peaks map[string]float64) {
	fmt.Printf("\n%s:", title)
	for _, n := range slices.Sorted(maps.Keys(peaks)) {
		fmt.Printf(" %s %.0f;", n, peaks[n])
	}
	fmt.Println()
}

// cell formats a value and, for targets other than the anchor, its ratio
// to the anchor (>1 means better than the anchor) and each run's:
// "113 (0.18×) [0.16 0.18 0.25]" (no brackets with a single run).
func cell(r row, t, anchor string) string {
	v := r.Values[t]
	s := fmt.Sprintf("%.0f", v)
	if v < 100 && !r.Higher {
		s = fmt.Sprintf("%.1f", v)
	}
	if t == anchor || r.Values[anchor] == 0 || v == 0 {
		return s
	}
	s = fmt.Sprintf("%s (%.2f×)", s, betterRatio(r, v, r.Values[anchor]))
	a, xs := r.Samples[anchor], r.Samples[t]
	if len(a) < 2 || len(a) != len(xs) {
		return s
	}
	runs := make([]string, len(a))
	for i := range a {
		runs[i] = "-"
		if a[i] > 0 && xs[i] > 0 {
			runs[i] = fmt.Sprintf("%.2f", betterRatio(r, xs[i], a[i]))
		}
	}
	return s + " [" + strings.Join(runs, " ") + "]"
}

// betterRatio is v against anchor in row r, above 1 when v is better: v /
// anchor for a rate, anchor / v for a time.
func betterRatio(r row, v, anchor float64) float64 {
	if r.Higher {
		return v / anchor
	}
	return anchor / v
}

// readyRatio formats the Flock's ratio to anchor in a readiness row, the
// medians' then each run's: "(0.97) [0.91 1.02 0.97]" (no brackets with a
// single run; "(-)" when the row has no such anchor).
func readyRatio(r row, anchor string) string {
	if r.Values[anchor] == 0 || r.Values[tFlock] == 0 {
		return "(-)"
	}
	s := fmt.Sprintf("(%.2f)", r.Values[tFlock]/r.Values[anchor])
	if runs := runRatios(r, anchor); runs != "" {
		s += " " + runs
	}
	return s
}

// runRatios formats each run's Flock/anchor ratio of a readiness row:
// "[0.91 1.02 0.97]" (empty with a single run).
func runRatios(r row, anchor string) string {
	a, fl := r.Samples[anchor], r.Samples[tFlock]
	if len(a) < 2 || len(a) != len(fl) {
		return ""
	}
	out := make([]string, len(a))
	for i := range a {
		out[i] = fmt.Sprintf("%.2f", fl[i]/a[i])
	}
	return "[" + strings.Join(out, " ") + "]"
}

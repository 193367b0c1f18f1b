// Package server is the command line of flock-apiserver: its options, their
// validation, the server configuration they produce, and running it.
package server

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	flockcontroller "flock.dev/flock/pkg/controller/flock"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/component-base/config/options"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"

	"flock.dev/flock/pkg/admission/plugin/capacity"
	"flock.dev/flock/pkg/admission/plugin/memberdryrun"
	"flock.dev/flock/pkg/admission/plugin/storageclass"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/apiserver"
	"flock.dev/flock/pkg/etcd"
	"flock.dev/flock/pkg/storage/compression"
)

const (
	defaultEtcdPathPrefix = "/registry/flock.dev"
	// defaultEmbeddedEtcdClientPort is the embedded member's loopback client port.
	defaultEmbeddedEtcdClientPort = 2479
	// defaultCompactionInterval is --etcd-compaction-interval's default
	// (k8s.io/apiserver's is 5m).
	defaultCompactionInterval = time.Minute
	// ControllerFlock is the name of the embedded Flock controller in --controllers.
	ControllerFlock = "flock"
)

// Options are everything flock-apiserver can be told on its command line.
type Options struct {
	// RecommendedOptions are the generic API server's: secure serving,
	// delegated authentication and authorization, etcd, audit, features,
	// admission and the core-cluster kubeconfig.
	RecommendedOptions *genericoptions.RecommendedOptions

	// EmbeddedEtcd configures the in-process etcd member used when
	// --etcd-servers is empty.
	EmbeddedEtcd EmbeddedEtcdOptions

	// DataRoot is the host directory under which members' data directories
	// live: <data-root>/<namespace>/<flock>.
	DataRoot string
	// AllowHostAccess lets pod templates use hostNetwork, hostPID, hostIPC and
	// hostPath volumes.
	AllowHostAccess bool
	// ClusterDomain is the DNS domain of the cluster, used in members' FQDNs.
	ClusterDomain string
	// Controllers lists the embedded controllers to run ("*", "-flock").
	Controllers []string
	// Workers is the number of concurrent Flock syncs.
	Workers int
	// MemberParallelism is how many members of one Parallel Flock a sync
	// writes for at once.
	MemberParallelism int
	// NodeAgentGrace is how long a new member directory is left to the
	// node agent of its node before a helper pod prepares it.
	NodeAgentGrace time.Duration
	// KubeAPIQPS and KubeAPIBurst limit the controller's requests to the core cluster.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// LeaderElection makes only one of several replicas run the controller.
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	// HelperImage is the image of the helper pods that prepare and remove
	// members' data directories (it needs sh, chmod, chown and rm).
	HelperImage string
	// HelperNamespace is the namespace helper pods run in: the server's own.
	HelperNamespace string
	// RolloutHaltAfter is how long a new-revision pod may stay not Ready
	// before a rolling update is reported halted.
	RolloutHaltAfter time.Duration
	// StorageCompression is how Flocks are written to etcd: compression.Zstd
	// or compression.None. Values stored either way are read.
	StorageCompression string
	// MemoryLimitRatio is the share of the cgroup's memory limit given to
	// the Go runtime as its soft memory limit (0: none; GOMEMLIMIT wins).
	MemoryLimitRatio float64
	// ControllerKubeconfig is the kubeconfig of the identity that creates
	// member pods: the embedded controller and the admission dry-run of the
	// member pod. Empty: the server's own (--kubeconfig or in-cluster).
	ControllerKubeconfig string
	// StoreGuard refuses to serve Flocks from a store that holds none and
	// was never served while pods or claims of Flocks exist in the cluster
	// (a store that lost its data; pkg/apiserver/storeguard.go).
	StoreGuard bool
	// Standalone serves without any core cluster: no delegated authentication
	// or authorization, no admission, no controller. FOR TESTS ONLY.
	Standalone bool

	Logs *logs.Options

	// embedded is true once Complete found no --etcd-servers.
	embedded bool
}

// EmbeddedEtcdOptions configure the in-process etcd member.
type EmbeddedEtcdOptions struct {
	DataDir    string
	ClientPort int
	PeerPort   int
	// UnsafeNoFsync turns off the member's fsyncs (tests and benchmarks
	// only: a crash of the machine loses acknowledged writes).
	UnsafeNoFsync bool
	// DefragInterval is how often the member checks whether its database
	// file is mostly free space, to defragment it (0: never).
	DefragInterval time.Duration

	// Cluster mode: set by InitialCluster.

	// Name is this member's stable name (a StatefulSet pod's name).
	Name string
	// InitialCluster is "name=https://peer:port,..." over all members.
	InitialCluster string
	// ClientURL is this member's client URL; flock-apiserver stores Flocks
	// through it (client traffic to the local member).
	ClientURL string
	// ClusterClientURLs are all members' client URLs, asked when this member
	// starts without data.
	ClusterClientURLs []string
	// Peer and client TLS files.
	PeerCertFile, PeerKeyFile, PeerTrustedCAFile       string
	ClientCertFile, ClientKeyFile, ClientTrustedCAFile string
	// Token tells this cluster from others during bootstrap.
	Token string
}

// clusterMode reports whether the embedded member is one of a cluster.
func (e *EmbeddedEtcdOptions) clusterMode() bool { return e.InitialCluster != "" }

// NewOptions returns the default options.
func NewOptions() *Options {
	o := &Options{
		RecommendedOptions: genericoptions.NewRecommendedOptions(
			defaultEtcdPathPrefix,
			apiserver.Codecs.LegacyCodec(v1alpha1.SchemeGroupVersion),
		),
		EmbeddedEtcd: EmbeddedEtcdOptions{
			DataDir:    "/var/lib/flock-apiserver/etcd",
			ClientPort: defaultEmbeddedEtcdClientPort,
			PeerPort:   2480,
			Token:      "flock-apiserver",
			// The check is cheap (two sizes read); a defragmentation
			// happens only when the file is mostly free space.
			DefragInterval: etcd.DefaultDefragPolicy.Interval,
		},
		DataRoot:          flockcontroller.DefaultDataRoot,
		ClusterDomain:     flockcontroller.DefaultClusterDomain,
		Controllers:       []string{"*"},
		Workers:           5,
		MemberParallelism: flockcontroller.DefaultMemberParallelism,
		NodeAgentGrace:    flockcontroller.DefaultNodeAgentGrace,
		KubeAPIQPS:        200,
		KubeAPIBurst:      400,
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1Duration(15 * time.Second),
			RenewDeadline:     metav1Duration(10 * time.Second),
			RetryPeriod:       metav1Duration(2 * time.Second),
			ResourceLock:      "leases",
			ResourceName:      "flock-controller",
			ResourceNamespace: "flock-system",
		},
		HelperImage:        flockcontroller.DefaultCleanupImage,
		HelperNamespace:    flockcontroller.DefaultHelperNamespace,
		RolloutHaltAfter:   flockcontroller.DefaultRolloutHaltAfter,
		MemoryLimitRatio:   0.9,
		StorageCompression: compression.Zstd,
		StoreGuard:         true,
		Logs:               logs.NewOptions(),
	}
	capacity.Register(o.RecommendedOptions.Admission.Plugins)
	storageclass.Register(o.RecommendedOptions.Admission.Plugins)
	memberdryrun.Register(o.RecommendedOptions.Admission.Plugins)
	resourcequota.Register(o.RecommendedOptions.Admission.Plugins)
	// The dry-run goes after the Flock's own checks: a Flock refused for
	// its own reasons costs no request to kube-apiserver. ResourceQuota
	// goes last, as in kube-apiserver: it charges the namespace's quotas
	// (count/flocks.flock.dev) for what every other plugin let through.
	// kube-apiserver does not enforce quota on what it proxies to an
	// aggregated server, so without it a tenant could make any number of
	// Flocks past a quota on them.
	o.RecommendedOptions.Admission.RecommendedPluginOrder = append(o.RecommendedOptions.Admission.RecommendedPluginOrder,
		capacity.PluginName, storageclass.PluginName, memberdryrun.PluginName, resourcequota.PluginName)
	// Flocks are stored as protobuf, as kube-apiserver stores the built-in
	// kinds: --storage-media-type picks the encoding (storageCodec).
	o.RecommendedOptions.Etcd.DefaultStorageMediaType = runtime.ContentTypeProtobuf
	o.RecommendedOptions.Etcd.StorageConfig.EncodeVersioner = runtime.NewMultiGroupVersioner(
		v1alpha1.SchemeGroupVersion, schema.GroupKind{Group: v1alpha1.GroupName})
	// Flocks are served from flock-apiserver's own etcd: never from
	// kube-apiserver's, so there is no default etcd address.
	o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList = nil
	// That etcd serves no one else, and watchers are served from the watch
	// cache's own history (75 s), so keeping 5-10 minutes of revisions, as
	// k8s.io/apiserver's default does, only grows the database file, which
	// the embedded member maps whole into the server's resident set until
	// it is defragmented. Every minute keeps 1-2 minutes of them.
	o.RecommendedOptions.Etcd.StorageConfig.CompactionInterval = defaultCompactionInterval
	return o
}

// Flags returns the flags, grouped for --help.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	o.RecommendedOptions.AddFlags(fss.FlagSet("generic"))

	fs := fss.FlagSet("embedded etcd")
	fs.StringVar(&o.EmbeddedEtcd.DataDir, "embedded-etcd-data-dir", o.EmbeddedEtcd.DataDir,
		"Data directory of the embedded etcd member that stores Flocks when --etcd-servers is empty.")
	fs.IntVar(&o.EmbeddedEtcd.ClientPort, "embedded-etcd-client-port", o.EmbeddedEtcd.ClientPort,
		"Loopback port of the embedded etcd member's client endpoint.")
	fs.IntVar(&o.EmbeddedEtcd.PeerPort, "embedded-etcd-peer-port", o.EmbeddedEtcd.PeerPort,
		"Loopback port of the embedded etcd member's peer endpoint.")
	fs.BoolVar(&o.EmbeddedEtcd.UnsafeNoFsync, "embedded-etcd-unsafe-no-fsync", o.EmbeddedEtcd.UnsafeNoFsync,
		"Tests and benchmarks only: the embedded member never fsyncs (as etcd's --unsafe-no-fsync), so a crash of the machine loses acknowledged writes.")
	fs.DurationVar(&o.EmbeddedEtcd.DefragInterval, "embedded-etcd-defrag-interval", o.EmbeddedEtcd.DefragInterval,
		"How often the embedded member checks its database file; when at least 16 MiB and half of the file are free space (revisions compacted away), it is defragmented, which blocks the member for as long as that takes. 0: never.")
	fs.StringVar(&o.EmbeddedEtcd.InitialCluster, "embedded-etcd-initial-cluster", o.EmbeddedEtcd.InitialCluster,
		"Cluster mode: every member as name=https://peer-host:port, comma separated, identical on every replica (an odd number: 1, 3, 5 or 7). Empty: a single member on loopback.")
	fs.StringVar(&o.EmbeddedEtcd.Name, "embedded-etcd-name", o.EmbeddedEtcd.Name,
		"Cluster mode: this member's stable name, one of --embedded-etcd-initial-cluster's (in a StatefulSet, the pod's name).")
	fs.StringVar(&o.EmbeddedEtcd.ClientURL, "embedded-etcd-client-url", o.EmbeddedEtcd.ClientURL,
		"Cluster mode: this member's https client URL. The member listens on its port (on its host if that is an IP address, on every address otherwise) and flock-apiserver stores Flocks through it.")
	fs.StringSliceVar(&o.EmbeddedEtcd.ClusterClientURLs, "embedded-etcd-cluster-client-urls", o.EmbeddedEtcd.ClusterClientURLs,
		"Cluster mode: the https client URLs of all members. A member that starts with an empty data directory asks them whether the cluster runs, and if this member served before, removes and re-adds it.")
	fs.StringVar(&o.EmbeddedEtcd.Token, "embedded-etcd-initial-cluster-token", o.EmbeddedEtcd.Token,
		"Cluster mode: token that tells this cluster from others during bootstrap.")
	for _, f := range []struct {
		p          *string
		name, help string
	}{
		{&o.EmbeddedEtcd.PeerCertFile, "embedded-etcd-peer-cert-file", "certificate the member serves peers with and presents to them (server and client usage)"},
		{&o.EmbeddedEtcd.PeerKeyFile, "embedded-etcd-peer-key-file", "key of --embedded-etcd-peer-cert-file"},
		{&o.EmbeddedEtcd.PeerTrustedCAFile, "embedded-etcd-peer-trusted-ca-file", "CA the peers' certificates must chain to"},
		{&o.EmbeddedEtcd.ClientCertFile, "embedded-etcd-client-cert-file", "certificate the member serves clients with; flock-apiserver also presents it as its client certificate (server and client usage)"},
		{&o.EmbeddedEtcd.ClientKeyFile, "embedded-etcd-client-key-file", "key of --embedded-etcd-client-cert-file"},
		{&o.EmbeddedEtcd.ClientTrustedCAFile, "embedded-etcd-client-trusted-ca-file", "CA the clients' certificates must chain to"},
	} {
		fs.StringVar(f.p, f.name, *f.p, "Cluster mode: PEM file, "+f.help+".")
	}

	fs = fss.FlagSet("flock")
	fs.StringVar(&o.StorageCompression, "storage-compression", o.StorageCompression,
		"How Flocks are written to etcd (embedded or --etcd-servers), before any encryption at rest: zstd (compressed, prefix "+compression.Prefix+") or none (as --storage-media-type encodes them). Flocks stored either way are read, and rewritten the chosen way on their next update.")
	fs.BoolVar(&o.StoreGuard, "store-guard", o.StoreGuard,
		"Refuse to serve Flocks (503, and /readyz fails) while the store holds none and has no mark of ever being served, and pods or claims of Flocks exist in the cluster: a store that lost its data, whose Flocks the garbage collector would take for deleted and whose members it would delete. The refusal ends when Flocks are restored (flock-apiserver restore), the store is accepted empty (flock-apiserver accept-empty-store), or no such pod or claim is left.")
	fs.StringVar(&o.DataRoot, "data-root", o.DataRoot,
		"Host directory under which each member's data directory <data-root>/<namespace>/<flock> is created. Users cannot choose host paths.")
	fs.BoolVar(&o.AllowHostAccess, "allow-host-access", o.AllowHostAccess,
		"Allow pod templates to use hostNetwork, hostPID, hostIPC and hostPath volumes. Off by default: members use the pod network and only their managed data volume.")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain,
		"DNS domain of the cluster, used in members' fully qualified names <pod>.<service>.<namespace>.svc.<cluster-domain>.")
	fs.BoolVar(&o.Standalone, "insecure-standalone-for-tests", o.Standalone,
		"FOR TESTS ONLY, never in a cluster: serve without a core cluster — no delegated authentication or authorization (every request is allowed), no admission, no controller.")

	fs = fss.FlagSet("controller")
	fs.StringSliceVar(&o.Controllers, "controllers", o.Controllers,
		"Embedded controllers to run: '*' runs all, 'foo' enables foo, '-foo' disables foo. Known: flock.")
	fs.StringVar(&o.ControllerKubeconfig, "controller-kubeconfig", o.ControllerKubeconfig,
		"Kubeconfig of the identity that creates member pods in the core cluster: the embedded controller, and the dry-run of each Flock's member pod at admission. Give the controller its own ServiceAccount; empty uses the server's own --kubeconfig (or in-cluster) identity.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Number of Flocks synced concurrently.")
	fs.IntVar(&o.MemberParallelism, "member-parallelism", o.MemberParallelism, "Number of members of one Parallel Flock whose volumes, claims and pods a sync writes at the same time, and of members of any Flock whose pods and data a cleanup under a Delete retention policy deletes at the same time (1: one after another).")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Queries per second of each of the controller's three clients of the core cluster (member pods and Services; members' volumes and claims; helper pods), as kube-controller-manager's applies to each of its controllers.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of each of the controller's three clients of the core cluster.")
	fs.StringVar(&o.HelperImage, "helper-image", o.HelperImage,
		"Image of the short helper pods that prepare a member's data directory (owner and mode) and remove it under the Delete retention policy; it needs sh, chmod, chown and rm. Pin it by digest (image@sha256:...) in production.")
	fs.StringVar(&o.HelperImage, "cleanup-image", o.HelperImage, "Former name of --helper-image.")
	_ = fs.MarkDeprecated("cleanup-image", "use --helper-image")
	fs.DurationVar(&o.NodeAgentGrace, "node-agent-grace", o.NodeAgentGrace,
		"How long a member's new data directory is left to the node agent (flock-node-agent, a DaemonSet in --helper-namespace) when one is Ready on the member's node, counted from the volume's first phase (the agent marks a volume only then, and the member waits for that phase in any case), before a prepare helper pod does the work instead. Without an agent on a node, helper pods prepare directories at once.")
	fs.StringVar(&o.HelperNamespace, "helper-namespace", o.HelperNamespace,
		"Namespace of the helper pods: the server's own, so that no tenant's quota, LimitRange or Pod Security level applies to them and no tenant can fake their result. It must allow hostPath volumes.")
	fs.DurationVar(&o.RolloutHaltAfter, "rollout-halt-after", o.RolloutHaltAfter,
		"How long a pod of a rolling update's new revision may stay not Ready before the rollout is reported halted (condition Progressing=False, reason RolloutHalted).")
	fs.Float64Var(&o.MemoryLimitRatio, "memory-limit-ratio", o.MemoryLimitRatio,
		"Share of the memory limit of the server's cgroup (a container's limit) given to the Go runtime as its soft memory limit, so that the GC collects harder before the cgroup's limit is reached. 0: none. GOMEMLIMIT in the environment wins.")
	options.BindLeaderElectionFlags(&o.LeaderElection, fss.FlagSet("leader election"))

	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))
	return fss
}

// Complete fills in what the flags leave open.
func (o *Options) Complete() error {
	if transport := &o.RecommendedOptions.Etcd.StorageConfig.Transport; len(transport.ServerList) == 0 {
		o.embedded = true
		if e := o.EmbeddedEtcd; e.clusterMode() {
			transport.ServerList = []string{e.ClientURL}
			transport.CertFile, transport.KeyFile, transport.TrustedCAFile = e.ClientCertFile, e.ClientKeyFile, e.ClientTrustedCAFile
		} else {
			transport.ServerList = []string{fmt.Sprintf("http://127.0.0.1:%d", o.EmbeddedEtcd.ClientPort)}
		}
	}
	if o.Standalone {
		o.RecommendedOptions.Authentication = nil
		o.RecommendedOptions.Authorization = nil
		o.RecommendedOptions.CoreAPI = nil
		o.RecommendedOptions.Admission = nil
		// API priority and fairness reads its configuration from the core cluster.
		o.RecommendedOptions.Features.EnablePriorityAndFairness = false
		o.Controllers = []string{"-" + ControllerFlock}
	}
	return nil
}

// Validate checks the options and returns every problem at once.
func (o *Options) Validate() error {
	var errs []error
	errs = append(errs, o.RecommendedOptions.Validate()...)
	if o.MemoryLimitRatio < 0 || o.MemoryLimitRatio > 1 {
		errs = append(errs, fmt.Errorf("--memory-limit-ratio must be between 0 (none) and 1, got %g", o.MemoryLimitRatio))
	}
	if !slices.Contains(compression.Modes, o.StorageCompression) {
		errs = append(errs, fmt.Errorf("--storage-compression must be one of %s, got %q", strings.Join(compression.Modes, ", "), o.StorageCompression))
	}
	if o.embedded {
		if o.EmbeddedEtcd.DataDir == "" {
			errs = append(errs, fmt.Errorf("--embedded-etcd-data-dir is required when --etcd-servers is empty"))
		}
		if o.EmbeddedEtcd.DefragInterval < 0 {
			errs = append(errs, fmt.Errorf("--embedded-etcd-defrag-interval must be 0 (never) or positive, got %s", o.EmbeddedEtcd.DefragInterval))
		}
		if o.EmbeddedEtcd.clusterMode() {
			errs = append(errs, o.EmbeddedEtcd.validateCluster()...)
		} else {
			for name, port := range map[string]int{"--embedded-etcd-client-port": o.EmbeddedEtcd.ClientPort, "--embedded-etcd-peer-port": o.EmbeddedEtcd.PeerPort} {
				if port <= 0 || port > 65535 {
					errs = append(errs, fmt.Errorf("%s must be between 1 and 65535, got %d", name, port))
				}
			}
			if o.EmbeddedEtcd.ClientPort == o.EmbeddedEtcd.PeerPort {
				errs = append(errs, fmt.Errorf("--embedded-etcd-client-port and --embedded-etcd-peer-port must differ, both are %d", o.EmbeddedEtcd.PeerPort))
			}
		}
	} else if o.EmbeddedEtcd.clusterMode() {
		errs = append(errs, fmt.Errorf("--embedded-etcd-initial-cluster and --etcd-servers exclude each other: the embedded cluster is used only without --etcd-servers"))
	}
	// The controller's own rule, checked before anything (the embedded etcd
	// first) starts.
	errs = append(errs, o.controllerOptions().Validate())
	if o.Standalone {
		if ip := o.RecommendedOptions.SecureServing.BindAddress; ip == nil || !ip.IsLoopback() {
			errs = append(errs, fmt.Errorf("--insecure-standalone-for-tests allows every request: it needs --bind-address on loopback (127.0.0.1 or ::1), got %v", ip))
		}
	}
	for _, c := range o.Controllers {
		if name := strings.TrimPrefix(c, "-"); c != "*" && name != ControllerFlock {
			errs = append(errs, fmt.Errorf("--controllers: unknown controller %q (known: %s)", c, ControllerFlock))
		}
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, got %v and %d", o.KubeAPIQPS, o.KubeAPIBurst))
	}
	if o.LeaderElection.LeaderElect {
		le := o.LeaderElection
		if le.LeaseDuration.Duration <= le.RenewDeadline.Duration || le.RenewDeadline.Duration <= le.RetryPeriod.Duration || le.RetryPeriod.Duration <= 0 {
			errs = append(errs, fmt.Errorf("leader election needs lease-duration > renew-deadline > retry-period > 0, got %s, %s, %s",
				le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration))
		}
		if le.ResourceName == "" || le.ResourceNamespace == "" {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-name and --leader-elect-resource-namespace are required with --leader-elect"))
		}
	}
	return utilerrors.NewAggregate(errs)
}

// maxEmbeddedMembers bounds the embedded cluster: every write waits for a
// majority, and each member is a flock-apiserver replica.
const maxEmbeddedMembers = 7

// validateCluster checks the cluster-mode flags of the embedded member.
func (e *EmbeddedEtcdOptions) validateCluster() []error {
	var errs []error
	members, err := etcd.ParseInitialCluster(e.InitialCluster)
	if err != nil {
		return []error{fmt.Errorf("--embedded-etcd-initial-cluster: %w", err)}
	}
	if n := len(members); n%2 == 0 || n > maxEmbeddedMembers {
		errs = append(errs, fmt.Errorf("--embedded-etcd-initial-cluster must list an odd number of members, at most %d (a majority must survive a failure), got %d", maxEmbeddedMembers, n))
	}
	for name, peer := range members {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--embedded-etcd-initial-cluster: member name %q: %s", name, strings.Join(msgs, "; ")))
		}
		if err := httpsURL(peer); err != nil {
			errs = append(errs, fmt.Errorf("--embedded-etcd-initial-cluster: peer URL of %q: %w", name, err))
		}
	}
	if e.Name == "" {
		errs = append(errs, fmt.Errorf("--embedded-etcd-name is required with --embedded-etcd-initial-cluster"))
	} else if _, ok := members[e.Name]; !ok {
		errs = append(errs, fmt.Errorf("--embedded-etcd-name %q is not a member of --embedded-etcd-initial-cluster", e.Name))
	}
	if err := httpsURL(e.ClientURL); err != nil {
		errs = append(errs, fmt.Errorf("--embedded-etcd-client-url: %w", err))
	}
	if len(e.ClusterClientURLs) == 0 {
		errs = append(errs, fmt.Errorf("--embedded-etcd-cluster-client-urls is required with --embedded-etcd-initial-cluster"))
	}
	for _, u := range e.ClusterClientURLs {
		if err := httpsURL(u); err != nil {
			errs = append(errs, fmt.Errorf("--embedded-etcd-cluster-client-urls: %w", err))
		}
	}
	for flag, file := range map[string]string{
		"--embedded-etcd-peer-cert-file": e.PeerCertFile, "--embedded-etcd-peer-key-file": e.PeerKeyFile, "--embedded-etcd-peer-trusted-ca-file": e.PeerTrustedCAFile,
		"--embedded-etcd-client-cert-file": e.ClientCertFile, "--embedded-etcd-client-key-file": e.ClientKeyFile, "--embedded-etcd-client-trusted-ca-file": e.ClientTrustedCAFile,
	} {
		if file == "" {
			errs = append(errs, fmt.Errorf("%s is required with --embedded-etcd-initial-cluster (peer and client traffic use TLS)", flag))
		}
	}
	if e.Token == "" {
		errs = append(errs, fmt.Errorf("--embedded-etcd-initial-cluster-token must not be empty"))
	}
	return errs
}

// httpsURL checks that s is an https URL with a host and a port.
func httpsURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme != "https" || u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("%q must be https://host:port", s)
	}
	return nil
}

// embeddedEtcdConfig is the configuration of the embedded member.
func (o *Options) embeddedEtcdConfig() (etcd.Config, error) {
	e := o.EmbeddedEtcd
	c := etcd.Config{DataDir: e.DataDir, ClientPort: e.ClientPort, PeerPort: e.PeerPort, UnsafeNoFsync: e.UnsafeNoFsync,
		Defrag: etcd.DefragPolicy{Interval: e.DefragInterval, MinFree: etcd.DefaultDefragPolicy.MinFree}}
	if !e.clusterMode() {
		return c, nil
	}
	members, err := etcd.ParseInitialCluster(e.InitialCluster)
	if err != nil {
		return c, fmt.Errorf("--embedded-etcd-initial-cluster: %w", err)
	}
	c.Cluster = &etcd.ClusterConfig{
		Name: e.Name, InitialCluster: members, ClientURL: e.ClientURL, ClusterClientURLs: e.ClusterClientURLs,
		Peer:   etcd.TLSFiles{CertFile: e.PeerCertFile, KeyFile: e.PeerKeyFile, TrustedCAFile: e.PeerTrustedCAFile},
		Client: etcd.TLSFiles{CertFile: e.ClientCertFile, KeyFile: e.ClientKeyFile, TrustedCAFile: e.ClientTrustedCAFile},
		Token:  e.Token,
	}
	return c, nil
}

// ControllerEnabled reports whether --controllers enables the named controller.
func (o *Options) ControllerEnabled(name string) bool {
	if slices.Contains(o.Controllers, "-"+name) {
		return false
	}
	return slices.Contains(o.Controllers, name) || slices.Contains(o.Controllers, "*")
}

// controllerOptions are the embedded controller's options.
func (o *Options) controllerOptions() flockcontroller.Options {
	return flockcontroller.Options{
		ClusterDomain:     o.ClusterDomain,
		DataRoot:          o.DataRoot,
		CleanupImage:      o.HelperImage,
		HelperNamespace:   o.HelperNamespace,
		RolloutHaltAfter:  o.RolloutHaltAfter,
		Workers:           o.Workers,
		MemberParallelism: o.MemberParallelism,
		NodeAgentGrace:    o.NodeAgentGrace,
	}
}

var loopback = []net.IP{net.ParseIP("127.0.0.1")}

func metav1Duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// storageCodec is the codec of Flocks in etcd: written as mediaType (the
// server's --storage-media-type), read in every encoding the server knows,
// so that Flocks written before a change of the flag are still served and
// are rewritten the new way on their next update. k8s.io/apiserver takes the
// flag but leaves the codec to the server.
func storageCodec(mediaType string) (runtime.Codec, error) {
	info, ok := runtime.SerializerInfoForMediaType(apiserver.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		return nil, fmt.Errorf("--storage-media-type %q is not an encoding flock-apiserver can store", mediaType)
	}
	return apiserver.Codecs.CodecForVersions(info.Serializer, apiserver.Codecs.UniversalDeserializer(),
		schema.GroupVersions{v1alpha1.SchemeGroupVersion}, runtime.InternalGroupVersioner), nil
}

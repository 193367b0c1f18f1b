// Package server is the command line of flock-apiserver: its options, their
// validation, the server configuration they produce, and running it.
package server

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	flockcontroller "flock.dev/flock/pkg/controller/flock"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/component-base/config/options"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"

	"flock.dev/flock/pkg/admission/plugin/capacity"
	"flock.dev/flock/pkg/admission/plugin/memberdryrun"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/apiserver"
)

const (
	defaultEtcdPathPrefix = "/registry/flock.dev"
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
	// ControllerKubeconfig is the kubeconfig of the identity that creates
	// member pods: the embedded controller and the admission dry-run of the
	// member pod. Empty: the server's own (--kubeconfig or in-cluster).
	ControllerKubeconfig string
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
}

// NewOptions returns the default options.
func NewOptions() *Options {
	o := &Options{
		RecommendedOptions: genericoptions.NewRecommendedOptions(
			defaultEtcdPathPrefix,
			apiserver.Codecs.LegacyCodec(v1alpha1.SchemeGroupVersion),
		),
		EmbeddedEtcd: EmbeddedEtcdOptions{
			DataDir:    "/var/lib/flock-apiserver/etcd",
			ClientPort: 2479,
			PeerPort:   2480,
		},
		DataRoot:      flockcontroller.DefaultDataRoot,
		ClusterDomain: flockcontroller.DefaultClusterDomain,
		Controllers:   []string{"*"},
		Workers:       5,
		KubeAPIQPS:    20,
		KubeAPIBurst:  30,
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1Duration(15 * time.Second),
			RenewDeadline:     metav1Duration(10 * time.Second),
			RetryPeriod:       metav1Duration(2 * time.Second),
			ResourceLock:      "leases",
			ResourceName:      "flock-controller",
			ResourceNamespace: "flock-system",
		},
		HelperImage:      flockcontroller.DefaultCleanupImage,
		HelperNamespace:  "flock-system",
		RolloutHaltAfter: flockcontroller.DefaultRolloutHaltAfter,
		Logs:             logs.NewOptions(),
	}
	capacity.Register(o.RecommendedOptions.Admission.Plugins)
	memberdryrun.Register(o.RecommendedOptions.Admission.Plugins)
	// The dry-run goes last: a Flock refused for its own reasons costs no
	// request to kube-apiserver.
	o.RecommendedOptions.Admission.RecommendedPluginOrder = append(o.RecommendedOptions.Admission.RecommendedPluginOrder,
		capacity.PluginName, memberdryrun.PluginName)
	o.RecommendedOptions.Etcd.StorageConfig.EncodeVersioner = runtime.NewMultiGroupVersioner(
		v1alpha1.SchemeGroupVersion, schema.GroupKind{Group: v1alpha1.GroupName})
	// Flocks are served from flock-apiserver's own etcd: never from
	// kube-apiserver's, so there is no default etcd address.
	o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList = nil
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

	fs = fss.FlagSet("flock")
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
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Queries per second of the controller's client of the core cluster.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of the controller's client of the core cluster.")
	fs.StringVar(&o.HelperImage, "helper-image", o.HelperImage,
		"Image of the short helper pods that prepare a member's data directory (owner and mode) and remove it under the Delete retention policy; it needs sh, chmod, chown and rm. Pin it by digest (image@sha256:...) in production.")
	fs.StringVar(&o.HelperImage, "cleanup-image", o.HelperImage, "Former name of --helper-image.")
	_ = fs.MarkDeprecated("cleanup-image", "use --helper-image")
	fs.StringVar(&o.HelperNamespace, "helper-namespace", o.HelperNamespace,
		"Namespace of the helper pods: the server's own, so that no tenant's quota, LimitRange or Pod Security level applies to them and no tenant can fake their result. It must allow hostPath volumes.")
	fs.DurationVar(&o.RolloutHaltAfter, "rollout-halt-after", o.RolloutHaltAfter,
		"How long a pod of a rolling update's new revision may stay not Ready before the rollout is reported halted (condition Progressing=False, reason RolloutHalted).")
	options.BindLeaderElectionFlags(&o.LeaderElection, fss.FlagSet("leader election"))

	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))
	return fss
}

// Complete fills in what the flags leave open.
func (o *Options) Complete() error {
	if len(o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList) == 0 {
		o.embedded = true
		o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList = []string{
			fmt.Sprintf("http://127.0.0.1:%d", o.EmbeddedEtcd.ClientPort)}
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
	if o.embedded {
		if o.EmbeddedEtcd.DataDir == "" {
			errs = append(errs, fmt.Errorf("--embedded-etcd-data-dir is required when --etcd-servers is empty"))
		}
		for name, port := range map[string]int{"--embedded-etcd-client-port": o.EmbeddedEtcd.ClientPort, "--embedded-etcd-peer-port": o.EmbeddedEtcd.PeerPort} {
			if port <= 0 || port > 65535 {
				errs = append(errs, fmt.Errorf("%s must be between 1 and 65535, got %d", name, port))
			}
		}
		if o.EmbeddedEtcd.ClientPort == o.EmbeddedEtcd.PeerPort {
			errs = append(errs, fmt.Errorf("--embedded-etcd-client-port and --embedded-etcd-peer-port must differ, both are %d", o.EmbeddedEtcd.PeerPort))
		}
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
	if msgs := validation.IsDNS1123Label(o.HelperNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--helper-namespace %q: %s", o.HelperNamespace, strings.Join(msgs, "; ")))
	}
	return utilerrors.NewAggregate(errs)
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
		ClusterDomain:    o.ClusterDomain,
		DataRoot:         o.DataRoot,
		CleanupImage:     o.HelperImage,
		RolloutHaltAfter: o.RolloutHaltAfter,
		Workers:          o.Workers,
	}
}

var loopback = []net.IP{net.ParseIP("127.0.0.1")}

func metav1Duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

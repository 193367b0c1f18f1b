package server

import (
	"context"
	"fmt"
	"time"

	"flock.dev/flock/internal/memlimit"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	// The controller's requests to kube-apiserver in /metrics
	// (rest_client_*: by code and verb, latency, rate limiter wait).
	_ "k8s.io/component-base/metrics/prometheus/restclient"
	"k8s.io/component-base/term"
	"k8s.io/klog/v2"

	"k8s.io/apiserver/pkg/admission"

	"flock.dev/flock/pkg/admission/flockinitializer"
	"flock.dev/flock/pkg/apis/flock/validation"
	"flock.dev/flock/pkg/apiserver"
	"flock.dev/flock/pkg/etcd"
	"flock.dev/flock/pkg/generated/clientset/versioned"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
	generatedopenapi "flock.dev/flock/pkg/generated/openapi"
	flockregistry "flock.dev/flock/pkg/registry/flock"
	"flock.dev/flock/pkg/storage/compression"
)

// NewCommand returns the flock-apiserver command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "flock-apiserver",
		Short: "Serve the flock.dev API: Flocks whose member i always runs on node i",
		Long: `flock-apiserver is an aggregated API server that serves Flocks (flock.dev/v1alpha1).

A Flock is a set of stateful members where member i always runs on node i, with a
stable DNS name (A and PTR records through a headless Service) and a data directory
on that node. Flocks are stored in flock-apiserver's own etcd: an embedded member by
default, an external cluster with --etcd-servers. The server refuses a Flock whose
replicas exceed the eligible nodes, and its embedded controller creates the members.

Subcommands: "flock-apiserver backup" writes the Flocks stored in the server's etcd to a
file, UIDs included, and "flock-apiserver restore" puts them back (each has --help).`,
		SilenceUsage: true,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("flock-apiserver takes no arguments, got %q", args)
			}
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(c.Context())
		},
	}
	cmd.SetContext(ctx)
	fss := o.Flags()
	globalflag.AddGlobalFlags(fss.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	for _, f := range fss.FlagSets {
		cmd.Flags().AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, fss, cols)
	cmd.AddCommand(newBackupCommand(), newRestoreCommand(), newAcceptEmptyStoreCommand())
	return cmd
}

// Config turns the options into the server's configuration.
func (o *Options) Config() (*apiserver.Config, error) {
	if err := o.RecommendedOptions.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, loopback); err != nil {
		return nil, fmt.Errorf("creating self-signed certificates: %w", err)
	}
	cfg := genericapiserver.NewRecommendedConfig(apiserver.Codecs)
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	cfg.FeatureGate = utilfeature.DefaultFeatureGate

	namer := openapi.NewDefinitionNamer(apiserver.Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title = "Flock"
	cfg.OpenAPIConfig.Info.Version = "v1alpha1"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title = "Flock"
	cfg.OpenAPIV3Config.Info.Version = "v1alpha1"

	var (
		flockInformers   flockinformers.SharedInformerFactory
		controllerConfig *rest.Config
		cachedFlocks     = flockregistry.NewCachedVersions()
	)
	o.RecommendedOptions.ExtraAdmissionInitializers = func(c *genericapiserver.RecommendedConfig) ([]admission.PluginInitializer, error) {
		client, err := versioned.NewForConfig(c.LoopbackClientConfig)
		if err != nil {
			return nil, err
		}
		flockInformers = newFlockInformers(client, cachedFlocks)
		if controllerConfig, err = o.controllerClientConfig(c.ClientConfig); err != nil {
			return nil, err
		}
		memberPods, err := memberPodClient(controllerConfig)
		if err != nil {
			return nil, err
		}
		return []admission.PluginInitializer{flockinitializer.New(c.SharedInformerFactory, flockInformers).WithMemberPodClient(memberPods)}, nil
	}
	codec, err := storageCodec(o.RecommendedOptions.Etcd.DefaultStorageMediaType)
	if err != nil {
		return nil, err
	}
	o.RecommendedOptions.Etcd.StorageConfig.Codec = codec
	if err := o.RecommendedOptions.ApplyTo(cfg); err != nil {
		return nil, err
	}
	cfg.Authorization.Authorizer = apiserver.AllNamesFirst(cfg.Authorization.Authorizer)
	cfg.RESTOptionsGetter = compression.Getter(cfg.RESTOptionsGetter, o.StorageCompression == compression.Zstd)
	if controllerConfig == nil && cfg.ClientConfig != nil {
		var err error
		if controllerConfig, err = o.controllerClientConfig(cfg.ClientConfig); err != nil {
			return nil, err
		}
	}
	if flockInformers == nil {
		// No admission (standalone): the controller, if any, still needs Flock informers.
		client, err := versioned.NewForConfig(cfg.LoopbackClientConfig)
		if err != nil {
			return nil, err
		}
		flockInformers = newFlockInformers(client, cachedFlocks)
	}
	return &apiserver.Config{
		GenericConfig: cfg,
		ExtraConfig: apiserver.ExtraConfig{
			Validation:             validation.Options{AllowHostAccess: o.AllowHostAccess},
			FlockInformers:         flockInformers,
			CachedFlocks:           cachedFlocks,
			ControllerClientConfig: controllerConfig,
			Controller: apiserver.ControllerConfig{
				Enabled:        o.ControllerEnabled(ControllerFlock),
				Options:        o.controllerOptions(),
				QPS:            o.KubeAPIQPS,
				Burst:          o.KubeAPIBurst,
				LeaderElection: o.LeaderElection,
			},
		},
	}, nil
}

// controllerClientConfig returns the configuration of the identity that
// creates member pods: --controller-kubeconfig, else server (the server's own
// core-cluster configuration, nil when standalone).
func (o *Options) controllerClientConfig(server *rest.Config) (*rest.Config, error) {
	if o.ControllerKubeconfig == "" {
		return server, nil
	}
	c, err := clientcmd.BuildConfigFromFlags("", o.ControllerKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--controller-kubeconfig: %w", err)
	}
	return c, nil
}

// memberPodClient returns the client admission dry-runs member pods with
// (nil when there is no core cluster). Its rate limit is its own, apart from
// the controller's, and high: each dry-run serves one Flock write that
// flock-apiserver's own request limits have already admitted, and
// kube-apiserver's priority and fairness bounds the identity's share, so a
// low client-side limit only made Flock creates wait (at 50/s it capped
// them at 50/s, under the CRD's rate on the same control plane).
// memberDryRunQPS is the member dry-run client's rate limit (burst twice that).
const memberDryRunQPS = 1000

func memberPodClient(controller *rest.Config) (kubernetes.Interface, error) {
	if controller == nil {
		return nil, nil
	}
	c := rest.CopyConfig(controller)
	c.UserAgent = "flock-apiserver/member-dry-run"
	c.DisableCompression = true // as the controller's clients (pkg/apiserver)
	c.QPS, c.Burst = memberDryRunQPS, 2*memberDryRunQPS
	// Warnings go back to the Flock's client, not to the server's log.
	c.WarningHandler = rest.NoWarnings{}
	return kubernetes.NewForConfig(c)
}

// Run starts the embedded etcd member (unless --etcd-servers is set), then
// serves until ctx is done, then stops etcd. A failure of the running member
// fails /livez and stops the server; Run then returns the member's error.
func (o *Options) Run(ctx context.Context) error {
	if err := logsapi.ValidateAndApply(o.Logs, nil); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	if soft, cgroup, err := memlimit.Set(o.MemoryLimitRatio); err != nil {
		logger.Info("No soft memory limit from the cgroup", "err", err)
	} else if soft > 0 {
		logger.Info("Soft memory limit set from the cgroup's", "softLimitBytes", soft, "cgroupLimitBytes", cgroup, "ratio", o.MemoryLimitRatio)
	}
	var member *etcd.Server
	if o.embedded {
		c, err := o.embeddedEtcdConfig()
		if err != nil {
			return err
		}
		if member, err = etcd.Start(ctx, c); err != nil {
			return err
		}
		defer func() {
			logger.Info("Stopping embedded etcd")
			member.Stop()
		}()
	} else {
		logger.Info("Using external etcd", "servers", o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList)
	}

	config, err := o.Config()
	if err != nil {
		return err
	}
	guard, closeGuard, err := o.storeGuard(config.ExtraConfig.ControllerClientConfig)
	if err != nil {
		return err
	}
	defer closeGuard()
	config.ExtraConfig.StoreGuard = guard
	server, err := config.Complete().New()
	if err != nil {
		return err
	}
	if guard != nil {
		// Decided before the server listens, so that a store that may be
		// served is never refused for a moment (its own informers would
		// back off); a refusal is looked at again every few seconds.
		checkCtx, cancel := context.WithTimeout(ctx, storeGuardFirstCheck)
		guard.Step(checkCtx)
		cancel()
	}
	if member == nil {
		return server.GenericAPIServer.PrepareRun().RunWithContext(ctx)
	}
	// A failure of the embedded member shows on /livez and stops the server:
	// flock-apiserver exits with the member's error.
	if err := server.GenericAPIServer.AddLivezChecks(0, member.LivezCheck()); err != nil {
		return err
	}
	// A member without quorum cannot write: /readyz fails, and a load
	// balancer sends requests to a replica that can.
	if err := server.GenericAPIServer.AddReadyzChecks(member.ReadyzCheck()); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-member.Failed():
			logger.Error(member.Err(), "Embedded etcd failed; shutting down")
			cancel(member.Err())
		case <-ctx.Done():
		}
	}()
	if err := server.GenericAPIServer.PrepareRun().RunWithContext(ctx); err != nil {
		return err
	}
	return member.Err()
}

// storeGuardFirstCheck bounds the store guard's check before the server
// listens.
const storeGuardFirstCheck = 15 * time.Second

// storeGuard returns the store guard (nil with --store-guard=false), which
// looks for members' pods and claims as the controller's identity, and a
// func that closes its etcd client.
func (o *Options) storeGuard(controller *rest.Config) (*apiserver.StoreGuard, func(), error) {
	if !o.StoreGuard {
		return nil, func() {}, nil
	}
	var core kubernetes.Interface
	if controller != nil {
		c := rest.CopyConfig(controller)
		c.UserAgent = "flock-apiserver/store-guard"
		var err error
		if core, err = kubernetes.NewForConfig(c); err != nil {
			return nil, nil, err
		}
	}
	storage := o.RecommendedOptions.Etcd.StorageConfig
	client, err := (&etcdClientOptions{
		servers: storage.Transport.ServerList,
		caFile:  storage.Transport.TrustedCAFile, certFile: storage.Transport.CertFile, keyFile: storage.Transport.KeyFile,
	}).client()
	if err != nil {
		return nil, nil, fmt.Errorf("the store guard's etcd client: %w", err)
	}
	return apiserver.NewStoreGuard(client, storage.Prefix, core), func() { _ = client.Close() }, nil
}

// newFlockInformers returns the informer factory on flock-apiserver itself
// (shared by admission and the controller); its Flocks hold no
// managedFields, and are the watch cache's objects where cached holds the
// same version (flockregistry.CachedVersions).
func newFlockInformers(client versioned.Interface, cached *flockregistry.CachedVersions) flockinformers.SharedInformerFactory {
	flockregistry.RegisterMetrics()
	return flockinformers.NewSharedInformerFactoryWithOptions(client, 0, flockinformers.WithTransform(cached.Transform))
}

// Package apiserver assembles flock-apiserver: the scheme, the flock.dev API
// group, the informers on the core cluster and the embedded controller.
package apiserver

import (
	"context"
	"net/http"

	coreinformers "k8s.io/client-go/informers/core/v1"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/managedfields"
	apirest "k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/rest"

	"flock.dev/flock/pkg/admission/plugin/capacity"
	"flock.dev/flock/pkg/admission/plugin/storageclass"
	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/install"
	"flock.dev/flock/pkg/apis/flock/validation"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
	flockregistry "flock.dev/flock/pkg/registry/flock"
)

var (
	// Scheme knows every type flock-apiserver serves.
	Scheme = runtime.NewScheme()
	// Codecs encodes and decodes the types of Scheme.
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	install.Install(Scheme)
	// The scale subresource serves autoscaling/v1 Scale. There is no internal
	// autoscaling type here, so the versioned type is also the hub type.
	Scheme.AddKnownTypes(autoscalingv1.SchemeGroupVersion, &autoscalingv1.Scale{})
	Scheme.AddKnownTypes(schema.GroupVersion{Group: autoscalingv1.GroupName, Version: runtime.APIVersionInternal}, &autoscalingv1.Scale{})
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	Scheme.AddUnversionedTypes(schema.GroupVersion{Group: "", Version: "v1"},
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)
}

// ExtraConfig is the configuration of flock-apiserver beyond the generic server.
type ExtraConfig struct {
	// Validation carries the server flags that validation depends on.
	Validation validation.Options
	// FlockInformers are informers on flock-apiserver itself (through the
	// loopback client), shared by admission and the controller.
	FlockInformers flockinformers.SharedInformerFactory
	// CachedFlocks records the watch cache's object of each Flock, which
	// FlockInformers' Flock informer holds instead of a copy of its own
	// (its transform is CachedFlocks.Transform); nil: not recorded.
	CachedFlocks *flockregistry.CachedVersions
	// ControllerClientConfig reaches the core cluster as the controller, the
	// identity that creates member pods (nil when standalone).
	ControllerClientConfig *rest.Config
	// Controller configures the embedded Flock controller.
	Controller ControllerConfig
	// StoreGuard, when set, keeps Flocks from being served from a store
	// that lost them while their members run (storeguard.go).
	StoreGuard *StoreGuard
}

// Config is the whole configuration of flock-apiserver.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	ExtraConfig   ExtraConfig
}

type completedConfig struct {
	GenericConfig genericapiserver.CompletedConfig
	ExtraConfig   *ExtraConfig
}

// CompletedConfig is a Config with its defaults filled in.
type CompletedConfig struct {
	*completedConfig
}

// FlockServer is a running flock-apiserver.
type FlockServer struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

// Complete fills in the defaults of a Config.
func (c *Config) Complete() CompletedConfig {
	return CompletedConfig{&completedConfig{c.GenericConfig.Complete(), &c.ExtraConfig}}
}

// New builds the server and installs the flock.dev group.
func (c completedConfig) New() (*FlockServer, error) {
	applyCheck := &applySchemaCheck{maxBody: c.GenericConfig.MaxRequestBodyBytes}
	chain := c.GenericConfig.BuildHandlerChainFunc
	guard := c.ExtraConfig.StoreGuard
	c.GenericConfig.BuildHandlerChainFunc = func(h http.Handler, gc *genericapiserver.Config) http.Handler {
		h = applyCheck.wrap(h)
		if guard != nil {
			h = guard.Wrap(h)
		}
		return chain(h, gc)
	}
	generic, err := c.GenericConfig.New("flock-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	s := &FlockServer{GenericAPIServer: generic}

	storage, err := flockregistry.NewStorage(Scheme, c.GenericConfig.RESTOptionsGetter, c.ExtraConfig.Validation, c.ExtraConfig.CachedFlocks)
	if err != nil {
		return nil, err
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(flock.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	group.NegotiatedSerializer = Codecs
	group.VersionedResourcesStorageMap["v1alpha1"] = map[string]apirest.Storage{
		"flocks":        storage.Flock,
		"flocks/status": storage.Status,
		"flocks/scale":  storage.Scale,
		"flocks/move":   storage.Move,
	}
	if err := generic.InstallAPIGroup(&group); err != nil {
		return nil, err
	}
	// The patch handler's type converter is made from this spec.
	tc, err := managedfields.NewTypeConverter(group.StaticOpenAPISpec, false)
	if err != nil {
		return nil, err
	}
	applyCheck.set(tc)

	if rh := c.GenericConfig.Authentication.RequestHeaderConfig; rh != nil && rh.CAContentProvider != nil {
		if err := generic.AddReadyzChecks(requestHeaderCAReadyz(rh.CAContentProvider)); err != nil {
			return nil, err
		}
	}

	if guard != nil {
		if err := generic.AddReadyzChecks(guard.ReadyzCheck()); err != nil {
			return nil, err
		}
		generic.AddPostStartHookOrDie("flock-store-guard", func(ctx genericapiserver.PostStartHookContext) error {
			go guard.Run(ctx)
			return nil
		})
	}

	core := c.GenericConfig.SharedInformerFactory
	flocks := c.ExtraConfig.FlockInformers
	if flocks != nil {
		if core != nil {
			// Admission reads Nodes, StorageClasses and Flocks from these informers.
			if err := generic.AddReadyzChecks(capacity.ReadyzCheck(core, flocks), storageclass.ReadyzCheck(core)); err != nil {
				return nil, err
			}
		}
		generic.AddPostStartHookOrDie("start-flock-informers", func(ctx genericapiserver.PostStartHookContext) error {
			flocks.Start(ctx.Done())
			return nil
		})
	}
	if c.ExtraConfig.Controller.Enabled {
		ctx := context.Background()
		var (
			nodes      coreinformers.NodeInformer
			namespaces coreinformers.NamespaceInformer
		)
		if core != nil {
			nodes, namespaces = core.Core().V1().Nodes(), core.Core().V1().Namespaces()
		}
		ec, err := newEmbeddedController(ctx, c.ExtraConfig.Controller, c.ExtraConfig.ControllerClientConfig,
			c.GenericConfig.LoopbackClientConfig, flocks, nodes, namespaces)
		if err != nil {
			return nil, err
		}
		if err := generic.AddReadyzChecks(ec.readyz()); err != nil {
			return nil, err
		}
		generic.AddPostStartHookOrDie("start-flock-controller", func(ctx genericapiserver.PostStartHookContext) error {
			// The controller added Flock informers after the hook above
			// may have started the factory: start the new ones. Its own
			// informers on the core cluster start with it.
			flocks.Start(ctx.Done())
			return ec.start(ctx)
		})
	}
	return s, nil
}

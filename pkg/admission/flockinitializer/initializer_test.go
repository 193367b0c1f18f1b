package flockinitializer_test

import (
	"context"
	"testing"

	"k8s.io/apiserver/pkg/admission"
	genericinitializer "k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"flock.dev/flock/pkg/admission/flockinitializer"
	flockfake "flock.dev/flock/pkg/generated/clientset/versioned/fake"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
)

type wantsBoth struct {
	kube   kubeinformers.SharedInformerFactory
	flocks flockinformers.SharedInformerFactory
}

func (w *wantsBoth) SetKubeInformerFactory(f kubeinformers.SharedInformerFactory)   { w.kube = f }
func (w *wantsBoth) SetFlockInformerFactory(f flockinformers.SharedInformerFactory) { w.flocks = f }
func (w *wantsBoth) ValidateInitialization() error                                  { return nil }
func (w *wantsBoth) Handles(admission.Operation) bool                               { return false }
func (w *wantsBoth) Validate(context.Context, admission.Attributes, admission.ObjectInterfaces) error {
	return nil
}

var (
	_ flockinitializer.WantsKubeInformerFactory  = &wantsBoth{}
	_ flockinitializer.WantsFlockInformerFactory = &wantsBoth{}
)

type wantsNothing struct{}

func (wantsNothing) Handles(admission.Operation) bool { return false }

func TestInitialize(t *testing.T) {
	kube := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	flocks := flockinformers.NewSharedInformerFactory(flockfake.NewClientset(), 0)

	p := &wantsBoth{}
	flockinitializer.New(kube, flocks).Initialize(p)
	if p.kube != kube || p.flocks != flocks {
		t.Errorf("plugin got kube=%v flocks=%v, want the factories given to New", p.kube, p.flocks)
	}

	// A nil factory is not handed out, so the plugin can tell it is missing.
	p = &wantsBoth{}
	flockinitializer.New(kube, nil).Initialize(p)
	if p.kube != kube || p.flocks != nil {
		t.Errorf("plugin got kube=%v flocks=%v, want only kube", p.kube, p.flocks)
	}

	// Plugins that want nothing are left alone.
	flockinitializer.New(kube, flocks).Initialize(wantsNothing{})
}

// TestResourceQuotaIsConfigured: k8s.io/apiserver's ResourceQuota plugin,
// initialized as flock-apiserver initializes its plugins (the generic
// initializer, then this one), has everything it needs: its client, informer
// and drained notification from the generic one, its quota configuration
// from this one. Without that configuration it refuses to start.
func TestResourceQuotaIsConfigured(t *testing.T) {
	client := kubefake.NewClientset()
	kube := kubeinformers.NewSharedInformerFactory(client, 0)
	plugins := admission.NewPlugins()
	resourcequota.Register(plugins)
	generic := genericinitializer.New(client, nil, kube, nil, nil, nil, t.Context().Done(), nil)
	if _, err := plugins.InitPlugin(resourcequota.PluginName, nil, admission.PluginInitializers{generic}); err == nil {
		t.Fatal("ResourceQuota started without a quota configuration")
	}
	if _, err := plugins.InitPlugin(resourcequota.PluginName, nil, admission.PluginInitializers{generic, flockinitializer.New(kube, nil)}); err != nil {
		t.Fatalf("ResourceQuota: %v", err)
	}
}

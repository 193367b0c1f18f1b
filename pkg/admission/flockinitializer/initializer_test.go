package flockinitializer_test

import (
	"context"
	"testing"

	"k8s.io/apiserver/pkg/admission"
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

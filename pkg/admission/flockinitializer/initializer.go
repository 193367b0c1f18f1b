// Package flockinitializer hands flock-apiserver's admission plugins the
// informer factories they read from: the core cluster's (nodes) and the Flock
// API's own (flocks, through the loopback client).
package flockinitializer

import (
	"k8s.io/apiserver/pkg/admission"
	kubeinformers "k8s.io/client-go/informers"

	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
)

// WantsKubeInformerFactory is implemented by plugins that read objects of the
// core cluster, such as Nodes, from shared informers.
type WantsKubeInformerFactory interface {
	SetKubeInformerFactory(kubeinformers.SharedInformerFactory)
	admission.InitializationValidator
}

// WantsFlockInformerFactory is implemented by plugins that read Flocks from
// shared informers.
type WantsFlockInformerFactory interface {
	SetFlockInformerFactory(flockinformers.SharedInformerFactory)
	admission.InitializationValidator
}

// Initializer hands informer factories to the plugins that want them. The
// plugins register their informers with the factories while being
// initialized, so the factories must be started afterwards (from a post-start
// hook).
type Initializer struct {
	kube   kubeinformers.SharedInformerFactory
	flocks flockinformers.SharedInformerFactory
}

var _ admission.PluginInitializer = &Initializer{}

// New returns an Initializer handing out kube (the core cluster's informers)
// and flocks (the Flock API's informers). A nil factory is not handed out;
// the plugin's ValidateInitialization then reports what it misses.
func New(kube kubeinformers.SharedInformerFactory, flocks flockinformers.SharedInformerFactory) *Initializer {
	return &Initializer{kube: kube, flocks: flocks}
}

// Initialize gives plugin the factories it wants.
func (i *Initializer) Initialize(plugin admission.Interface) {
	if wants, ok := plugin.(WantsKubeInformerFactory); ok && i.kube != nil {
		wants.SetKubeInformerFactory(i.kube)
	}
	if wants, ok := plugin.(WantsFlockInformerFactory); ok && i.flocks != nil {
		wants.SetFlockInformerFactory(i.flocks)
	}
}

// Package flockinitializer hands flock-apiserver's admission plugins the
// informer factories they read from: the core cluster's (nodes) and the Flock
// API's own (flocks, through the loopback client); and the client of the
// identity that creates member pods; and ResourceQuota's quota
// configuration.
package flockinitializer

import (
	"k8s.io/apiserver/pkg/admission"
	genericinitializer "k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

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

// WantsMemberPodClient is implemented by plugins that act on the core
// cluster as the identity that creates member pods (the controller's).
type WantsMemberPodClient interface {
	SetMemberPodClient(kubernetes.Interface)
	admission.InitializationValidator
}

// Initializer hands informer factories to the plugins that want them. The
// plugins register their informers with the factories while being
// initialized, so the factories must be started afterwards (from a post-start
// hook).
type Initializer struct {
	kube       kubeinformers.SharedInformerFactory
	flocks     flockinformers.SharedInformerFactory
	memberPods kubernetes.Interface
}

var _ admission.PluginInitializer = &Initializer{}

// New returns an Initializer handing out kube (the core cluster's informers)
// and flocks (the Flock API's informers). A nil factory is not handed out;
// the plugin's ValidateInitialization then reports what it misses.
func New(kube kubeinformers.SharedInformerFactory, flocks flockinformers.SharedInformerFactory) *Initializer {
	return &Initializer{kube: kube, flocks: flocks}
}

// WithMemberPodClient also hands out memberPods, the client of the identity
// that creates member pods. A nil client is not handed out.
func (i *Initializer) WithMemberPodClient(memberPods kubernetes.Interface) *Initializer {
	i.memberPods = memberPods
	return i
}

// Initialize gives plugin the factories it wants.
func (i *Initializer) Initialize(plugin admission.Interface) {
	if wants, ok := plugin.(WantsKubeInformerFactory); ok && i.kube != nil {
		wants.SetKubeInformerFactory(i.kube)
	}
	if wants, ok := plugin.(WantsFlockInformerFactory); ok && i.flocks != nil {
		wants.SetFlockInformerFactory(i.flocks)
	}
	if wants, ok := plugin.(WantsMemberPodClient); ok && i.memberPods != nil {
		wants.SetMemberPodClient(i.memberPods)
	}
	if wants, ok := plugin.(genericinitializer.WantsQuotaConfiguration); ok {
		// No evaluator of its own: ResourceQuota admission counts an
		// object of any resource it has no evaluator for, which is what
		// count/flocks.flock.dev asks for.
		wants.SetQuotaConfiguration(generic.NewConfiguration(nil, nil))
	}
}

// Package capacity is the FlockCapacity admission plugin: it refuses a Flock
// that the cluster cannot hold, on create, on every update that raises what
// the Flock asks of the nodes, and on the scale subresource. The rule itself
// is pkg/placement's, the one the controller places members with, so what
// this plugin accepts the controller can place.
//
// The plugin reads Nodes (core cluster) and Flocks (this API) from shared
// informers; it never lists anything per request. It keeps the nodes in a
// placement.NodeIndex, so a check costs microseconds at thousands of nodes.
package capacity

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/warning"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/admission/admissionerrors"
	"flock.dev/flock/pkg/admission/flockinitializer"
	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
	flocklisters "flock.dev/flock/pkg/generated/listers/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

// cacheMissWait bounds how long a scale request waits for a Flock that is
// not yet in the informer's cache.
const cacheMissWait = 3 * time.Second

// PluginName is the name of the plugin in --enable-admission-plugins and
// RecommendedOptions.Admission.
const PluginName = "FlockCapacity"

// Register registers the plugin.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return New(), nil
	})
}

// Plugin refuses Flocks whose replicas exceed the eligible nodes.
type Plugin struct {
	*admission.Handler

	nodes        *placement.NodeIndex
	flocks       flocklisters.FlockLister
	nodesSynced  cache.InformerSynced
	flocksSynced cache.InformerSynced
}

var (
	_ admission.ValidationInterface              = &Plugin{}
	_ admission.InitializationValidator          = &Plugin{}
	_ flockinitializer.WantsKubeInformerFactory  = &Plugin{}
	_ flockinitializer.WantsFlockInformerFactory = &Plugin{}
)

// New returns the plugin, handling Create and Update. It needs both informer
// factories (see flockinitializer) before it can serve.
func New() *Plugin {
	p := &Plugin{Handler: admission.NewHandler(admission.Create, admission.Update)}
	p.SetReadyFunc(p.HasSynced)
	return p
}

// SetKubeInformerFactory takes the Node lister from the core cluster's
// informers (and registers the Node informer with the factory).
func (p *Plugin) SetKubeInformerFactory(f kubeinformers.SharedInformerFactory) {
	nodes := f.Core().V1().Nodes()
	// The factory has not started: the node cache can still be trimmed.
	if err := nodes.Informer().SetTransform(flockcontroller.TrimNode); err != nil {
		klog.TODO().V(2).Info("Node cache kept untrimmed", "plugin", PluginName, "err", err)
	}
	p.nodes = placement.NewNodeIndex()
	reg, err := indexNodes(nodes.Informer(), p.nodes)
	if err != nil {
		// Only a stopped informer refuses handlers: then the index stays
		// empty and the plugin never reports synced (503, not a refusal).
		klog.TODO().Error(err, "Cannot follow node changes", "plugin", PluginName)
		p.nodesSynced = func() bool { return false }
		return
	}
	// Synced once the informer's initial list has reached the index, not
	// only the informer's store.
	p.nodesSynced = reg.HasSynced
}

// SetFlockInformerFactory takes the Flock lister, used by the scale
// subresource, whose requests carry only a Scale.
func (p *Plugin) SetFlockInformerFactory(f flockinformers.SharedInformerFactory) {
	flocks := f.Flock().V1alpha1().Flocks()
	p.flocks = flocks.Lister()
	p.flocksSynced = flocks.Informer().HasSynced
}

// ValidateInitialization fails when a lister is missing.
func (p *Plugin) ValidateInitialization() error {
	if p.nodes == nil {
		return fmt.Errorf("%s: missing node lister (no core cluster informer factory)", PluginName)
	}
	if p.flocks == nil {
		return fmt.Errorf("%s: missing flock lister (no flock informer factory)", PluginName)
	}
	return nil
}

// HasSynced reports whether the Node and Flock informers have synced. The
// plugin waits for it (up to admission's 10s) before it checks a request.
func (p *Plugin) HasSynced() bool {
	return p.nodesSynced != nil && p.nodesSynced() && p.flocksSynced != nil && p.flocksSynced()
}

// Validate refuses a create, update or scale that raises a Flock's
// requirement beyond what the nodes can hold, and warns when the Flock fits
// but may be placed on a NotReady node.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != flock.Resource("flocks") {
		return nil
	}
	var (
		r   placement.Requirement
		err error
	)
	switch a.GetSubresource() {
	case "":
		r, err = p.flockRequirement(a)
	case "scale":
		r, err = p.scaleRequirement(ctx, a)
	case "move":
		return p.validateMove(ctx, a)
	default:
		return nil
	}
	if err != nil || r.Replicas <= 0 {
		return err
	}

	refusal, warnings := p.nodes.Verify(r)
	logger := klog.FromContext(ctx)
	if refusal != nil {
		logger.V(2).Info("Refused Flock that the nodes cannot hold", "flock", klog.KRef(a.GetNamespace(), a.GetName()),
			"operation", a.GetOperation(), "subresource", a.GetSubresource(), "refusal", refusal.Error())
		return apierrors.NewInvalid(flock.Kind("Flock"), a.GetName(), field.ErrorList{refusal.FieldError()})
	}
	for _, w := range warnings {
		warning.AddWarning(ctx, "", w)
	}
	if len(warnings) > 0 {
		logger.V(4).Info("Admitted Flock with warnings", "flock", klog.KRef(a.GetNamespace(), a.GetName()), "warnings", warnings)
	}
	return nil
}

// flockRequirement returns what a create or update of a Flock asks, or a
// zero Requirement when an update does not raise it.
func (p *Plugin) flockRequirement(a admission.Attributes) (placement.Requirement, error) {
	obj, ok := a.GetObject().(*flock.Flock)
	if !ok {
		return placement.Requirement{}, apierrors.NewBadRequest(fmt.Sprintf("%s: unexpected object of type %T", PluginName, a.GetObject()))
	}
	r := RequirementFromInternal(obj)
	if a.GetOperation() == admission.Update {
		old, ok := a.GetOldObject().(*flock.Flock)
		if !ok {
			return placement.Requirement{}, apierrors.NewBadRequest(fmt.Sprintf("%s: unexpected old object of type %T", PluginName, a.GetOldObject()))
		}
		if !placement.Raises(RequirementFromInternal(old), r) {
			return placement.Requirement{}, nil
		}
	}
	if err := p.ready(r); err != nil {
		return placement.Requirement{}, err
	}
	return r, nil
}

// scaleRequirement returns what a Flock asks with the replicas of a Scale, or
// a zero Requirement when the scale does not raise replicas. The Scale
// carries only replicas: placement and tolerations come from the Flock
// lister.
func (p *Plugin) scaleRequirement(ctx context.Context, a admission.Attributes) (placement.Requirement, error) {
	scale, ok := a.GetObject().(*autoscalingv1.Scale)
	if !ok {
		return placement.Requirement{}, apierrors.NewBadRequest(fmt.Sprintf("%s: unexpected object of type %T for flocks/scale", PluginName, a.GetObject()))
	}
	if old, ok := a.GetOldObject().(*autoscalingv1.Scale); ok && scale.Spec.Replicas <= old.Spec.Replicas {
		return placement.Requirement{}, nil
	}
	if scale.Spec.Replicas <= 0 {
		return placement.Requirement{}, nil
	}
	if err := p.ready(placement.Requirement{Replicas: scale.Spec.Replicas}); err != nil {
		return placement.Requirement{}, err
	}
	f, err := p.cachedFlock(ctx, a)
	if err != nil {
		return placement.Requirement{}, err
	}
	r := placement.RequirementFromFlock(f)
	r.Replicas = scale.Spec.Replicas
	return r, nil
}

// cachedFlock returns the Flock a subresource request is about, from the
// informer. A Flock created a moment ago reaches the informer within
// milliseconds, so a miss waits a short, bounded while; then the answer is
// 503 (retry), never a refusal: the Flock exists (its subresource is being
// written) and its placement is not guessed.
func (p *Plugin) cachedFlock(ctx context.Context, a admission.Attributes) (*v1alpha1.Flock, error) {
	f, err := p.flocks.Flocks(a.GetNamespace()).Get(a.GetName())
	if apierrors.IsNotFound(err) {
		_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, cacheMissWait, false, func(context.Context) (bool, error) {
			f, err = p.flocks.Flocks(a.GetNamespace()).Get(a.GetName())
			return !apierrors.IsNotFound(err), nil
		})
	}
	if apierrors.IsNotFound(err) {
		return nil, admissionerrors.ServiceUnavailable(
			fmt.Sprintf("%s: cannot check capacity yet: flock %s/%s is not yet in the admission cache; retry", PluginName, a.GetNamespace(), a.GetName()))
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return f, nil
}

// ready waits for the informers, and answers 503 with Retry-After (never a
// refusal) when they are not synced in time. Requests that ask for no node
// never wait.
func (p *Plugin) ready(r placement.Requirement) error {
	if r.Replicas <= 0 || p.WaitForReady() {
		return nil
	}
	return admissionerrors.ServiceUnavailable(fmt.Sprintf("%s: not yet ready to handle requests: the node and flock caches have not synced; retry", PluginName))
}

// RequirementFromInternal returns the Requirement of an internal Flock, as
// admission sees it. A nil spec.replicas counts as the default, 1.
func RequirementFromInternal(f *flock.Flock) placement.Requirement {
	replicas := int32(1)
	if f.Spec.Replicas != nil {
		replicas = *f.Spec.Replicas
	}
	return placement.Requirement{
		Replicas:     replicas,
		NodeSelector: f.Spec.Placement.NodeSelector,
		Nodes:        f.Spec.Placement.Nodes,
		Tolerations:  f.Spec.Template.Spec.Tolerations,
	}
}

// ReadyzCheck is a /readyz check that fails until the informers the plugin
// reads (Nodes of the core cluster, and Flocks when flocks is not nil) have
// synced. Calling it registers those informers with the factories, so call it
// before the factories are started.
func ReadyzCheck(kube kubeinformers.SharedInformerFactory, flocks flockinformers.SharedInformerFactory) healthz.HealthChecker {
	nodesSynced := kube.Core().V1().Nodes().Informer().HasSynced
	flocksSynced := func() bool { return true }
	if flocks != nil {
		flocksSynced = flocks.Flock().V1alpha1().Flocks().Informer().HasSynced
	}
	return healthz.NamedCheck("flock-capacity-informers", func(*http.Request) error {
		if !nodesSynced() {
			return fmt.Errorf("node informer not synced")
		}
		if !flocksSynced() {
			return fmt.Errorf("flock informer not synced")
		}
		return nil
	})
}

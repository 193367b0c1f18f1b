// Package storageclass is the FlockStorageClass admission plugin: a Flock
// whose members get claims from spec.storage.claimTemplate must name a
// StorageClass the cluster can provision from. A claim template that names
// no class relies on the cluster's default StorageClass; on a cluster that
// has none, every member's claim would stay Pending and no member would ever
// start, so the create is refused with 422 naming
// spec.storage.claimTemplate.spec.storageClassName.
//
// A template that names a class that does not exist is accepted, as a
// StatefulSet's volumeClaimTemplates are (the class may be created later,
// and the claims bind then), with a warning saying so. An empty class name
// ("") asks for pre-provisioned volumes without a class, and is accepted as
// it is.
//
// The plugin reads StorageClasses from the core cluster's shared informers;
// it never lists anything per request. The claim template is immutable, so
// only creates are checked.
package storageclass

import (
	"context"
	"fmt"
	"io"
	"net/http"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/warning"
	kubeinformers "k8s.io/client-go/informers"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/admission/admissionerrors"
	"flock.dev/flock/pkg/admission/flockinitializer"
	"flock.dev/flock/pkg/apis/flock"
)

// PluginName is the name of the plugin in --enable-admission-plugins and
// RecommendedOptions.Admission.
const PluginName = "FlockStorageClass"

// The annotations that make a StorageClass the cluster's default (the beta
// one is still honoured by kube-apiserver's DefaultStorageClass plugin).
const (
	annotationDefaultClass     = "storageclass.kubernetes.io/is-default-class"
	annotationBetaDefaultClass = "storageclass.beta.kubernetes.io/is-default-class"
)

// classField is the field a refusal or warning names.
var classField = field.NewPath("spec", "storage", "claimTemplate", "spec", "storageClassName")

// Register registers the plugin.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return New(), nil
	})
}

// Plugin refuses claim templates that no StorageClass of the cluster serves.
type Plugin struct {
	*admission.Handler

	classes storagelisters.StorageClassLister
	synced  cache.InformerSynced
}

var (
	_ admission.ValidationInterface             = &Plugin{}
	_ admission.InitializationValidator         = &Plugin{}
	_ flockinitializer.WantsKubeInformerFactory = &Plugin{}
)

// New returns the plugin, handling Create. It needs the core cluster's
// informer factory (see flockinitializer) before it can serve.
func New() *Plugin {
	p := &Plugin{Handler: admission.NewHandler(admission.Create)}
	p.SetReadyFunc(p.HasSynced)
	return p
}

// SetKubeInformerFactory takes the StorageClass lister from the core
// cluster's informers (and registers the StorageClass informer with the
// factory).
func (p *Plugin) SetKubeInformerFactory(f kubeinformers.SharedInformerFactory) {
	classes := f.Storage().V1().StorageClasses()
	p.classes = classes.Lister()
	p.synced = classes.Informer().HasSynced
}

// ValidateInitialization fails when the lister is missing.
func (p *Plugin) ValidateInitialization() error {
	if p.classes == nil {
		return fmt.Errorf("%s: missing StorageClass lister (no core cluster informer factory)", PluginName)
	}
	return nil
}

// HasSynced reports whether the StorageClass informer has synced. The
// plugin waits for it (up to admission's 10s) before it checks a claim
// template that needs it.
func (p *Plugin) HasSynced() bool {
	return p.synced != nil && p.synced()
}

// Validate refuses a created Flock whose claim template names no
// StorageClass while the cluster has no default one, and warns when it
// names a class that does not exist.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != flock.Resource("flocks") || a.GetSubresource() != "" {
		return nil
	}
	f, ok := a.GetObject().(*flock.Flock)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("%s: unexpected object of type %T", PluginName, a.GetObject()))
	}
	ct := f.Spec.Storage.ClaimTemplate
	if ct == nil || (ct.Spec.StorageClassName != nil && *ct.Spec.StorageClassName == "") {
		return nil
	}
	if !p.WaitForReady() {
		return admissionerrors.ServiceUnavailable(fmt.Sprintf("%s: not yet ready to handle requests: the StorageClass cache has not synced; retry", PluginName))
	}
	classes, err := p.classes.List(labels.Everything())
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	refusal, warn := Check(ct.Spec.StorageClassName, classes)
	logger := klog.FromContext(ctx)
	if refusal != nil {
		logger.V(2).Info("Refused Flock whose claim template no StorageClass serves", "flock", klog.KRef(a.GetNamespace(), a.GetName()), "refusal", refusal.Error())
		return apierrors.NewInvalid(flock.Kind("Flock"), a.GetName(), field.ErrorList{refusal})
	}
	if warn != "" {
		warning.AddWarning(ctx, "", warn)
		logger.V(4).Info("Admitted Flock with a warning", "flock", klog.KRef(a.GetNamespace(), a.GetName()), "warning", warn)
	}
	return nil
}

// Check decides what a claim template asking for StorageClass name (nil: the
// cluster's default) gets among classes: a refusal when it names none and
// no class is the default, a warning when it names one that does not exist.
func Check(name *string, classes []*storagev1.StorageClass) (*field.Error, string) {
	if name == nil {
		for _, c := range classes {
			if IsDefault(c) {
				return nil, ""
			}
		}
		return field.Required(classField, "the cluster has no default StorageClass, so member claims would never be provisioned: "+
			"name a StorageClass, or make one the default (annotation "+annotationDefaultClass+`: "true")`), ""
	}
	for _, c := range classes {
		if c.Name == *name {
			return nil, ""
		}
	}
	return nil, fmt.Sprintf("%s: StorageClass %q does not exist; member claims stay Pending until it is created", classField, *name)
}

// IsDefault reports whether c is marked as the cluster's default
// StorageClass.
func IsDefault(c *storagev1.StorageClass) bool {
	return c.Annotations[annotationDefaultClass] == "true" || c.Annotations[annotationBetaDefaultClass] == "true"
}

// ReadyzCheck is a /readyz check that fails until the StorageClass informer
// of kube has synced. Calling it registers that informer with the factory,
// so call it before the factory is started.
func ReadyzCheck(kube kubeinformers.SharedInformerFactory) healthz.HealthChecker {
	synced := kube.Storage().V1().StorageClasses().Informer().HasSynced
	return healthz.NamedCheck("flock-storageclass-informer", func(*http.Request) error {
		if !synced() {
			return fmt.Errorf("StorageClass informer not synced")
		}
		return nil
	})
}

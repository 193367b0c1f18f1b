// Package memberdryrun is the FlockMemberDryRun admission plugin: a Flock
// never gets around the cluster's own rules. On create, and on every update
// that changes the pod template, storage or placement, it builds the pod of
// member 0 with the controller's own builder and sends it to kube-apiserver
// as a dry-run create in the Flock's namespace, under the identity that
// creates member pods (the controller's). Whatever the cluster would refuse
// then — Pod Security at the namespace's enforce level, pod validation,
// LimitRanges, ResourceQuota, admission webhooks and policies — refuses the
// Flock, with the cluster's message and field paths under spec.template; what
// the cluster only warns about comes back as warnings on the Flock.
//
// Answers are cached briefly by namespace and member pod, so a burst of
// identical requests costs one dry-run. Each dry-run is bounded in time: a
// slow or unreachable kube-apiserver answers 504 or 503, never a hang.
package memberdryrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/admission/admissionerrors"
	"flock.dev/flock/pkg/admission/flockinitializer"
	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
)

// PluginName is the name of the plugin in --enable-admission-plugins and
// RecommendedOptions.Admission.
const PluginName = "FlockMemberDryRun"

const (
	// DefaultTimeout bounds one dry-run create.
	DefaultTimeout = 2 * time.Second
	// DefaultCacheTTL is how long an answer of the cluster is reused.
	DefaultCacheTTL = 5 * time.Second

	// placeholderNode is the node the dry-run pod is pinned to when member 0
	// has none yet (no recorded member, no explicit spec.placement.nodes):
	// which node it is does not change what the cluster's rules say about
	// the pod, and no pod is ever scheduled from a dry-run.
	placeholderNode = "flock-dry-run.invalid"
)

// Register registers the plugin.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return New(), nil
	})
}

// Plugin dry-runs the member pod of a Flock against kube-apiserver.
type Plugin struct {
	*admission.Handler

	client  kubernetes.Interface
	timeout time.Duration
	answers *answerCache
}

var (
	_ admission.ValidationInterface         = &Plugin{}
	_ admission.InitializationValidator     = &Plugin{}
	_ flockinitializer.WantsMemberPodClient = &Plugin{}
)

// New returns the plugin, handling Create and Update. It needs the client of
// the member pods' creator (see flockinitializer) before it can serve.
func New() *Plugin {
	return &Plugin{
		Handler: admission.NewHandler(admission.Create, admission.Update),
		timeout: DefaultTimeout,
		answers: newAnswerCache(DefaultCacheTTL, time.Now),
	}
}

// SetMemberPodClient sets the client the dry-runs are sent with: the
// identity that creates member pods, so the answer is the one the
// controller's own create will get.
func (p *Plugin) SetMemberPodClient(c kubernetes.Interface) { p.client = c }

// ValidateInitialization fails when the client is missing.
func (p *Plugin) ValidateInitialization() error {
	if p.client == nil {
		return fmt.Errorf("%s: missing client of the core cluster", PluginName)
	}
	return nil
}

// Validate dry-runs member 0's pod of a created Flock, or of an updated one
// whose template, storage or placement changed.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != flock.Resource("flocks") || a.GetSubresource() != "" {
		return nil
	}
	obj, ok := a.GetObject().(*flock.Flock)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("%s: unexpected object of type %T", PluginName, a.GetObject()))
	}
	if a.GetOperation() == admission.Update {
		old, ok := a.GetOldObject().(*flock.Flock)
		if !ok {
			return apierrors.NewBadRequest(fmt.Sprintf("%s: unexpected old object of type %T", PluginName, a.GetOldObject()))
		}
		if !changesMemberPod(old, obj) {
			return nil
		}
	}
	pod, err := MemberPod(obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	key, err := cacheKey(pod)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	ans, cached := p.answers.get(key)
	if !cached {
		ans = p.dryRun(ctx, pod)
		if ans.final() {
			p.answers.put(key, ans)
		}
	}
	logger := klog.FromContext(ctx)
	for _, w := range ans.warnings {
		warning.AddWarning(ctx, "", w)
	}
	if ans.status != nil {
		logger.V(2).Info("Refused Flock whose member pod the cluster refuses", "flock", klog.KRef(a.GetNamespace(), a.GetName()),
			"pod", klog.KObj(pod), "cached", cached, "reason", ans.status.Reason, "message", ans.status.Message)
		return flockError(a.GetName(), pod.Name, ans.status)
	}
	logger.V(4).Info("Member pod passes the cluster's rules", "flock", klog.KRef(a.GetNamespace(), a.GetName()),
		"pod", klog.KObj(pod), "cached", cached, "warnings", len(ans.warnings))
	return nil
}

// changesMemberPod reports whether an update changes what the member pod
// would be: template, storage or placement.
func changesMemberPod(old, f *flock.Flock) bool {
	return !apiequality.Semantic.DeepEqual(old.Spec.Template, f.Spec.Template) ||
		!apiequality.Semantic.DeepEqual(old.Spec.Storage, f.Spec.Storage) ||
		!apiequality.Semantic.DeepEqual(old.Spec.Placement, f.Spec.Placement)
}

// MemberPod returns the pod the controller would create for member 0 of an
// internal Flock (flockcontroller.NewMemberPod, with the revision label of
// the current template), pinned to member 0's recorded or explicit node, or
// to a placeholder node. It mounts the member's claim, as the real pod does
// (a pod may name a claim that does not exist yet).
func MemberPod(in *flock.Flock) (*corev1.Pod, error) {
	f := &v1alpha1.Flock{}
	if err := v1alpha1.Convert_flock_Flock_To_v1alpha1_Flock(in, f, nil); err != nil {
		return nil, fmt.Errorf("convert Flock %s/%s: %w", in.Namespace, in.Name, err)
	}
	m := v1alpha1.FlockMember{Ordinal: 0, Node: placeholderNode}
	if len(f.Spec.Placement.Nodes) > 0 {
		m.Node = f.Spec.Placement.Nodes[0]
	}
	for _, rm := range f.Status.Members {
		if rm.Ordinal == 0 && rm.Node != "" {
			m.Node = rm.Node
		}
	}
	return flockcontroller.NewMemberPod(f, m, flockcontroller.Revision(&f.Spec.Template)), nil
}

// cacheKey identifies a member pod by namespace and content, without the
// Flock's UID (new on every create), so identical requests share an answer.
func cacheKey(pod *corev1.Pod) (string, error) {
	p := pod.DeepCopy()
	for i := range p.OwnerReferences {
		p.OwnerReferences[i].UID = ""
	}
	data, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return pod.Namespace + "/" + hex.EncodeToString(sum[:]), nil
}

// dryRun sends pod as a dryRun=All create and returns the cluster's answer.
func (p *Plugin) dryRun(ctx context.Context, pod *corev1.Pod) answer {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	// Protobuf, as the controller's own typed clients send pods: a raw
	// request would default to JSON, which kube-apiserver decodes and
	// encodes more slowly on every Flock create (issue 17).
	res := p.client.CoreV1().RESTClient().Post().
		UseProtobufAsDefault().
		Namespace(pod.Namespace).
		Resource("pods").
		VersionedParams(&metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: flockcontroller.FieldManager}, scheme.ParameterCodec).
		Body(pod).
		Do(ctx)
	var ans answer
	for _, w := range res.Warnings() {
		ans.warnings = append(ans.warnings, w.Text)
	}
	err := res.Error()
	var se apierrors.APIStatus
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		// A pod of that name exists (a running member, or a bare pod):
		// storage answers only after validation and every admission plugin
		// have accepted the pod.
		return ans
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		s := admissionerrors.Timeout(fmt.Sprintf("kube-apiserver did not answer the dry-run create of the member pod within %s; retry", p.timeout)).ErrStatus
		ans.status = &s
	case errors.As(err, &se) && se.Status().Code >= 400 && se.Status().Code < 500 && se.Status().Code != http.StatusTooManyRequests:
		s := se.Status()
		ans.status = &s
	default:
		s := admissionerrors.ServiceUnavailable(fmt.Sprintf("cannot dry-run the member pod against kube-apiserver: %v; retry", err)).ErrStatus
		ans.status = &s
	}
	return ans
}

// flockError turns the cluster's refusal of member pod podName into the
// Flock's: 422 for an invalid pod (field paths under spec.template), 403
// where the cluster said Forbidden, the cluster's own code otherwise; its
// message always carries the cluster's.
func flockError(name, podName string, s *metav1.Status) error {
	qualified := flock.Resource("flocks")
	out := metav1.Status{
		Status: metav1.StatusFailure,
		Code:   s.Code,
		Reason: s.Reason,
		Details: &metav1.StatusDetails{
			Name:  name,
			Group: qualified.Group,
			Kind:  qualified.Resource,
		},
	}
	if s.Details != nil {
		out.Details.RetryAfterSeconds = s.Details.RetryAfterSeconds
	}
	switch s.Reason {
	case metav1.StatusReasonTimeout, metav1.StatusReasonServiceUnavailable:
		out.Message = s.Message
		return &apierrors.StatusError{ErrStatus: out}
	case metav1.StatusReasonInvalid:
		out.Details.Kind = "Flock"
		var msgs []string
		if s.Details != nil {
			for _, c := range s.Details.Causes {
				c.Field = templateField(c.Field)
				out.Details.Causes = append(out.Details.Causes, c)
				msgs = append(msgs, c.Field+": "+c.Message)
			}
		}
		if len(msgs) == 0 {
			msgs = []string{s.Message}
		}
		out.Message = fmt.Sprintf("Flock.%s %q is invalid: the cluster refuses its member pod %s: %s",
			qualified.Group, name, podName, strings.Join(msgs, ", "))
	default:
		out.Message = fmt.Sprintf("%s %q is forbidden: the cluster refuses its member pod %s: %s",
			qualified.String(), name, podName, s.Message)
		if s.Reason != metav1.StatusReasonForbidden {
			out.Message = fmt.Sprintf("%s %q: the cluster refuses its member pod %s: %s", qualified.String(), name, podName, s.Message)
		}
		if s.Details != nil {
			for _, c := range s.Details.Causes {
				if c.Field != "" {
					c.Field = templateField(c.Field)
				}
				out.Details.Causes = append(out.Details.Causes, c)
			}
		}
	}
	return &apierrors.StatusError{ErrStatus: out}
}

// templateField maps a field path of the member pod to the Flock's: the
// pod's metadata and spec come from spec.template.
func templateField(podField string) string {
	if podField == "" {
		return field.NewPath("spec", "template").String()
	}
	return "spec.template." + podField
}

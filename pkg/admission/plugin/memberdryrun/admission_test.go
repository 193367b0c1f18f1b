package memberdryrun

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// fakeCluster stands in for kube-apiserver's pod create endpoint: it records
// each request and answers with a canned status and warnings. The e2e tests
// run the same plugin against a real kube-apiserver.
type fakeCluster struct {
	mu       sync.Mutex
	requests []*http.Request
	pods     []corev1.Pod
	status   *metav1.Status // nil: 201
	warnings []string
	delay    time.Duration
}

func (c *fakeCluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The body is protobuf or JSON, as its Content-Type says.
	var pod corev1.Pod
	if body, err := io.ReadAll(r.Body); err == nil {
		_, _, _ = scheme.Codecs.UniversalDeserializer().Decode(body, nil, &pod)
	}
	c.mu.Lock()
	c.requests = append(c.requests, r)
	c.pods = append(c.pods, pod)
	status, warnings, delay := c.status, c.warnings, c.delay
	c.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	for _, text := range warnings {
		w.Header().Add("Warning", "299 - "+strconv.Quote(text))
	}
	w.Header().Set("Content-Type", "application/json")
	if status == nil {
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(pod)
		return
	}
	s := *status
	s.Kind, s.APIVersion = "Status", "v1"
	w.WriteHeader(int(s.Code))
	_ = json.NewEncoder(w).Encode(s)
}

func (c *fakeCluster) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

func newTestPlugin(t *testing.T, c *fakeCluster) *Plugin {
	t.Helper()
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	p := New()
	p.SetMemberPodClient(client)
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	p.timeout = 300 * time.Millisecond
	return p
}

func testFlock(name, namespace string) *flock.Flock {
	replicas := int32(2)
	return &flock.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + name + "-" + time.Now().String())},
		Spec: &flock.FlockSpec{
			Replicas:    &replicas,
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Storage:     flock.FlockStorage{VolumeName: "data"},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "c", Image: "busybox",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}}},
			},
		},
	}
}

type recorder struct{ warnings []string }

func (r *recorder) AddWarning(_, text string) { r.warnings = append(r.warnings, text) }

func validate(p *Plugin, op admission.Operation, f, old *flock.Flock) ([]string, error) {
	rec := &recorder{}
	ctx := warning.WithWarningRecorder(context.Background(), rec)
	gvk := schema.GroupVersionKind{Group: flock.GroupName, Version: "v1alpha1", Kind: "Flock"}
	gvr := schema.GroupVersionResource{Group: flock.GroupName, Version: "v1alpha1", Resource: "flocks"}
	var oldObj runtime.Object
	if old != nil {
		oldObj = old
	}
	a := admission.NewAttributesRecord(f, oldObj, gvk, f.Namespace, f.Name, gvr, "", op, &metav1.CreateOptions{}, false, nil)
	err := p.Validate(ctx, a, nil)
	return rec.warnings, err
}

func TestDryRunSendsTheControllersMemberPod(t *testing.T) {
	c := &fakeCluster{}
	p := newTestPlugin(t, c)
	f := testFlock("web", "db")
	f.Spec.Placement.Nodes = []string{"n-a", "n-b"}
	if _, err := validate(p, admission.Create, f, nil); err != nil {
		t.Fatal(err)
	}
	if c.count() != 1 {
		t.Fatalf("%d requests, want 1", c.count())
	}
	r, pod := c.requests[0], c.pods[0]
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/namespaces/db/pods" {
		t.Errorf("request %s %s, want POST /api/v1/namespaces/db/pods", r.Method, r.URL.Path)
	}
	if ct, accept := r.Header.Get("Content-Type"), r.Header.Get("Accept"); ct != runtime.ContentTypeProtobuf || !strings.HasPrefix(accept, runtime.ContentTypeProtobuf+",") {
		t.Errorf("Content-Type %q, Accept %q; want protobuf, as the controller's typed clients send pods", ct, accept)
	}
	if q := r.URL.Query(); q.Get("dryRun") != "All" || q.Get("fieldManager") != "flock-controller" {
		t.Errorf("query %v, want dryRun=All and fieldManager=flock-controller", q)
	}
	if pod.Name != "web-0" || pod.Spec.Hostname != "web-0" || pod.Spec.Subdomain != "web" {
		t.Errorf("pod %s hostname %s subdomain %s, want web-0, web-0, web", pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	if pod.Labels[v1alpha1.LabelFlockName] != "web" || pod.Labels[v1alpha1.LabelOrdinal] != "0" || pod.Labels[v1alpha1.LabelRevision] == "" || pod.Labels["app"] != "web" {
		t.Errorf("labels %v, want the template's plus the member labels and revision", pod.Labels)
	}
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != f.UID || pod.OwnerReferences[0].Kind != "Flock" {
		t.Errorf("ownerReferences %v, want the Flock as controller", pod.OwnerReferences)
	}
	terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchFields[0].Values[0] != "n-a" {
		t.Errorf("node affinity %v, want member 0 pinned to n-a", terms)
	}
	if v := pod.Spec.Volumes; len(v) != 1 || v[0].Name != "data" || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != "data-web-0" || v[0].HostPath != nil {
		t.Errorf("volumes %v, want the member's claim data-web-0 as volume data", pod.Spec.Volumes)
	}
}

func TestRefusalsBecomeTheFlocks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   *metav1.Status
		wantCode int32
		wantMsg  []string
		wantCase string
	}{
		{
			name: "invalid pod: 422 with paths under spec.template",
			status: &metav1.Status{Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
				Message: `Pod "web-0" is invalid: spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`,
				Details: &metav1.StatusDetails{Name: "web-0", Kind: "Pod", Causes: []metav1.StatusCause{{
					Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.containers[0].resources.requests",
					Message: `Invalid value: "2": must be less than or equal to cpu limit of 1`,
				}}}},
			wantCode: 422,
			wantMsg:  []string{`Flock.flock.dev "web" is invalid`, `spec.template.spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`},
			wantCase: "spec.template.spec.containers[0].resources.requests",
		},
		{
			name: "Pod Security: 403 with the cluster's message",
			status: &metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
				Message: `pods "web-0" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)`},
			wantCode: 403,
			wantMsg:  []string{`flocks.flock.dev "web" is forbidden`, `violates PodSecurity "baseline:latest": privileged`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeCluster{status: tc.status}
			p := newTestPlugin(t, c)
			_, err := validate(p, admission.Create, testFlock("web", "db"), nil)
			var se apierrors.APIStatus
			if !errors.As(err, &se) || se.Status().Code != tc.wantCode {
				t.Fatalf("got %v, want code %d", err, tc.wantCode)
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("message %q lacks %q", err.Error(), m)
				}
			}
			if tc.wantCase != "" {
				if d := se.Status().Details; d == nil || len(d.Causes) != 1 || d.Causes[0].Field != tc.wantCase || d.Kind != "Flock" || d.Name != "web" {
					t.Errorf("details %+v, want one cause at %s on Flock web", d, tc.wantCase)
				}
			}
		})
	}
}

func TestWarningsAndExistingPod(t *testing.T) {
	w := `would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false`
	c := &fakeCluster{warnings: []string{w}}
	p := newTestPlugin(t, c)
	got, err := validate(p, admission.Create, testFlock("web", "db"), nil)
	if err != nil || len(got) != 1 || got[0] != w {
		t.Fatalf("got warnings %q, err %v; want %q", got, err, w)
	}

	// A running member (or a bare pod) of that name: storage answers
	// AlreadyExists only after every rule passed.
	c.status = &metav1.Status{Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonAlreadyExists, Message: `pods "other-0" already exists`}
	if _, err := validate(p, admission.Create, testFlock("other", "db"), nil); err != nil {
		t.Errorf("AlreadyExists: %v, want accepted", err)
	}
}

func TestUnreachableClusterIsNotARefusal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		c     *fakeCluster
		check func(error) bool
	}{
		{"slow: 504", &fakeCluster{delay: 2 * time.Second}, apierrors.IsTimeout},
		{"failing: 503", &fakeCluster{status: &metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError, Message: "etcd down"}}, apierrors.IsServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPlugin(t, tc.c)
			start := time.Now()
			_, err := validate(p, admission.Create, testFlock("web", "db"), nil)
			var se apierrors.APIStatus
			if !tc.check(err) || !errors.As(err, &se) || se.Status().Details == nil || se.Status().Details.RetryAfterSeconds <= 0 {
				t.Fatalf("got %#v, want %s with Retry-After", err, tc.name)
			}
			if elapsed := time.Since(start); elapsed > 10*p.timeout {
				t.Errorf("took %s with a timeout of %s", elapsed, p.timeout)
			}
			// Not cached: the next request asks again.
			before := tc.c.count()
			_, _ = validate(p, admission.Create, testFlock("web", "db"), nil)
			if tc.c.count() != before+1 {
				t.Errorf("a failure to reach the cluster was cached")
			}
		})
	}
}

func TestCacheAndWhatIsChecked(t *testing.T) {
	c := &fakeCluster{}
	p := newTestPlugin(t, c)
	// Identical creates (each with its own UID) cost one dry-run.
	for range 5 {
		if _, err := validate(p, admission.Create, testFlock("web", "db"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if c.count() != 1 {
		t.Errorf("5 identical creates: %d dry-runs, want 1", c.count())
	}
	// Another namespace, another answer.
	if _, err := validate(p, admission.Create, testFlock("web", "other"), nil); err != nil {
		t.Fatal(err)
	}
	if c.count() != 2 {
		t.Errorf("create in another namespace: %d dry-runs, want 2", c.count())
	}

	old := testFlock("web", "db")
	scaled := old.DeepCopy()
	scaled.Spec.Replicas = new(int32(5))
	if _, err := validate(p, admission.Update, scaled, old); err != nil || c.count() != 2 {
		t.Errorf("scale-only update: err %v, %d dry-runs, want none", err, c.count()-2)
	}
	changed := old.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Image = "busybox:2"
	if _, err := validate(p, admission.Update, changed, old); err != nil || c.count() != 3 {
		t.Errorf("template update: err %v, %d dry-runs, want one", err, c.count()-2)
	}
	placed := old.DeepCopy()
	placed.Spec.Placement.Nodes = []string{"n-b", "n-a"}
	if _, err := validate(p, admission.Update, placed, old); err != nil || c.count() != 4 {
		t.Errorf("placement update: err %v, want one more dry-run (%d)", err, c.count())
	}

	// An expired answer is asked again.
	now := time.Now()
	p.answers.now = func() time.Time { return now.Add(DefaultCacheTTL) }
	if _, err := validate(p, admission.Create, testFlock("web", "db"), nil); err != nil || c.count() != 5 {
		t.Errorf("after the ttl: err %v, %d dry-runs, want 5", err, c.count())
	}
}

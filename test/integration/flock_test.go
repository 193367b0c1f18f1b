package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockapply "flock.dev/flock/pkg/generated/applyconfiguration/flock/v1alpha1"
	"flock.dev/flock/pkg/generated/clientset/versioned"
	"flock.dev/flock/pkg/generated/clientset/versioned/scheme"
)

const ns = "default"

func newFlock(name string, replicas int32) *v1alpha1.Flock {
	return &v1alpha1.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.FlockSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:         "db",
					Image:        "postgres:16",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql"}},
				}}},
			},
		},
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestFlockLifecycle drives every verb of the flocks resource and its
// subresources through the generated clientset, then restarts the server on
// the same data directory and finds the Flocks unchanged.
func TestFlockLifecycle(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	c := s.client().FlockV1alpha1().Flocks(ns)

	// A watch opened before anything exists sees every change.
	w, err := c.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	created, err := c.Create(ctx, newFlock("pg", 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	// Defaults and server-set fields.
	if created.Generation != 1 || created.Spec.ServiceName != "pg" || created.Spec.Storage.VolumeName != "data" ||
		created.Spec.PodManagementPolicy != v1alpha1.OrderedReadyPodManagement || created.UID == "" {
		t.Fatalf("created Flock lacks defaults: generation=%d serviceName=%q volumeName=%q policy=%q",
			created.Generation, created.Spec.ServiceName, created.Spec.Storage.VolumeName, created.Spec.PodManagementPolicy)
	}
	expectEvent(t, w, watch.Added, "pg")

	// A status sent with a create is dropped.
	withStatus := newFlock("ignored-status", 1)
	withStatus.Status.ReadyReplicas = 7
	got, err := c.Create(ctx, withStatus, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ReadyReplicas != 0 {
		t.Errorf("create kept status.readyReplicas=%d, want 0", got.Status.ReadyReplicas)
	}
	expectEvent(t, w, watch.Added, "ignored-status")

	// Get and list, with label and field selectors.
	if _, err := c.Get(ctx, "pg", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Patch(ctx, "pg", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"db"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, w, watch.Modified, "pg")
	list, err := c.List(ctx, metav1.ListOptions{LabelSelector: "tier=db"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "pg" {
		t.Fatalf("label selector tier=db: %v, %d items", err, len(list.Items))
	}
	list, err = c.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=ignored-status"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "ignored-status" {
		t.Fatalf("field selector metadata.name: %v, %+v", err, list)
	}
	if _, err := c.List(ctx, metav1.ListOptions{FieldSelector: "spec.replicas=3"}); !apierrors.IsBadRequest(err) {
		t.Errorf("an unsupported field selector must be a 400, got %v", err)
	}

	// Update: a spec change bumps generation; a status change through the
	// main resource is ignored.
	cur, _ := c.Get(ctx, "pg", metav1.GetOptions{})
	cur.Spec.MinReadySeconds = 5
	cur.Status.ReadyReplicas = 3
	updated, err := c.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Generation != 2 || updated.Status.ReadyReplicas != 0 || updated.Spec.MinReadySeconds != 5 {
		t.Fatalf("update: generation=%d readyReplicas=%d minReadySeconds=%d, want 2, 0, 5",
			updated.Generation, updated.Status.ReadyReplicas, updated.Spec.MinReadySeconds)
	}
	expectEvent(t, w, watch.Modified, "pg")
	// A metadata-only change does not bump generation.
	relabeled, err := c.Patch(ctx, "pg", types.MergePatchType, []byte(`{"metadata":{"annotations":{"a":"b"}}}`), metav1.PatchOptions{})
	if err != nil || relabeled.Generation != 2 {
		t.Fatalf("annotation patch: %v, generation=%d, want 2", err, relabeled.Generation)
	}

	// Status only through /status, and /status ignores spec.
	st := relabeled.DeepCopy()
	st.Status.ObservedGeneration = 2
	st.Status.Replicas = 3
	st.Status.ReadyReplicas = 2
	st.Status.Members = []v1alpha1.FlockMember{{Ordinal: 0, Node: "n-a", Pod: "pg-0"}}
	st.Spec.MinReadySeconds = 99
	afterStatus, err := c.UpdateStatus(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if afterStatus.Status.ReadyReplicas != 2 || len(afterStatus.Status.Members) != 1 || afterStatus.Spec.MinReadySeconds != 5 || afterStatus.Generation != 2 {
		t.Fatalf("status update: ready=%d members=%d minReadySeconds=%d generation=%d",
			afterStatus.Status.ReadyReplicas, len(afterStatus.Status.Members), afterStatus.Spec.MinReadySeconds, afterStatus.Generation)
	}

	// Strategic merge patch merges status members by ordinal.
	smp := `{"status":{"members":[{"ordinal":1,"node":"n-b","pod":"pg-1"}]}}`
	afterSMP, err := c.Patch(ctx, "pg", types.StrategicMergePatchType, []byte(smp), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if len(afterSMP.Status.Members) != 2 {
		t.Fatalf("strategic merge patch of status.members replaced the list: %+v", afterSMP.Status.Members)
	}

	// Scale subresource: reads replicas and selector, writes replicas.
	scale, err := c.GetScale(ctx, "pg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 3 || scale.Status.Selector != "app=pg" {
		t.Fatalf("scale: replicas=%d selector=%q, want 3 and app=pg", scale.Spec.Replicas, scale.Status.Selector)
	}
	scale.Spec.Replicas = 2
	if _, err := c.UpdateScale(ctx, "pg", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if f, _ := c.Get(ctx, "pg", metav1.GetOptions{}); *f.Spec.Replicas != 2 || f.Generation != 3 {
		t.Fatalf("after scale: replicas=%d generation=%d, want 2 and 3", *f.Spec.Replicas, f.Generation)
	}
	stale := scale.DeepCopy()
	stale.Spec.Replicas = 1
	if _, err := c.UpdateScale(ctx, "pg", stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("scale with a stale resourceVersion must conflict, got %v", err)
	}
	negative := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: -1}}
	if _, err := c.UpdateScale(ctx, "pg", negative, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("negative scale must be 422, got %v", err)
	}

	// Server-side apply by two managers: a conflict on a shared field, as
	// for built-in kinds; force takes it over.
	apply := flockapply.Flock("applied", ns).WithSpec(flockapply.FlockSpec().
		WithReplicas(1).
		WithSelector(metaSelector("applied")).
		WithTemplate(podTemplate("applied")))
	if _, err := c.Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "alice"}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	bob := flockapply.Flock("applied", ns).WithSpec(flockapply.FlockSpec().WithReplicas(2))
	if _, err := c.Apply(ctx, bob, metav1.ApplyOptions{FieldManager: "bob"}); !apierrors.IsConflict(err) ||
		!strings.Contains(err.Error(), ".spec.replicas") {
		t.Fatalf("apply by a second manager must conflict on .spec.replicas, got %v", err)
	}
	forced, err := c.Apply(ctx, bob, metav1.ApplyOptions{FieldManager: "bob", Force: true})
	if err != nil || *forced.Spec.Replicas != 2 {
		t.Fatalf("forced apply: %v", err)
	}
	if !managedBy(forced, "bob") || !managedBy(forced, "alice") {
		t.Errorf("managedFields should list alice and bob: %+v", forced.ManagedFields)
	}

	// A scale through /scale takes ownership of spec.replicas: bob's next
	// apply of another value conflicts with the scaler, as for built-in kinds.
	sc, err := c.GetScale(ctx, "applied", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = 3
	if _, err := c.UpdateScale(ctx, "applied", sc, metav1.UpdateOptions{FieldManager: "scaler"}); err != nil {
		t.Fatal(err)
	}
	scaled, err := c.Get(ctx, "applied", metav1.GetOptions{})
	if err != nil || *scaled.Spec.Replicas != 3 || !managedBy(scaled, "scaler") {
		t.Fatalf("after /scale by scaler: %v, replicas=%d, managers=%+v", err, *scaled.Spec.Replicas, scaled.ManagedFields)
	}
	if !managedBy(scaled, "alice") {
		t.Errorf("/scale dropped alice's other fields: %+v", scaled.ManagedFields)
	}
	if _, err := c.Apply(ctx, bob, metav1.ApplyOptions{FieldManager: "bob"}); !apierrors.IsConflict(err) ||
		!strings.Contains(err.Error(), "scaler") {
		t.Fatalf("apply of spec.replicas after a /scale must conflict with the scaler, got %v", err)
	}

	// Restart on the same data directory: the Flocks are unchanged.
	before, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.restart()
	c = s.client().FlockV1alpha1().Flocks(ns)
	after, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != len(before.Items) || len(after.Items) != 3 {
		t.Fatalf("after restart %d Flocks, before %d (want 3)", len(after.Items), len(before.Items))
	}
	for i := range before.Items {
		b, a := before.Items[i], after.Items[i]
		if a.Name != b.Name || a.UID != b.UID || a.ResourceVersion != b.ResourceVersion || a.Generation != b.Generation ||
			*a.Spec.Replicas != *b.Spec.Replicas || len(a.Status.Members) != len(b.Status.Members) {
			t.Errorf("Flock %s changed across the restart", b.Name)
		}
	}

	// Delete.
	if err := c.Delete(ctx, "pg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "pg", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete: %v, want NotFound", err)
	}
}

// TestBadInput checks that invalid Flocks get 422 naming the field,
// malformed bodies 400, and that no request gets a 500.
func TestBadInput(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	c := s.client().FlockV1alpha1().Flocks(ns)

	invalid := []struct {
		name   string
		mutate func(*v1alpha1.Flock)
		field  string
	}{
		{"negative replicas", func(f *v1alpha1.Flock) { f.Spec.Replicas = ptr.To(int32(-1)) }, "spec.replicas"},
		{"selector mismatch", func(f *v1alpha1.Flock) { f.Spec.Selector.MatchLabels["app"] = "other" }, "spec.template.metadata.labels"},
		{"host network", func(f *v1alpha1.Flock) { f.Spec.Template.Spec.HostNetwork = true }, "spec.template.spec.hostNetwork"},
		{"bad policy", func(f *v1alpha1.Flock) { f.Spec.PodManagementPolicy = "Sometimes" }, "spec.podManagementPolicy"},
		{"name too long", func(f *v1alpha1.Flock) { f.Name = strings.Repeat("a", 59) }, "metadata.name"},
	}
	for _, tc := range invalid {
		f := newFlock("bad", 1)
		tc.mutate(f)
		_, err := c.Create(ctx, f, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: want 422 Invalid, got %v", tc.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error does not name %s: %v", tc.name, tc.field, err)
		}
	}

	// Immutable fields on update.
	if _, err := c.Create(ctx, newFlock("imm", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Patch(ctx, "imm", types.MergePatchType, []byte(`{"spec":{"serviceName":"other"}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.serviceName") {
		t.Errorf("changing serviceName: want 422 on spec.serviceName, got %v", err)
	}

	// Raw requests: malformed bodies and unknown fields.
	client, err := rest.HTTPClientFor(s.config)
	if err != nil {
		t.Fatal(err)
	}
	base := s.config.Host + "/apis/flock.dev/v1alpha1/namespaces/default/flocks"
	raw := []struct {
		name, method, url, contentType, body string
		want                                 int
	}{
		{"malformed JSON", http.MethodPost, base, "application/json", `{"apiVersion":`, http.StatusBadRequest},
		{"wrong kind", http.MethodPost, base, "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`, http.StatusBadRequest},
		{"unknown field, strict", http.MethodPost, base + "?fieldValidation=Strict", "application/json",
			`{"apiVersion":"flock.dev/v1alpha1","kind":"Flock","metadata":{"name":"u"},"spec":{"replicaz":1}}`, http.StatusBadRequest},
		{"malformed merge patch", http.MethodPatch, base + "/imm", "application/merge-patch+json", `{"spec":`, http.StatusBadRequest},
		{"malformed json patch", http.MethodPatch, base + "/imm", "application/json-patch+json", `[{"op":`, http.StatusBadRequest},
		// As for built-in kinds, a well-formed JSON patch that cannot apply is a 422.
		{"json patch with an unknown op", http.MethodPatch, base + "/imm", "application/json-patch+json", `[{"op":"explode"}]`, http.StatusUnprocessableEntity},
		{"patch of a missing Flock", http.MethodPatch, base + "/missing", "application/merge-patch+json", `{}`, http.StatusNotFound},
		{"scale with wrong body", http.MethodPut, base + "/imm/scale", "application/json", `{"spec":{"replicas":"many"}}`, http.StatusBadRequest},
		{"status of a missing Flock", http.MethodGet, base + "/missing/status", "", "", http.StatusNotFound},
	}
	for _, tc := range raw {
		req, _ := http.NewRequestWithContext(ctx, tc.method, tc.url, bytes.NewBufferString(tc.body))
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d: %s", tc.name, resp.StatusCode, tc.want, body)
		}
		var status metav1.Status
		if err := json.Unmarshal(body, &status); err != nil || status.Kind != "Status" {
			t.Errorf("%s: body is not a Status: %s", tc.name, body)
		}
		if tc.name == "unknown field, strict" && !strings.Contains(string(body), "replicaz") {
			t.Errorf("strict field validation should name the unknown field: %s", body)
		}
	}
}

func expectEvent(t *testing.T, w watch.Interface, typ watch.EventType, name string) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch closed while waiting for %s %s", typ, name)
		}
		f, isFlock := ev.Object.(*v1alpha1.Flock)
		if ev.Type != typ || !isFlock || f.Name != name {
			t.Fatalf("watch event %s %T, want %s of Flock %s", ev.Type, ev.Object, typ, name)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no watch event %s %s within 30s", typ, name)
	}
}

func managedBy(f *v1alpha1.Flock, manager string) bool {
	for _, m := range f.ManagedFields {
		if m.Manager == manager {
			return true
		}
	}
	return false
}

func metaSelector(app string) *metav1apply.LabelSelectorApplyConfiguration {
	return metav1apply.LabelSelector().WithMatchLabels(map[string]string{"app": app})
}

func podTemplate(app string) *corev1apply.PodTemplateSpecApplyConfiguration {
	return corev1apply.PodTemplateSpec().
		WithLabels(map[string]string{"app": app}).
		WithSpec(corev1apply.PodSpec().WithContainers(corev1apply.Container().WithName("db").WithImage("postgres:16")))
}

// TestProtobufClients checks that Flocks are served as protobuf, as the
// built-in kinds are: a create with a protobuf body answered in protobuf, a
// get and a list in protobuf, the generated clientset (which prefers
// protobuf, as client-go's does for built-in kinds) getting protobuf for its
// reads, writes and watches, and the forms the namespace controller and the
// garbage collector ask for.
func TestProtobufClients(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	client, err := rest.HTTPClientFor(s.config)
	if err != nil {
		t.Fatal(err)
	}
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	send := func(method, url string, body []byte) (int, string, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		req.Header.Set("Accept", runtime.ContentTypeProtobuf+", */*")
		if body != nil {
			req.Header.Set("Content-Type", runtime.ContentTypeProtobuf)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), out
	}
	base := s.config.Host + "/apis/flock.dev/v1alpha1/namespaces/default/flocks"

	f := newFlock("pb", 1)
	f.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Flock"}
	var body bytes.Buffer
	if err := pb.Encode(f, &body); err != nil {
		t.Fatal(err)
	}
	code, ct, out := send(http.MethodPost, base, body.Bytes())
	if code != http.StatusCreated || ct != runtime.ContentTypeProtobuf {
		t.Fatalf("create with a protobuf body: %d %s: %q", code, ct, out)
	}
	created := &v1alpha1.Flock{}
	if _, _, err := pb.Decode(out, nil, created); err != nil || created.Name != "pb" || created.UID == "" {
		t.Fatalf("created Flock decoded from protobuf: %v, %+v", err, created.ObjectMeta)
	}
	if created.Spec.Storage.Capacity != v1alpha1.DefaultStorageSize {
		t.Errorf("created Flock's spec.storage.size = %q, want the default %q", created.Spec.Storage.Capacity, v1alpha1.DefaultStorageSize)
	}

	code, ct, out = send(http.MethodGet, base+"/pb", nil)
	got := &v1alpha1.Flock{}
	if code != http.StatusOK || ct != runtime.ContentTypeProtobuf {
		t.Fatalf("get preferring protobuf: %d %s: %q", code, ct, out)
	}
	if _, _, err := pb.Decode(out, nil, got); err != nil || got.UID != created.UID || got.Spec.Template.Spec.Containers[0].Image != f.Spec.Template.Spec.Containers[0].Image {
		t.Fatalf("Flock got in protobuf: %v, %+v", err, got)
	}
	code, ct, out = send(http.MethodGet, base, nil)
	list := &v1alpha1.FlockList{}
	if code != http.StatusOK || ct != runtime.ContentTypeProtobuf {
		t.Fatalf("list preferring protobuf: %d %s: %q", code, ct, out)
	}
	if _, _, err := pb.Decode(out, nil, list); err != nil || len(list.Items) != 1 || list.Items[0].UID != created.UID {
		t.Fatalf("FlockList in protobuf: %v, %d items", err, len(list.Items))
	}

	// The generated clientset: every answer to it is protobuf.
	cfg := rest.CopyConfig(s.config)
	var mu sync.Mutex
	answers := map[string]int{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				mu.Lock()
				answers[req.Method+" "+resp.Header.Get("Content-Type")]++
				mu.Unlock()
			}
			return resp, err
		})
	})
	cs, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := cs.FlockV1alpha1().Flocks(ns)
	w, err := c.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=pb", ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got, err = c.Get(ctx, "pb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Status.Replicas = 1
	if got, err = c.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil || got.Status.Replicas != 1 {
		t.Fatalf("status update: %v", err)
	}
	select {
	case ev := <-w.ResultChan():
		if wf, ok := ev.Object.(*v1alpha1.Flock); ev.Type != watch.Modified || !ok || wf.Status.Replicas != 1 {
			t.Fatalf("watch event %s %T", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event for the status update")
	}
	mu.Lock()
	for answer := range answers {
		if !strings.HasSuffix(answer, " "+runtime.ContentTypeProtobuf) && !strings.HasSuffix(answer, " "+runtime.ContentTypeProtobuf+";stream=watch") {
			t.Errorf("the generated clientset got %q, want protobuf", answer)
		}
	}
	if answers["GET "+runtime.ContentTypeProtobuf] < 1 || answers["PUT "+runtime.ContentTypeProtobuf] != 1 {
		t.Errorf("the generated clientset's answers: %v", answers)
	}
	mu.Unlock()

	// The metadata-only form the namespace controller asks for.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base, nil)
	req.Header.Set("Accept", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != runtime.ContentTypeProtobuf || !strings.Contains(string(out), "PartialObjectMetadataList") {
		t.Errorf("metadata list preferring protobuf: %d %s: %q", resp.StatusCode, resp.Header.Get("Content-Type"), out)
	}
	// DeleteCollection answers with the deleted Flocks: the namespace
	// controller calls it preferring protobuf.
	code, ct, out = send(http.MethodDelete, base, nil)
	list = &v1alpha1.FlockList{}
	if code != http.StatusOK || ct != runtime.ContentTypeProtobuf {
		t.Fatalf("deletecollection preferring protobuf: %d %s: %q", code, ct, out)
	}
	if _, _, err := pb.Decode(out, nil, list); err != nil || len(list.Items) != 1 || list.Items[0].Name != "pb" {
		t.Errorf("deletecollection's answer in protobuf: %v, %+v", err, list.Items)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

package capacity

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/warning"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"flock.dev/flock/pkg/admission/flockinitializer"
	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockfake "flock.dev/flock/pkg/generated/clientset/versioned/fake"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
	flocklisters "flock.dev/flock/pkg/generated/listers/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

const ns = "db"

var (
	flocksResource = schema.GroupVersionResource{Group: flock.GroupName, Version: "v1alpha1", Resource: "flocks"}
	flockKind      = schema.GroupVersionKind{Group: flock.GroupName, Version: "v1alpha1", Kind: "Flock"}
	scaleKind      = autoscalingv1.SchemeGroupVersion.WithKind("Scale")
)

type nodeOpt func(*corev1.Node)

func node(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func labeled(k, v string) nodeOpt {
	return func(n *corev1.Node) { n.Labels = map[string]string{k: v} }
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func tainted(key, value string) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule})
	}
}

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }

type spec struct {
	replicas     int32
	nodeSelector map[string]string
	nodes        []string
	tolerations  []corev1.Toleration
	labels       map[string]string
}

// internalFlock is what admission sees for the flocks resource.
func internalFlock(name string, s spec) *flock.Flock {
	f := &flock.Flock{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: s.labels}, Spec: &flock.FlockSpec{}}
	f.Spec.Replicas = &s.replicas
	f.Spec.Placement.NodeSelector = s.nodeSelector
	f.Spec.Placement.Nodes = s.nodes
	f.Spec.Template.Spec.Tolerations = s.tolerations
	return f
}

// storedFlock is what the Flock lister holds.
func storedFlock(name string, s spec) *v1alpha1.Flock {
	f := &v1alpha1.Flock{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	f.Spec.Replicas = &s.replicas
	f.Spec.Placement.NodeSelector = s.nodeSelector
	f.Spec.Placement.Nodes = s.nodes
	f.Spec.Template.Spec.Tolerations = s.tolerations
	return f
}

func scale(name string, replicas int32) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
	}
}

// newTestPlugin returns a plugin with nodes loaded straight into its index
// and flocks into its lister, and ready at once.
func newTestPlugin(t testing.TB, nodes []*corev1.Node, flocks []*v1alpha1.Flock) *Plugin {
	t.Helper()
	flockIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, f := range flocks {
		if err := flockIndexer.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	p := New()
	p.nodes = placement.NewNodeIndex()
	for _, n := range nodes {
		p.nodes.Set(n)
	}
	p.flocks = flocklisters.NewFlockLister(flockIndexer)
	synced := func() bool { return true }
	p.nodesSynced, p.flocksSynced = synced, synced
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	return p
}

type recorder struct{ warnings []string }

func (r *recorder) AddWarning(agent, text string) { r.warnings = append(r.warnings, text) }

// request describes one admission request.
type request struct {
	op          admission.Operation
	subresource string
	obj, old    runtime.Object
}

func create(f *flock.Flock) request { return request{op: admission.Create, obj: f} }
func update(old, f *flock.Flock) request {
	return request{op: admission.Update, obj: f, old: old}
}
func scaleTo(name string, from, to int32) request {
	return request{op: admission.Update, subresource: "scale", obj: scale(name, to), old: scale(name, from)}
}

func (r request) attributes() admission.Attributes {
	kind := flockKind
	if r.subresource == "scale" {
		kind = scaleKind
	}
	name := r.obj.(interface{ GetName() string }).GetName()
	var opts runtime.Object = &metav1.CreateOptions{}
	if r.op == admission.Update {
		opts = &metav1.UpdateOptions{}
	}
	return admission.NewAttributesRecord(r.obj, r.old, kind, ns, name, flocksResource, r.subresource, r.op, opts, false, nil)
}

func validate(p *Plugin, req request) ([]string, error) {
	rec := &recorder{}
	ctx := warning.WithWarningRecorder(context.Background(), rec)
	err := p.Validate(ctx, req.attributes(), nil)
	return rec.warnings, err
}

// Nodes of several kinds: two labelled disk=local, one without the label,
// one labelled but cordoned, one labelled but tainted dedicated=db.
var (
	local      = map[string]string{"disk": "local"}
	tolerateDB = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db"}}
)

func mixedPool() []*corev1.Node {
	return []*corev1.Node{
		node("n-a", labeled("disk", "local")),
		node("n-b", labeled("disk", "local")),
		node("n-c"),
		node("n-d", labeled("disk", "local"), cordoned),
		node("n-e", labeled("disk", "local"), tainted("dedicated", "db")),
	}
}

func TestValidate(t *testing.T) {
	three := []*corev1.Node{node("n-a"), node("n-b"), node("n-c")}
	pool := mixedPool()

	tests := []struct {
		name     string
		nodes    []*corev1.Node
		flocks   []*v1alpha1.Flock // in the lister
		req      request
		wantErr  string // substring of the error; "" means admitted
		check    func(t *testing.T, err error)
		wantWarn []string
	}{
		{name: "create that fits", nodes: three, req: create(internalFlock("pg", spec{replicas: 3}))},
		{name: "create of zero replicas with no nodes", req: create(internalFlock("pg", spec{replicas: 0}))},
		{name: "create one too many", nodes: three, req: create(internalFlock("pg", spec{replicas: 4})),
			wantErr: `Flock.flock.dev "pg" is invalid: spec.replicas: Invalid value: 4: only 3 of 3 nodes are eligible`,
			check:   isInvalidOn("spec.replicas")},
		{name: "create refused names every reason", nodes: pool, req: create(internalFlock("pg", spec{replicas: 3, nodeSelector: local})),
			wantErr: `spec.replicas: Invalid value: 3: only 2 of 5 nodes are eligible (nodeSelector disk=local excludes 1; 1 cordoned; 1 has untolerated taint dedicated=db:NoSchedule)`,
			check:   isInvalidOn("spec.replicas")},
		{name: "create with the toleration counts the tainted node", nodes: pool,
			req: create(internalFlock("pg", spec{replicas: 3, nodeSelector: local, tolerations: tolerateDB}))},
		{name: "create with a missing explicit node", nodes: three, req: create(internalFlock("pg", spec{replicas: 2, nodes: []string{"n-a", "n-x"}})),
			wantErr: `spec.placement.nodes[1]: Invalid value: "n-x": node "n-x" does not exist`,
			check:   isInvalidOn("spec.placement.nodes[1]")},
		{name: "create with a duplicate explicit node", nodes: three, req: create(internalFlock("pg", spec{replicas: 2, nodes: []string{"n-a", "n-a"}})),
			wantErr: `spec.placement.nodes[1]: Invalid value: "n-a"`, check: isInvalidOn("spec.placement.nodes[1]")},
		{name: "create on a cordoned explicit node", nodes: pool, req: create(internalFlock("pg", spec{replicas: 1, nodes: []string{"n-d"}})),
			wantErr: `node "n-d" is not eligible: cordoned`, check: isInvalidOn("spec.placement.nodes[0]")},
		{name: "update raising replicas beyond the nodes", nodes: three,
			req:     update(internalFlock("pg", spec{replicas: 3}), internalFlock("pg", spec{replicas: 4})),
			wantErr: "only 3 of 3 nodes are eligible", check: isInvalidOn("spec.replicas")},
		{name: "update raising replicas within the nodes", nodes: three,
			req: update(internalFlock("pg", spec{replicas: 2}), internalFlock("pg", spec{replicas: 3}))},
		{name: "lowering replicas after nodes vanished", nodes: three[:1],
			req: update(internalFlock("pg", spec{replicas: 3}), internalFlock("pg", spec{replicas: 2}))},
		{name: "unrelated update after nodes vanished", nodes: nil,
			req: update(internalFlock("pg", spec{replicas: 3}), internalFlock("pg", spec{replicas: 3, labels: map[string]string{"team": "x"}}))},
		{name: "relaxing the selector after nodes vanished", nodes: nil,
			req: update(internalFlock("pg", spec{replicas: 3, nodeSelector: local}), internalFlock("pg", spec{replicas: 3}))},
		{name: "narrowing the selector is checked", nodes: pool,
			req:     update(internalFlock("pg", spec{replicas: 3}), internalFlock("pg", spec{replicas: 3, nodeSelector: local})),
			wantErr: "only 2 of 5 nodes are eligible", check: isInvalidOn("spec.replicas")},
		{name: "dropping a needed toleration is checked", nodes: pool,
			req: update(internalFlock("pg", spec{replicas: 3, nodeSelector: local, tolerations: tolerateDB}),
				internalFlock("pg", spec{replicas: 3, nodeSelector: local})),
			wantErr: "1 has untolerated taint dedicated=db:NoSchedule", check: isInvalidOn("spec.replicas")},
		{name: "changing an explicit node to a missing one is checked", nodes: three,
			req: update(internalFlock("pg", spec{replicas: 2, nodes: []string{"n-a", "n-b"}}),
				internalFlock("pg", spec{replicas: 2, nodes: []string{"n-a", "n-z"}})),
			wantErr: `node "n-z" does not exist`, check: isInvalidOn("spec.placement.nodes[1]")},
		{name: "scale up refused, placement from the lister", nodes: pool,
			flocks:  []*v1alpha1.Flock{storedFlock("pg", spec{replicas: 2, nodeSelector: local})},
			req:     scaleTo("pg", 2, 3),
			wantErr: `Flock.flock.dev "pg" is invalid: spec.replicas: Invalid value: 3: only 2 of 5 nodes are eligible (nodeSelector disk=local`,
			check:   isInvalidOn("spec.replicas")},
		{name: "scale up within the nodes", nodes: three,
			flocks: []*v1alpha1.Flock{storedFlock("pg", spec{replicas: 2})},
			req:    scaleTo("pg", 2, 3)},
		{name: "scale down after nodes vanished, flock not even cached", nodes: nil, req: scaleTo("pg", 3, 1)},
		{name: "scale up of a flock the cache has not seen", nodes: three, req: scaleTo("pg", 1, 2),
			wantErr: "not yet in the admission cache", check: func(t *testing.T, err error) {
				// Not a refusal: 503 with Retry-After, so clients retry.
				var se apierrors.APIStatus
				if !apierrors.IsServiceUnavailable(err) || !errors.As(err, &se) || se.Status().Details == nil || se.Status().Details.RetryAfterSeconds <= 0 {
					t.Errorf("want ServiceUnavailable with Retry-After, got %#v", err)
				}
			}},
		{name: "fits but a counted node is NotReady: warning", nodes: []*corev1.Node{node("n-a"), node("n-b", notReady)},
			req:      create(internalFlock("pg", spec{replicas: 1})),
			wantWarn: []string{"1 of 2 eligible nodes is NotReady (n-b): members placed there wait until their node is Ready"}},
		{name: "scale with a NotReady node: warning", nodes: []*corev1.Node{node("n-a"), node("n-b", notReady)},
			flocks:   []*v1alpha1.Flock{storedFlock("pg", spec{replicas: 1})},
			req:      scaleTo("pg", 1, 2),
			wantWarn: []string{"1 of 2 eligible nodes is NotReady (n-b): members placed there wait until their node is Ready"}},
		{name: "explicit nodes avoid the NotReady node: no warning", nodes: []*corev1.Node{node("n-a"), node("n-b", notReady)},
			req: create(internalFlock("pg", spec{replicas: 1, nodes: []string{"n-a"}}))},
		{name: "status subresource is not checked", nodes: nil,
			req: request{op: admission.Update, subresource: "status", obj: internalFlock("pg", spec{replicas: 5}), old: internalFlock("pg", spec{replicas: 1})}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPlugin(t, tc.nodes, tc.flocks)
			if !p.Handles(tc.req.op) {
				t.Fatalf("plugin does not handle %s", tc.req.op)
			}
			warns, err := validate(p, tc.req)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Validate = %v, want admitted", err)
			}
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Validate admitted, want %q", tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Validate =\n%v\nwant it to contain\n%s", err, tc.wantErr)
				}
				if tc.check != nil {
					tc.check(t, err)
				}
			}
			if !slices.Equal(warns, tc.wantWarn) {
				t.Errorf("warnings = %q, want %q", warns, tc.wantWarn)
			}
		})
	}
}

// isInvalidOn checks that err is a 422 Invalid on a Flock with one cause on field.
func isInvalidOn(field string) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			t.Fatalf("error %v is not an API status", err)
		}
		s := status.Status()
		if s.Code != http.StatusUnprocessableEntity || s.Reason != metav1.StatusReasonInvalid {
			t.Errorf("status code %d reason %s, want 422 Invalid", s.Code, s.Reason)
		}
		if s.Details == nil || s.Details.Kind != "Flock" || s.Details.Group != flock.GroupName || len(s.Details.Causes) != 1 || s.Details.Causes[0].Field != field {
			t.Errorf("details = %+v, want one cause on %s of a flock.dev Flock", s.Details, field)
		}
	}
}

func TestIgnoresOtherResources(t *testing.T) {
	p := newTestPlugin(t, nil, nil)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}}
	a := admission.NewAttributesRecord(pod, nil, corev1.SchemeGroupVersion.WithKind("Pod"), ns, "p",
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, nil)
	if err := p.Validate(context.Background(), a, nil); err != nil {
		t.Errorf("Validate(pod) = %v, want nil", err)
	}
	if p.Handles(admission.Delete) || p.Handles(admission.Connect) {
		t.Error("plugin handles Delete or Connect")
	}
}

func TestWrongObjectIsBadRequest(t *testing.T) {
	p := newTestPlugin(t, nil, nil)
	_, err := validate(p, request{op: admission.Update, subresource: "scale", obj: internalFlock("pg", spec{replicas: 3})})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("Validate(Flock as a Scale) = %v, want BadRequest", err)
	}
}

func TestRequirementFromInternal(t *testing.T) {
	f := internalFlock("pg", spec{replicas: 3, nodeSelector: map[string]string{"a": "b"}, nodes: []string{"n"},
		tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}})
	r := RequirementFromInternal(f)
	if r.Replicas != 3 || r.NodeSelector["a"] != "b" || !slices.Equal(r.Nodes, []string{"n"}) || len(r.Tolerations) != 1 || r.Tolerations[0].Key != "k" {
		t.Errorf("RequirementFromInternal = %+v", r)
	}
	f.Spec.Replicas = nil
	if r := RequirementFromInternal(f); r.Replicas != 1 {
		t.Errorf("nil replicas: Replicas = %d, want 1", r.Replicas)
	}
}

// TestRegisterAndInitialize goes through admission's own plugin machinery:
// registration, the initializer, and ValidateInitialization.
func TestRegisterAndInitialize(t *testing.T) {
	plugins := admission.NewPlugins()
	Register(plugins)
	if !slices.Contains(plugins.Registered(), PluginName) {
		t.Fatalf("registered plugins %v lack %s", plugins.Registered(), PluginName)
	}

	kube := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	flocks := flockinformers.NewSharedInformerFactory(flockfake.NewClientset(), 0)

	if _, err := plugins.InitPlugin(PluginName, nil, flockinitializer.New(nil, flocks)); err == nil || !strings.Contains(err.Error(), "missing node lister") {
		t.Errorf("InitPlugin without a kube factory = %v, want a missing node lister error", err)
	}
	if _, err := plugins.InitPlugin(PluginName, nil, flockinitializer.New(kube, nil)); err == nil || !strings.Contains(err.Error(), "missing flock lister") {
		t.Errorf("InitPlugin without a flock factory = %v, want a missing flock lister error", err)
	}
	got, err := plugins.InitPlugin(PluginName, nil, flockinitializer.New(kube, flocks))
	if err != nil {
		t.Fatalf("InitPlugin = %v", err)
	}
	p, ok := got.(*Plugin)
	if !ok {
		t.Fatalf("InitPlugin returned %T", got)
	}
	if p.HasSynced() {
		t.Error("HasSynced before the informers started")
	}

	// The readyz check fails until the informers the plugin reads have synced.
	check := ReadyzCheck(kube, flocks)
	if err := check.Check(nil); err == nil {
		t.Error("readyz check passed before the informers started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	kube.Start(ctx.Done())
	flocks.Start(ctx.Done())
	defer func() {
		// Stop the informers, then wait for their goroutines.
		cancel()
		kube.Shutdown()
		flocks.Shutdown()
	}()
	for typ, ok := range kube.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer %v did not sync", typ)
		}
	}
	for typ, ok := range flocks.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer %v did not sync", typ)
		}
	}
	// The plugin is synced once the informers' lists have also reached its
	// node index, a moment after the informers themselves.
	if !cache.WaitForCacheSync(ctx.Done(), p.HasSynced) {
		t.Error("HasSynced false after the informers synced")
	}
	if err := check.Check(nil); err != nil {
		t.Errorf("readyz check after sync = %v", err)
	}
	if check.Name() != "flock-capacity-informers" {
		t.Errorf("readyz check name %q", check.Name())
	}
}

// startedPlugin returns the plugin initialized from informer factories over
// fake clientsets holding nodes, with the informers started and synced. The
// informers stop when the test ends.
func startedPlugin(tb testing.TB, nodes []*corev1.Node) (*Plugin, *kubefake.Clientset) {
	tb.Helper()
	objs := make([]runtime.Object, 0, len(nodes))
	for _, n := range nodes {
		objs = append(objs, n)
	}
	client := kubefake.NewClientset(objs...)
	kube := kubeinformers.NewSharedInformerFactory(client, 0)
	flocks := flockinformers.NewSharedInformerFactory(flockfake.NewClientset(), 0)
	plugins := admission.NewPlugins()
	Register(plugins)
	got, err := plugins.InitPlugin(PluginName, nil, flockinitializer.New(kube, flocks))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	kube.Start(ctx.Done())
	flocks.Start(ctx.Done())
	tb.Cleanup(func() {
		cancel()
		kube.Shutdown()
		flocks.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), got.(*Plugin).HasSynced) {
		tb.Fatal("informers did not sync")
	}
	return got.(*Plugin), client
}

// TestNodeAddedMakesRefusedFlockFit: the plugin follows the node informer,
// so a fourth node makes a refused Flock of 4 acceptable.
func TestNodeAddedMakesRefusedFlockFit(t *testing.T) {
	p, client := startedPlugin(t, []*corev1.Node{node("n-a"), node("n-b"), node("n-c")})
	req := create(internalFlock("pg", spec{replicas: 4}))
	if _, err := validate(p, req); err == nil || !strings.Contains(err.Error(), "only 3 of 3 nodes are eligible") {
		t.Fatalf("Validate with 3 nodes = %v, want refused", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.CoreV1().Nodes().Create(ctx, node("n-d"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The informer delivers the new node asynchronously: poll, bounded.
	var err error
	for ctx.Err() == nil {
		if _, err = validate(p, req); err == nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err != nil {
		t.Fatalf("Validate after adding a fourth node = %v, want admitted", err)
	}

	// And a cordon is seen the same way.
	cordonedD := node("n-d", cordoned)
	if _, err := client.CoreV1().Nodes().Update(ctx, cordonedD, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		if _, err = validate(p, req); err != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err == nil || !strings.Contains(err.Error(), "only 3 of 4 nodes are eligible (1 cordoned)") {
		t.Fatalf("Validate after cordoning n-d = %v, want refused", err)
	}
}

// benchmarkNodes returns n nodes labelled as a cluster's are (hostname, zone,
// a disk pool holding all but a tenth), one in 50 cordoned, one in 20
// tainted, one in 100 NotReady.
func benchmarkNodes(n int) []*corev1.Node {
	nodes := make([]*corev1.Node, 0, n)
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		var opts []nodeOpt
		switch {
		case i%50 == 1:
			opts = append(opts, cordoned)
		case i%20 == 2:
			opts = append(opts, tainted("dedicated", "db"))
		case i%100 == 3:
			opts = append(opts, notReady)
		}
		nd := node(name, opts...)
		nd.Labels = map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3)}
		if i%10 != 0 {
			nd.Labels["disk"] = "local"
		}
		nodes = append(nodes, nd)
	}
	return nodes
}

// BenchmarkValidateCreate5000Nodes is one create through the plugin with
// 5,000 nodes in a synced node informer (fed by a fake clientset, through the
// plugin's initializer, as in the server): what a request costs in the
// server. It asks for nodes the notReady node can be among, so the warning
// is built too.
func BenchmarkValidateCreate5000Nodes(b *testing.B) {
	p, _ := startedPlugin(b, benchmarkNodes(5000))
	a := create(internalFlock("pg", spec{replicas: 3, nodeSelector: map[string]string{"disk": "local"}})).attributes()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Validate(ctx, a, nil); err != nil {
			b.Fatal(err)
		}
	}
}

var sinkCount int

// BenchmarkAnchorLabelSelectorMatch5000 is the anchor to read the plugin's
// benchmark against: one labels.Selector, built once, matched against the
// labels of the same 5,000 nodes (what a walk over every node costs at the
// least).
func BenchmarkAnchorLabelSelectorMatch5000(b *testing.B) {
	nodes := benchmarkNodes(5000)
	sel := labels.SelectorFromSet(map[string]string{"disk": "local"})
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, node := range nodes {
			if sel.Matches(labels.Set(node.Labels)) {
				n++
			}
		}
		sinkCount = n
	}
}

// While the informers have not synced, a request that asks for nodes is not
// refused: it gets 503 with Retry-After (after admission's bounded wait for
// readiness, about 10 s), and a request asking for none passes at once.
func TestNotSyncedIsServiceUnavailable(t *testing.T) {
	p := newTestPlugin(t, []*corev1.Node{node("n-a")}, nil)
	never := func() bool { return false }
	p.nodesSynced = never
	_, err := validate(p, create(internalFlock("pg", spec{replicas: 1})))
	var se apierrors.APIStatus
	if !apierrors.IsServiceUnavailable(err) || !errors.As(err, &se) || se.Status().Details == nil || se.Status().Details.RetryAfterSeconds <= 0 ||
		!strings.Contains(err.Error(), "caches have not synced") {
		t.Errorf("got %#v, want 503 with Retry-After naming the caches", err)
	}
	if _, err := validate(p, create(internalFlock("pg", spec{replicas: 0}))); err != nil {
		t.Errorf("zero replicas while not synced: %v", err)
	}
}

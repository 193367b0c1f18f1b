package placement

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// nodeOpt changes a test node.
type nodeOpt func(*corev1.Node)

func node(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func labeled(kv ...string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func tainted(key, value string, effect corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func ready(status corev1.ConditionStatus) nodeOpt {
	return func(n *corev1.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].Status = status
			}
		}
	}
}

func noConditions(n *corev1.Node) { n.Status.Conditions = nil }

// notReadyTainted is what the node lifecycle controller does to a NotReady node.
func notReadyTainted(n *corev1.Node) {
	ready(corev1.ConditionFalse)(n)
	tainted("node.kubernetes.io/not-ready", "", corev1.TaintEffectNoSchedule)(n)
	tainted("node.kubernetes.io/not-ready", "", corev1.TaintEffectNoExecute)(n)
}

func tol(key string, op corev1.TolerationOperator, value string, effect corev1.TaintEffect) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect}
}

func TestToleratesTaint(t *testing.T) {
	const (
		ns = corev1.TaintEffectNoSchedule
		ne = corev1.TaintEffectNoExecute
		pn = corev1.TaintEffectPreferNoSchedule
	)
	taint := corev1.Taint{Key: "dedicated", Value: "db", Effect: ns}
	tests := []struct {
		name  string
		tol   corev1.Toleration
		taint corev1.Taint
		want  bool
	}{
		{"equal same key value effect", tol("dedicated", corev1.TolerationOpEqual, "db", ns), taint, true},
		{"equal other value", tol("dedicated", corev1.TolerationOpEqual, "web", ns), taint, false},
		{"equal other key", tol("gpu", corev1.TolerationOpEqual, "db", ns), taint, false},
		{"empty operator means equal", tol("dedicated", "", "db", ns), taint, true},
		{"empty operator other value", tol("dedicated", "", "web", ns), taint, false},
		{"equal with empty value matches empty taint value", tol("k", corev1.TolerationOpEqual, "", ne), corev1.Taint{Key: "k", Effect: ne}, true},
		{"exists any value", tol("dedicated", corev1.TolerationOpExists, "", ns), taint, true},
		{"exists other key", tol("gpu", corev1.TolerationOpExists, "", ns), taint, false},
		{"exists empty key tolerates everything", tol("", corev1.TolerationOpExists, "", ""), corev1.Taint{Key: "x", Value: "y", Effect: ne}, true},
		{"exists empty key with effect restricts effect", tol("", corev1.TolerationOpExists, "", ns), corev1.Taint{Key: "x", Effect: ne}, false},
		{"effect-less matches NoSchedule", tol("dedicated", corev1.TolerationOpEqual, "db", ""), taint, true},
		{"effect-less matches NoExecute", tol("dedicated", corev1.TolerationOpExists, "", ""), corev1.Taint{Key: "dedicated", Effect: ne}, true},
		{"NoSchedule toleration does not match NoExecute taint", tol("dedicated", corev1.TolerationOpExists, "", ns), corev1.Taint{Key: "dedicated", Effect: ne}, false},
		{"NoExecute toleration does not match NoSchedule taint", tol("dedicated", corev1.TolerationOpEqual, "db", ne), taint, false},
		{"PreferNoSchedule toleration does not match NoSchedule", tol("dedicated", corev1.TolerationOpEqual, "db", pn), taint, false},
		{"Lt tolerates nothing (alpha, off)", tol("level", corev1.TolerationOpLt, "10", ns), corev1.Taint{Key: "level", Value: "5", Effect: ns}, false},
		{"Gt tolerates nothing (alpha, off)", tol("level", corev1.TolerationOpGt, "1", ns), corev1.Taint{Key: "level", Value: "5", Effect: ns}, false},
		{"unknown operator tolerates nothing", tol("dedicated", "Matches", "db", ns), taint, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToleratesTaint(&tc.tol, &tc.taint); got != tc.want {
				t.Errorf("ToleratesTaint(%+v, %+v) = %v, want %v", tc.tol, tc.taint, got, tc.want)
			}
		})
	}
}

func TestIsEligible(t *testing.T) {
	const (
		ns = corev1.TaintEffectNoSchedule
		ne = corev1.TaintEffectNoExecute
		pn = corev1.TaintEffectPreferNoSchedule
	)
	local := map[string]string{"disk": "local"}
	tests := []struct {
		name       string
		node       *corev1.Node
		req        Requirement
		wantReason Reason // "" means eligible
		wantDetail string
	}{
		{name: "plain node, no selector", node: node("a"), req: Requirement{}},
		{name: "selector matches", node: node("a", labeled("disk", "local", "zone", "z1")), req: Requirement{NodeSelector: local}},
		{name: "selector label missing", node: node("a", labeled("zone", "z1")), req: Requirement{NodeSelector: local},
			wantReason: ReasonSelector, wantDetail: "does not match nodeSelector disk=local"},
		{name: "selector value differs", node: node("a", labeled("disk", "ssd")), req: Requirement{NodeSelector: local},
			wantReason: ReasonSelector, wantDetail: "does not match nodeSelector disk=local"},
		{name: "selector with an empty value needs the label", node: node("a"), req: Requirement{NodeSelector: map[string]string{"x": ""}},
			wantReason: ReasonSelector, wantDetail: "does not match nodeSelector x="},
		{name: "selector with an empty value matches an empty label", node: node("a", labeled("x", "")), req: Requirement{NodeSelector: map[string]string{"x": ""}}},
		{name: "multi-key selector, one key off", node: node("a", labeled("disk", "local", "zone", "z2")),
			req:        Requirement{NodeSelector: map[string]string{"zone": "z1", "disk": "local"}},
			wantReason: ReasonSelector, wantDetail: "does not match nodeSelector disk=local,zone=z1"},
		{name: "cordoned", node: node("a", cordoned), req: Requirement{}, wantReason: ReasonCordoned, wantDetail: "cordoned"},
		{name: "cordoned even when tolerating everything", node: node("a", cordoned, tainted("node.kubernetes.io/unschedulable", "", ns)),
			req: Requirement{Tolerations: []corev1.Toleration{tol("", corev1.TolerationOpExists, "", "")}}, wantReason: ReasonCordoned, wantDetail: "cordoned"},
		{name: "selector is reported before cordon", node: node("a", cordoned), req: Requirement{NodeSelector: local},
			wantReason: ReasonSelector, wantDetail: "does not match nodeSelector disk=local"},
		{name: "NoSchedule taint excludes", node: node("a", tainted("dedicated", "db", ns)), req: Requirement{},
			wantReason: ReasonTaint, wantDetail: "untolerated taint dedicated=db:NoSchedule"},
		{name: "NoExecute taint excludes", node: node("a", tainted("gpu", "", ne)), req: Requirement{},
			wantReason: ReasonTaint, wantDetail: "untolerated taint gpu:NoExecute"},
		{name: "PreferNoSchedule never excludes", node: node("a", tainted("dedicated", "db", pn)), req: Requirement{}},
		{name: "tolerated taint", node: node("a", tainted("dedicated", "db", ns)),
			req: Requirement{Tolerations: []corev1.Toleration{tol("dedicated", corev1.TolerationOpEqual, "db", ns)}}},
		{name: "second taint untolerated", node: node("a", tainted("dedicated", "db", ns), tainted("gpu", "a100", ne)),
			req:        Requirement{Tolerations: []corev1.Toleration{tol("dedicated", corev1.TolerationOpExists, "", "")}},
			wantReason: ReasonTaint, wantDetail: "untolerated taint gpu=a100:NoExecute"},
		{name: "two tolerations cover two taints", node: node("a", tainted("dedicated", "db", ns), tainted("gpu", "a100", ne)),
			req: Requirement{Tolerations: []corev1.Toleration{
				tol("gpu", corev1.TolerationOpEqual, "a100", ""),
				tol("dedicated", corev1.TolerationOpExists, "", ""),
			}}},
		{name: "NotReady with lifecycle taints is excluded", node: node("a", notReadyTainted), req: Requirement{},
			wantReason: ReasonTaint, wantDetail: "untolerated taint node.kubernetes.io/not-ready:NoSchedule"},
		{name: "NotReady tolerated is eligible", node: node("a", notReadyTainted),
			req: Requirement{Tolerations: []corev1.Toleration{tol("node.kubernetes.io/not-ready", corev1.TolerationOpExists, "", "")}}},
		{name: "NotReady alone does not exclude", node: node("a", ready(corev1.ConditionFalse)), req: Requirement{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, ex := IsEligible(tc.node, tc.req)
			if ok != (tc.wantReason == "") {
				t.Fatalf("IsEligible = %v (%+v), want eligible=%v", ok, ex, tc.wantReason == "")
			}
			if ok {
				if ex != (Exclusion{}) {
					t.Errorf("eligible node has exclusion %+v", ex)
				}
				return
			}
			want := Exclusion{Node: tc.node.Name, Reason: tc.wantReason, Detail: tc.wantDetail}
			if ex != want {
				t.Errorf("exclusion = %+v, want %+v", ex, want)
			}
		})
	}
}

func TestIsReady(t *testing.T) {
	for _, tc := range []struct {
		node *corev1.Node
		want bool
	}{
		{node("a"), true},
		{node("a", ready(corev1.ConditionFalse)), false},
		{node("a", ready(corev1.ConditionUnknown)), false},
		{node("a", noConditions), false},
	} {
		if got := IsReady(tc.node); got != tc.want {
			t.Errorf("IsReady(%v) = %v, want %v", tc.node.Status.Conditions, got, tc.want)
		}
	}
}

func TestVerify(t *testing.T) {
	const ns = corev1.TaintEffectNoSchedule
	// The example of the issue: a pool of disk=local nodes with one cordoned
	// and one tainted, plus one node outside the pool.
	mixed := []*corev1.Node{
		node("n-a", labeled("disk", "local")),
		node("n-b", labeled("disk", "local")),
		node("n-c", labeled("disk", "local")),
		node("n-d", labeled("disk", "local"), cordoned),
		node("n-e", labeled("disk", "local"), tainted("dedicated", "db", ns)),
		node("n-f"),
	}
	local := map[string]string{"disk": "local"}
	three := []*corev1.Node{node("n-a"), node("n-b"), node("n-c")}
	manyTaints := []*corev1.Node{
		node("t1", tainted("a", "", ns)),
		node("t2", tainted("b", "", ns)),
		node("t3", tainted("b", "", ns)),
		node("t4", tainted("c", "1", ns)),
		node("t5", tainted("d", "", ns)),
		node("t6", tainted("e", "", ns)),
		node("ok"),
	}

	tests := []struct {
		name      string
		nodes     []*corev1.Node
		req       Requirement
		wantErr   string // CheckError.Error(); "" means fits
		wantField string
		wantValue interface{}
		wantWhy   Reason
	}{
		{name: "fits exactly", nodes: mixed, req: Requirement{Replicas: 3, NodeSelector: local}},
		{name: "zero replicas fit anything", nodes: nil, req: Requirement{Replicas: 0}},
		{name: "one too many, all reasons named", nodes: mixed, req: Requirement{Replicas: 4, NodeSelector: local},
			wantErr:   "spec.replicas: Invalid value: 4: only 3 of 6 nodes are eligible (nodeSelector disk=local excludes 1; 1 cordoned; 1 has untolerated taint dedicated=db:NoSchedule)",
			wantField: "spec.replicas", wantValue: int32(4), wantWhy: ReasonInsufficient},
		{name: "toleration makes the tainted node count", nodes: mixed,
			req: Requirement{Replicas: 4, NodeSelector: local, Tolerations: []corev1.Toleration{tol("dedicated", corev1.TolerationOpEqual, "db", ns)}}},
		{name: "all eligible but too few", nodes: three, req: Requirement{Replicas: 4},
			wantErr: "spec.replicas: Invalid value: 4: only 3 of 3 nodes are eligible", wantField: "spec.replicas", wantValue: int32(4), wantWhy: ReasonInsufficient},
		{name: "no nodes", nodes: nil, req: Requirement{Replicas: 1},
			wantErr: "spec.replicas: Invalid value: 1: only 0 of 0 nodes are eligible", wantField: "spec.replicas", wantValue: int32(1), wantWhy: ReasonInsufficient},
		{name: "singular grammar", nodes: []*corev1.Node{node("a", cordoned)}, req: Requirement{Replicas: 1},
			wantErr: "spec.replicas: Invalid value: 1: only 0 of 1 node are eligible (1 cordoned)", wantField: "spec.replicas", wantValue: int32(1), wantWhy: ReasonInsufficient},
		{name: "one eligible", nodes: []*corev1.Node{node("a"), node("b", cordoned), node("c", cordoned)}, req: Requirement{Replicas: 2},
			wantErr: "spec.replicas: Invalid value: 2: only 1 of 3 nodes is eligible (2 cordoned)", wantField: "spec.replicas", wantValue: int32(2), wantWhy: ReasonInsufficient},
		{name: "taints grouped, most common first, at most three named", nodes: manyTaints, req: Requirement{Replicas: 2},
			wantErr:   "spec.replicas: Invalid value: 2: only 1 of 7 nodes is eligible (2 have untolerated taint b:NoSchedule; 1 has untolerated taint a:NoSchedule; 1 has untolerated taint c=1:NoSchedule; 2 have other untolerated taints)",
			wantField: "spec.replicas", wantValue: int32(2), wantWhy: ReasonInsufficient},
		{name: "explicit nodes fit", nodes: three, req: Requirement{Replicas: 2, Nodes: []string{"n-c", "n-a"}}},
		{name: "explicit nodes beyond replicas are not checked", nodes: three, req: Requirement{Replicas: 2, Nodes: []string{"n-c", "n-a", "gone", "n-a"}}},
		{name: "explicit nodes shorter than replicas, rest from the pool", nodes: three, req: Requirement{Replicas: 3, Nodes: []string{"n-c"}}},
		{name: "explicit duplicate", nodes: three, req: Requirement{Replicas: 3, Nodes: []string{"n-a", "n-b", "n-a"}},
			wantErr:   `spec.placement.nodes[2]: Invalid value: "n-a": node "n-a" is already the node of ordinal 0 (spec.placement.nodes[0])`,
			wantField: "spec.placement.nodes[2]", wantValue: "n-a", wantWhy: ReasonDuplicate},
		{name: "explicit missing", nodes: three, req: Requirement{Replicas: 2, Nodes: []string{"n-a", "n-x"}},
			wantErr:   `spec.placement.nodes[1]: Invalid value: "n-x": node "n-x" does not exist`,
			wantField: "spec.placement.nodes[1]", wantValue: "n-x", wantWhy: ReasonMissing},
		{name: "explicit cordoned", nodes: mixed, req: Requirement{Replicas: 2, NodeSelector: local, Nodes: []string{"n-a", "n-d"}},
			wantErr:   `spec.placement.nodes[1]: Invalid value: "n-d": node "n-d" is not eligible: cordoned`,
			wantField: "spec.placement.nodes[1]", wantValue: "n-d", wantWhy: ReasonCordoned},
		{name: "explicit outside the selector", nodes: mixed, req: Requirement{Replicas: 1, NodeSelector: local, Nodes: []string{"n-f"}},
			wantErr:   `spec.placement.nodes[0]: Invalid value: "n-f": node "n-f" is not eligible: does not match nodeSelector disk=local`,
			wantField: "spec.placement.nodes[0]", wantValue: "n-f", wantWhy: ReasonSelector},
		{name: "explicit tainted", nodes: mixed, req: Requirement{Replicas: 1, NodeSelector: local, Nodes: []string{"n-e"}},
			wantErr:   `spec.placement.nodes[0]: Invalid value: "n-e": node "n-e" is not eligible: untolerated taint dedicated=db:NoSchedule`,
			wantField: "spec.placement.nodes[0]", wantValue: "n-e", wantWhy: ReasonTaint},
		{name: "explicit nodes fine but too many replicas", nodes: three, req: Requirement{Replicas: 4, Nodes: []string{"n-a", "n-b"}},
			wantErr: "spec.replicas: Invalid value: 4: only 3 of 3 nodes are eligible", wantField: "spec.replicas", wantValue: int32(4), wantWhy: ReasonInsufficient},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := verifyErr(tc.nodes, tc.req)
			agreeWithIndex(t, tc.nodes, tc.req)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify = nil, want %q", tc.wantErr)
			}
			if got := err.Error(); got != tc.wantErr {
				t.Errorf("Error() =\n%s\nwant\n%s", got, tc.wantErr)
			}
			if err.Field != tc.wantField || !reflect.DeepEqual(err.Value, tc.wantValue) || err.Reason != tc.wantWhy {
				t.Errorf("got field %q value %#v reason %q, want %q %#v %q", err.Field, err.Value, err.Reason, tc.wantField, tc.wantValue, tc.wantWhy)
			}
			fe := err.FieldError()
			if fe.Type != field.ErrorTypeInvalid || fe.Field != tc.wantField || !reflect.DeepEqual(fe.BadValue, tc.wantValue) || fe.Detail != err.Message {
				t.Errorf("FieldError() = %+v", fe)
			}
		})
	}
}

func TestCheckErrorWithoutPath(t *testing.T) {
	e := &CheckError{Field: "spec.replicas", Value: int32(2), Message: "no"}
	if got, want := e.Error(), "spec.replicas: Invalid value: 2: no"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestVerifyWarnings(t *testing.T) {
	notTolerated := []*corev1.Node{node("a"), node("b"), node("c", notReadyTainted)}
	tolerateNotReady := []corev1.Toleration{tol("node.kubernetes.io/not-ready", corev1.TolerationOpExists, "", "")}
	many := []*corev1.Node{node("a")}
	for _, name := range []string{"n5", "n1", "n4", "n2", "n3"} {
		many = append(many, node(name, ready(corev1.ConditionUnknown)))
	}
	tests := []struct {
		name     string
		nodes    []*corev1.Node
		req      Requirement
		wantErr  bool
		wantWarn []string
	}{
		{name: "all ready", nodes: []*corev1.Node{node("a"), node("b")}, req: Requirement{Replicas: 2}},
		{name: "NotReady excluded by its taint: refusal, no warning", nodes: notTolerated, req: Requirement{Replicas: 3}, wantErr: true},
		{name: "NotReady excluded by its taint: fits without it, no warning", nodes: notTolerated, req: Requirement{Replicas: 2}},
		{name: "NotReady tolerated and counted", nodes: notTolerated, req: Requirement{Replicas: 3, Tolerations: tolerateNotReady},
			wantWarn: []string{"1 of 3 eligible nodes is NotReady (c): members placed there wait until their node is Ready"}},
		{name: "NotReady eligible may be picked from the pool", nodes: notTolerated, req: Requirement{Replicas: 1, Tolerations: tolerateNotReady},
			wantWarn: []string{"1 of 3 eligible nodes is NotReady (c): members placed there wait until their node is Ready"}},
		{name: "explicit nodes avoid the NotReady node", nodes: notTolerated, req: Requirement{Replicas: 2, Nodes: []string{"a", "b"}, Tolerations: tolerateNotReady}},
		{name: "explicit NotReady node", nodes: notTolerated, req: Requirement{Replicas: 2, Nodes: []string{"c", "b"}, Tolerations: tolerateNotReady},
			wantWarn: []string{"1 of 3 eligible nodes is NotReady (c): members placed there wait until their node is Ready"}},
		{name: "many NotReady, sorted and bounded", nodes: many, req: Requirement{Replicas: 6},
			wantWarn: []string{"5 of 6 eligible nodes are NotReady (n1, n2, n3 and 2 more): members placed there wait until their node is Ready"}},
		{name: "zero replicas: nothing counted", nodes: many, req: Requirement{Replicas: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err, warns := Verify(tc.nodes, tc.req)
			agreeWithIndex(t, tc.nodes, tc.req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Verify error = %v, want error %v", err, tc.wantErr)
			}
			if !slices.Equal(warns, tc.wantWarn) {
				t.Errorf("warnings = %q, want %q", warns, tc.wantWarn)
			}
		})
	}
}

func TestRequirementFromFlock(t *testing.T) {
	replicas := int32(3)
	f := &v1alpha1.Flock{Spec: v1alpha1.FlockSpec{
		Replicas:  &replicas,
		Placement: v1alpha1.FlockPlacement{NodeSelector: map[string]string{"disk": "local"}, Nodes: []string{"a", "b"}},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{
			tol("dedicated", corev1.TolerationOpExists, "", ""),
		}}},
	}}
	want := Requirement{
		Replicas:     3,
		NodeSelector: map[string]string{"disk": "local"},
		Nodes:        []string{"a", "b"},
		Tolerations:  []corev1.Toleration{tol("dedicated", corev1.TolerationOpExists, "", "")},
	}
	if got := RequirementFromFlock(f); !reflect.DeepEqual(got, want) {
		t.Errorf("RequirementFromFlock = %+v, want %+v", got, want)
	}
	if got := RequirementFromFlock(&v1alpha1.Flock{}); got.Replicas != 1 {
		t.Errorf("nil replicas: Replicas = %d, want the default 1", got.Replicas)
	}
}

func TestAssign(t *testing.T) {
	pool := []*corev1.Node{node("n-d"), node("n-b"), node("n-a"), node("n-c"), node("x", cordoned)}
	// Three zones of two nodes each.
	zone := func(z string) nodeOpt { return labeled(corev1.LabelTopologyZone, z) }
	zoned := []*corev1.Node{
		node("a1", zone("za")), node("a2", zone("za")), node("b1", zone("zb")),
		node("b2", zone("zb")), node("c1", zone("zc")), node("c2", zone("zc")),
	}
	tests := []struct {
		name         string
		nodes        []*corev1.Node
		req          Requirement
		existing     map[int32]string
		usage        map[string]int
		want         map[int32]string
		wantUnplaced []int32
	}{
		{name: "ties broken by name", nodes: pool, req: Requirement{Replicas: 3},
			want: map[int32]string{0: "n-a", 1: "n-b", 2: "n-c"}},
		{name: "least used first", nodes: pool, req: Requirement{Replicas: 3},
			usage: map[string]int{"n-a": 2, "n-b": 1, "n-c": 0, "n-d": 1},
			want:  map[int32]string{0: "n-c", 1: "n-b", 2: "n-d"}},
		{name: "existing kept, their nodes not reused", nodes: pool, req: Requirement{Replicas: 3},
			existing: map[int32]string{1: "n-a"},
			want:     map[int32]string{0: "n-b", 1: "n-a", 2: "n-c"}},
		{name: "existing kept on an ineligible or vanished node", nodes: pool, req: Requirement{Replicas: 2},
			existing: map[int32]string{0: "x", 1: "gone"},
			want:     map[int32]string{0: "x", 1: "gone"}},
		{name: "ordinals beyond replicas dropped but their node stays used", nodes: pool, req: Requirement{Replicas: 2},
			existing: map[int32]string{0: "n-b", 3: "n-a"},
			want:     map[int32]string{0: "n-b", 1: "n-c"}},
		{name: "negative ordinals hold their nodes back and are not assigned", nodes: pool, req: Requirement{Replicas: 2},
			existing: map[int32]string{-1: "n-a", -2: "n-c"},
			want:     map[int32]string{0: "n-b", 1: "n-d"}},
		{name: "explicit nodes, rest least used", nodes: pool, req: Requirement{Replicas: 3, Nodes: []string{"n-d", "n-a"}},
			usage: map[string]int{"n-b": 5},
			want:  map[int32]string{0: "n-d", 1: "n-a", 2: "n-c"}},
		{name: "explicit node held by another ordinal stays unplaced", nodes: pool, req: Requirement{Replicas: 2, Nodes: []string{"n-a", "n-b"}},
			existing: map[int32]string{1: "n-a"},
			want:     map[int32]string{1: "n-a"}, wantUnplaced: []int32{0}},
		{name: "explicit ineligible or missing node stays unplaced", nodes: pool, req: Requirement{Replicas: 3, Nodes: []string{"x", "gone"}},
			want: map[int32]string{2: "n-a"}, wantUnplaced: []int32{0, 1}},
		{name: "not enough nodes", nodes: pool, req: Requirement{Replicas: 6},
			want:         map[int32]string{0: "n-a", 1: "n-b", 2: "n-c", 3: "n-d"},
			wantUnplaced: []int32{4, 5}},
		{name: "selector and tolerations apply", nodes: []*corev1.Node{
			node("a", labeled("disk", "local"), tainted("t", "", corev1.TaintEffectNoSchedule)),
			node("b", labeled("disk", "local"), tainted("u", "", corev1.TaintEffectNoSchedule)),
			node("c"),
		}, req: Requirement{Replicas: 2, NodeSelector: map[string]string{"disk": "local"}, Tolerations: []corev1.Toleration{tol("t", corev1.TolerationOpExists, "", "")}},
			want: map[int32]string{0: "a"}, wantUnplaced: []int32{1}},
		{name: "zero replicas", nodes: pool, req: Requirement{Replicas: 0}, existing: map[int32]string{0: "n-a"},
			want: map[int32]string{}},
		// Zones first, then usage, then name.
		{name: "one member per zone before a second in any", nodes: zoned, req: Requirement{Replicas: 3},
			want: map[int32]string{0: "a1", 1: "b1", 2: "c1"}},
		{name: "zones then least used within a zone", nodes: zoned, req: Requirement{Replicas: 3},
			usage: map[string]int{"a1": 3, "b1": 1, "b2": 1},
			want:  map[int32]string{0: "a2", 1: "c1", 2: "b1"}},
		{name: "a zone's emptiness beats a node's usage", nodes: zoned, req: Requirement{Replicas: 2},
			existing: map[int32]string{0: "a1"}, usage: map[string]int{"b1": 9, "b2": 9, "c1": 9, "c2": 9},
			want: map[int32]string{0: "a1", 1: "b1"}},
		{name: "second round once every zone has one", nodes: zoned, req: Requirement{Replicas: 5},
			want: map[int32]string{0: "a1", 1: "b1", 2: "c1", 3: "a2", 4: "b2"}},
		{name: "a member being removed counts in its zone", nodes: zoned, req: Requirement{Replicas: 2},
			existing: map[int32]string{5: "a1"},
			want:     map[int32]string{0: "b1", 1: "c1"}},
		{name: "explicit nodes count in their zones", nodes: zoned, req: Requirement{Replicas: 3, Nodes: []string{"c2"}},
			want: map[int32]string{0: "c2", 1: "a1", 2: "b1"}},
		{name: "nodes without a zone are one zone", nodes: append([]*corev1.Node{node("m1"), node("m2")}, zoned[:2]...), req: Requirement{Replicas: 3},
			want: map[int32]string{0: "a1", 1: "m1", 2: "a2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, unplaced := Assign(tc.nodes, tc.req, tc.existing, tc.usage)
			if !reflect.DeepEqual(got, tc.want) || !slices.Equal(unplaced, tc.wantUnplaced) {
				t.Errorf("Assign = %v unplaced %v, want %v unplaced %v", got, unplaced, tc.want, tc.wantUnplaced)
			}
			// Invariant: no node holds two members of the Flock.
			seen := map[string]int32{}
			for ord, n := range got {
				if prev, dup := seen[n]; dup {
					t.Errorf("node %s holds ordinals %d and %d", n, prev, ord)
				}
				seen[n] = ord
			}
			// Deterministic: the order of nodes does not matter.
			rev := slices.Clone(tc.nodes)
			slices.Reverse(rev)
			got2, unplaced2 := Assign(rev, tc.req, tc.existing, tc.usage)
			if !reflect.DeepEqual(got, got2) || !slices.Equal(unplaced, unplaced2) {
				t.Errorf("Assign depends on node order: %v %v vs %v %v", got, unplaced, got2, unplaced2)
			}
		})
	}
}

// TestAssignAgreesWithVerify: whatever Verify accepts, Assign places completely
// from scratch.
func TestAssignAgreesWithVerify(t *testing.T) {
	nodes := benchNodes(200)
	reqs := []Requirement{
		{Replicas: 150},
		{Replicas: 150, NodeSelector: map[string]string{"disk": "local"}},
		{Replicas: 170, NodeSelector: map[string]string{"disk": "local"}, Tolerations: benchTolerations},
		{Replicas: 5, Nodes: []string{"node-00010", "node-00020"}, Tolerations: benchTolerations},
	}
	for i, r := range reqs {
		for _, replicas := range []int32{r.Replicas / 2, r.Replicas, r.Replicas + 30} {
			r.Replicas = replicas
			err := verifyErr(nodes, r)
			_, unplaced := Assign(nodes, r, nil, nil)
			if (err == nil) != (len(unplaced) == 0) {
				t.Errorf("requirement %d replicas %d: Verify = %v but Assign left %d unplaced", i, replicas, err, len(unplaced))
			}
		}
	}
}

var benchTolerations = []corev1.Toleration{
	tol("dedicated", corev1.TolerationOpEqual, "db", corev1.TaintEffectNoSchedule),
	tol("node.kubernetes.io/unreachable", corev1.TolerationOpExists, "", corev1.TaintEffectNoExecute),
}

// benchNodes builds a realistic cluster: every node has the usual labels; 90%
// carry disk=local; 2% are cordoned; 5% carry dedicated=db:NoSchedule; 1% are
// NotReady with the lifecycle taints; 1% have a PreferNoSchedule taint.
func benchNodes(n int) []*corev1.Node {
	nodes := make([]*corev1.Node, 0, n)
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		opts := []nodeOpt{labeled(
			"kubernetes.io/hostname", name,
			"kubernetes.io/os", "linux",
			"kubernetes.io/arch", "amd64",
			"topology.kubernetes.io/zone", fmt.Sprintf("zone-%d", i%3),
			"node.kubernetes.io/instance-type", "m5.large",
		)}
		if i%10 != 0 {
			opts = append(opts, labeled("disk", "local"))
		}
		switch {
		case i%50 == 1:
			opts = append(opts, cordoned)
		case i%20 == 2:
			opts = append(opts, tainted("dedicated", "db", corev1.TaintEffectNoSchedule))
		case i%100 == 3:
			opts = append(opts, notReadyTainted)
		case i%100 == 4:
			opts = append(opts, tainted("spot", "true", corev1.TaintEffectPreferNoSchedule))
		}
		nodes = append(nodes, node(name, opts...))
	}
	return nodes
}

// TestVerifyAllocations pins the performance property the benchmark measures:
// Verify allocates a small constant amount, never per node.
func TestVerifyAllocations(t *testing.T) {
	small, large := benchNodes(100), benchNodes(5000)
	for _, r := range []Requirement{
		{Replicas: 3, NodeSelector: map[string]string{"disk": "local"}, Tolerations: benchTolerations},
		{Replicas: 3, Nodes: []string{"node-00005", "node-00006"}},
	} {
		a := testing.AllocsPerRun(20, func() { _ = verifyErr(small, r) })
		b := testing.AllocsPerRun(20, func() { _ = verifyErr(large, r) })
		if b > a || b > 8 {
			t.Errorf("Verify allocations: %v with 100 nodes, %v with 5000; want a small constant", a, b)
		}
	}
}

func TestVerifyMessageOnBenchCluster(t *testing.T) {
	err := verifyErr(benchNodes(5000), Requirement{Replicas: 5000, NodeSelector: map[string]string{"disk": "local"}})
	if err == nil {
		t.Fatal("Verify accepted 5000 replicas")
	}
	for _, want := range []string{"spec.replicas: Invalid value: 5000: only ", " of 5000 nodes are eligible (nodeSelector disk=local excludes 500; ",
		" cordoned; ", " have untolerated taint dedicated=db:NoSchedule", " have untolerated taint node.kubernetes.io/not-ready:NoSchedule"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err.Error(), want)
		}
	}
}

var (
	sinkErr      *CheckError
	sinkWarnings []string
)

// verifyErr is Verify's refusal alone.
func verifyErr(nodes []*corev1.Node, r Requirement) *CheckError {
	err, _ := Verify(nodes, r)
	return err
}

// BenchmarkVerify5000Nodes measures the admission check over 5,000 nodes. Read
// it against BenchmarkAnchorLabelSelectorMatch5000, a plain label selector
// match over the same nodes.
func BenchmarkVerify5000Nodes(b *testing.B) {
	nodes := benchNodes(5000)
	r := Requirement{Replicas: 3, NodeSelector: map[string]string{"disk": "local"}, Tolerations: benchTolerations}
	b.ReportAllocs()
	for b.Loop() {
		sinkErr, sinkWarnings = Verify(nodes, r)
	}
	if sinkErr != nil {
		b.Fatal(sinkErr)
	}
}

// BenchmarkVerify5000NodesRefused is the refusal path, which also formats the message.
func BenchmarkVerify5000NodesRefused(b *testing.B) {
	nodes := benchNodes(5000)
	r := Requirement{Replicas: 5000, NodeSelector: map[string]string{"disk": "local"}, Tolerations: benchTolerations}
	b.ReportAllocs()
	for b.Loop() {
		sinkErr, sinkWarnings = Verify(nodes, r)
	}
	if sinkErr == nil {
		b.Fatal("not refused")
	}
}

var sinkCount int

// BenchmarkAnchorLabelSelectorMatch5000 is the anchor: one labels.Selector,
// built once, matched against the labels of the same 5,000 nodes.
func BenchmarkAnchorLabelSelectorMatch5000(b *testing.B) {
	nodes := benchNodes(5000)
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

// BenchmarkAssign5000Nodes places 100 new members over 5,000 nodes.
func BenchmarkAssign5000Nodes(b *testing.B) {
	nodes := benchNodes(5000)
	r := Requirement{Replicas: 100, NodeSelector: map[string]string{"disk": "local"}, Tolerations: benchTolerations}
	b.ReportAllocs()
	for b.Loop() {
		_, unplaced := Assign(nodes, r, nil, nil)
		sinkCount = len(unplaced)
	}
}

func TestRaises(t *testing.T) {
	exists := tol("dedicated", corev1.TolerationOpExists, "", "")
	equal := tol("gpu", "", "a100", corev1.TaintEffectNoSchedule)
	base := Requirement{
		Replicas:     3,
		NodeSelector: map[string]string{"disk": "local", "zone": "z1"},
		Nodes:        []string{"a", "b"},
		Tolerations:  []corev1.Toleration{exists, equal},
	}
	with := func(f func(r *Requirement)) Requirement {
		r := base
		r.NodeSelector = maps.Clone(base.NodeSelector)
		r.Nodes = slices.Clone(base.Nodes)
		r.Tolerations = slices.Clone(base.Tolerations)
		f(&r)
		return r
	}
	tests := []struct {
		name string
		next Requirement
		want bool
	}{
		{"unchanged", with(func(*Requirement) {}), false},
		{"more replicas", with(func(r *Requirement) { r.Replicas = 4 }), true},
		{"fewer replicas", with(func(r *Requirement) { r.Replicas = 1 }), false},
		{"selector label added", with(func(r *Requirement) { r.NodeSelector["ssd"] = "yes" }), true},
		{"selector value changed", with(func(r *Requirement) { r.NodeSelector["zone"] = "z2" }), true},
		{"selector label removed (wider pool)", with(func(r *Requirement) { delete(r.NodeSelector, "zone") }), false},
		{"selector removed", with(func(r *Requirement) { r.NodeSelector = nil }), false},
		{"toleration dropped", with(func(r *Requirement) { r.Tolerations = r.Tolerations[:1] }), true},
		{"toleration changed", with(func(r *Requirement) { r.Tolerations[0].Key = "other" }), true},
		{"toleration added", with(func(r *Requirement) {
			r.Tolerations = append(r.Tolerations, tol("x", corev1.TolerationOpExists, "", ""))
		}), false},
		{"tolerations reordered, operator spelled out, seconds set", with(func(r *Requirement) {
			secs := int64(30)
			e := equal
			e.Operator = corev1.TolerationOpEqual
			e.TolerationSeconds = &secs
			r.Tolerations = []corev1.Toleration{e, exists}
		}), false},
		{"explicit node changed", with(func(r *Requirement) { r.Nodes[1] = "c" }), true},
		{"explicit node added for an existing ordinal", with(func(r *Requirement) { r.Nodes = append(r.Nodes, "c") }), true},
		{"explicit node added beyond replicas", with(func(r *Requirement) { r.Replicas = 2; r.Nodes = append(r.Nodes, "c") }), false},
		{"explicit nodes dropped (pool instead)", with(func(r *Requirement) { r.Nodes = nil }), false},
		{"fewer replicas and a changed node beyond them", with(func(r *Requirement) { r.Replicas = 1; r.Nodes[1] = "z" }), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Raises(base, tc.next); got != tc.want {
				t.Errorf("Raises = %v, want %v", got, tc.want)
			}
		})
	}
}

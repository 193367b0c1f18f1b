package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func indexOf(nodes []*corev1.Node) *NodeIndex {
	x := NewNodeIndex()
	for _, n := range nodes {
		x.Set(n)
	}
	return x
}

// agreeWithIndex fails t when a NodeIndex of nodes answers r other than
// Verify over nodes.
func agreeWithIndex(t *testing.T, nodes []*corev1.Node, r Requirement) {
	t.Helper()
	wantErr, wantWarn := Verify(nodes, r)
	gotErr, gotWarn := indexOf(nodes).Verify(r)
	if !reflect.DeepEqual(gotErr, wantErr) || !reflect.DeepEqual(gotWarn, wantWarn) {
		t.Errorf("NodeIndex.Verify = %v, %q; Verify = %v, %q", gotErr, gotWarn, wantErr, wantWarn)
	}
}

// TestNodeIndexAgreesWithVerify builds random clusters, changes them node by
// node (relabel, cordon, taint, NotReady, delete, re-add; slots are reused and
// label sets grow past the small-posting size and shrink again) and checks
// after each change that the index answers random requirements as Verify
// does over the same nodes.
func TestNodeIndexAgreesWithVerify(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 5000))
	taints := []corev1.Taint{
		{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule},
		{Key: "gpu", Effect: corev1.TaintEffectNoExecute},
		{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
	}
	tolerations := []corev1.Toleration{
		tol("dedicated", corev1.TolerationOpEqual, "db", corev1.TaintEffectNoSchedule),
		tol("gpu", corev1.TolerationOpExists, "", ""),
		tol("node.kubernetes.io/not-ready", corev1.TolerationOpExists, "", ""),
	}
	randomNode := func(name string) *corev1.Node {
		opts := []nodeOpt{labeled("kubernetes.io/hostname", name, "zone", fmt.Sprintf("z%d", rng.IntN(3)))}
		if rng.IntN(4) != 0 {
			opts = append(opts, labeled("disk", "local"))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, labeled("ssd", "yes"))
		}
		if rng.IntN(8) == 0 {
			opts = append(opts, cordoned)
		}
		for _, taint := range taints {
			if rng.IntN(6) == 0 {
				opts = append(opts, tainted(taint.Key, taint.Value, taint.Effect))
			}
		}
		if rng.IntN(6) == 0 {
			opts = append(opts, ready(corev1.ConditionFalse))
		}
		return node(name, opts...)
	}
	randomRequirement := func(names []string) Requirement {
		r := Requirement{Replicas: int32(rng.IntN(len(names) + 2))}
		switch rng.IntN(4) {
		case 1:
			r.NodeSelector = map[string]string{"disk": "local"}
		case 2:
			r.NodeSelector = map[string]string{"disk": "local", "zone": fmt.Sprintf("z%d", rng.IntN(4))}
		case 3:
			r.NodeSelector = map[string]string{"kubernetes.io/hostname": names[rng.IntN(len(names))], "absent": "x"}
		}
		for _, tl := range tolerations {
			if rng.IntN(2) == 0 {
				r.Tolerations = append(r.Tolerations, tl)
			}
		}
		if rng.IntN(3) == 0 {
			for range rng.IntN(4) + 1 {
				if rng.IntN(8) == 0 {
					r.Nodes = append(r.Nodes, "missing")
				} else {
					r.Nodes = append(r.Nodes, names[rng.IntN(len(names))])
				}
			}
		}
		return r
	}

	const size = 60
	names := make([]string, size)
	current := map[string]*corev1.Node{}
	x := NewNodeIndex()
	for i := range names {
		names[i] = fmt.Sprintf("n%02d", i)
		current[names[i]] = randomNode(names[i])
		x.Set(current[names[i]])
	}
	for step := range 400 {
		name := names[rng.IntN(size)]
		if _, ok := current[name]; ok && rng.IntN(4) == 0 {
			delete(current, name)
			x.Delete(name)
		} else {
			current[name] = randomNode(name)
			x.Set(current[name])
		}
		nodes := make([]*corev1.Node, 0, len(current))
		for _, n := range names {
			if current[n] != nil {
				nodes = append(nodes, current[n])
			}
		}
		if x.Len() != len(nodes) {
			t.Fatalf("step %d: index holds %d nodes, want %d", step, x.Len(), len(nodes))
		}
		for range 5 {
			r := randomRequirement(names)
			wantErr, wantWarn := Verify(nodes, r)
			gotErr, gotWarn := x.Verify(r)
			if !reflect.DeepEqual(gotErr, wantErr) || !reflect.DeepEqual(gotWarn, wantWarn) {
				t.Fatalf("step %d, requirement %+v:\nindex  %v %q\nVerify %v %q", step, r, gotErr, gotWarn, wantErr, wantWarn)
			}
		}
	}
}

// BenchmarkNodeIndexVerify5000Nodes is BenchmarkVerify5000Nodes answered by
// a NodeIndex of the same nodes; read it against the same anchor.
func BenchmarkNodeIndexVerify5000Nodes(b *testing.B) {
	x := indexOf(benchNodes(5000))
	r := Requirement{Replicas: 3, NodeSelector: map[string]string{"disk": "local"}, Tolerations: benchTolerations}
	b.ReportAllocs()
	for b.Loop() {
		sinkErr, sinkWarnings = x.Verify(r)
	}
	if sinkErr != nil {
		b.Fatal(sinkErr)
	}
}

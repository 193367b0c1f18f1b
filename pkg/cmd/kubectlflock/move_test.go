package kubectlflock

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockfake "flock.dev/flock/pkg/generated/clientset/versioned/fake"
)

func TestPickTarget(t *testing.T) {
	node := func(name string, mutate ...func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		for _, m := range mutate {
			m(n)
		}
		return n
	}
	flock := func(name string, uid string, members map[int32]string) *v1alpha1.Flock {
		f := &v1alpha1.Flock{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: ktypes.UID("uid-" + uid)}}
		replicas := int32(len(members))
		f.Spec.Replicas = &replicas
		for ord := range int32(len(members)) {
			f.Status.Members = append(f.Status.Members, v1alpha1.FlockMember{Ordinal: ord, Node: members[ord]})
		}
		return f
	}
	web := flock("web", "web", map[int32]string{0: "n-a", 1: "n-b", 2: "n-c"})
	// db uses n-d; n-e is free but cordoned; n-f is NotReady; n-g is free.
	db := flock("db", "db", map[int32]string{0: "n-d"})
	nodes := []runtime.Object{node("n-a"), node("n-b"), node("n-c"), node("n-d"),
		node("n-e", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		node("n-f", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }),
		node("n-g")}
	c := &clients{kube: kubefake.NewClientset(nodes...), flock: flockfake.NewSimpleClientset(web, db), namespace: "ns"}

	to, err := pickTarget(context.Background(), c, web, 1)
	if err != nil || to != "n-g" {
		t.Fatalf("pickTarget = %q, %v; want n-g (free, eligible, Ready, unused)", to, err)
	}
	// With n-g taken by another member's pending move, the least used
	// free node is n-d (one member of db).
	moving := web.DeepCopy()
	moving.Status.Members[0].Move = &v1alpha1.FlockMemberMove{Node: "n-g"}
	if to, err := pickTarget(context.Background(), c, moving, 1); err != nil || to != "n-d" {
		t.Fatalf("pickTarget = %q, %v; want n-d", to, err)
	}
	if _, err := pickTarget(context.Background(), c, web, 5); err == nil {
		t.Error("pickTarget of an unplaced member succeeded")
	}
}

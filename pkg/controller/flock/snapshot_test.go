package flock

// Helpers of the decision tests: a snapshot built by hand (no client, no
// fixture), nodes and pods.

import (
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

var decisionNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// testSnapshot returns the snapshot of a sync of f at decisionNow, in a
// cluster of nodes, with f's members recorded as members says (ordinal ->
// node). mutate, when given, changes the snapshot before it is returned.
func testSnapshot(t *testing.T, f *v1alpha1.Flock, members map[int32]string, nodes []*corev1.Node, mutate ...func(*snapshot)) *snapshot {
	t.Helper()
	f = f.DeepCopy()
	for _, ord := range slices.Sorted(maps.Keys(members)) {
		f.Status.Members = append(f.Status.Members, v1alpha1.FlockMember{Ordinal: ord, Node: members[ord], Pod: PodName(f.Name, ord)})
	}
	sel, err := metav1.LabelSelectorAsSelector(f.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	s := &snapshot{
		flock: f, now: decisionNow, selector: sel,
		members: membersByOrdinal(f.Status.Members), pods: map[int32]*corev1.Pod{},
		nodeList: nodes, nodes: map[string]*corev1.Node{},
		lostSince: map[string]time.Time{},
		nameTaken: map[int32]bool{}, volumes: map[int32]*corev1.PersistentVolume{},
	}
	for _, n := range nodes {
		s.nodes[n.Name] = n
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func testNodes(names ...string) []*corev1.Node {
	var nodes []*corev1.Node
	for _, name := range names {
		nodes = append(nodes, newNode(name))
	}
	return nodes
}

// testPod returns pod <flock>-<ordinal> bound to node, controlled by f when
// owned, labelled with labels.
func testPod(f *v1alpha1.Flock, ordinal int32, node string, owned bool, labels map[string]string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: PodName(f.Name, ordinal), Namespace: f.Namespace, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node},
	}
	if owned {
		pod.OwnerReferences = []metav1.OwnerReference{*newControllerRef(f)}
	}
	return pod
}

// testMemberPod is testPod controlled by f, terminating (since
// decisionNow) when terminating is set.
func testMemberPod(f *v1alpha1.Flock, ordinal int32, node string, terminating bool) *corev1.Pod {
	p := testPod(f, ordinal, node, true, nil)
	if terminating {
		p.DeletionTimestamp = &metav1.Time{Time: decisionNow}
	}
	return p
}

// withDataVolume gives pod the data volume of its member of f.
func withDataVolume(f *v1alpha1.Flock, pod *corev1.Pod) *corev1.Pod {
	ord, _ := ParseOrdinal(f.Name, pod.Name)
	member := NewMemberPod(f, v1alpha1.FlockMember{Ordinal: ord, Node: pod.Spec.NodeName}, "")
	pod.Spec.Volumes = member.Spec.Volumes
	return pod
}

func ptrName(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	return p.Name
}

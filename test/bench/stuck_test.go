package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockfake "flock.dev/flock/pkg/generated/clientset/versioned/fake"
)

func TestStuckReportNamesTheMembersThatWereNotReady(t *testing.T) {
	const ns = "ready-3-0-flock"
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	kube := kubefake.NewClientset(
		&corev1.Pod{ObjectMeta: meta("r-0-0"), Spec: corev1.PodSpec{NodeName: "kwok-0"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
		&corev1.Pod{ObjectMeta: meta("r-0-1"),
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes are available"}}}},
		&corev1.Event{ObjectMeta: meta("e1"), Type: corev1.EventTypeWarning, Reason: "FailedScheduling", Count: 2,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "r-0-1"}, Message: "0/2 nodes are available"},
		&corev1.Event{ObjectMeta: meta("e2"), Type: corev1.EventTypeNormal, Reason: "Scheduled",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "r-0-0"}},
	)
	flocks := flockfake.NewClientset(&flockv1alpha1.Flock{ObjectMeta: meta("r-0"), Status: flockv1alpha1.FlockStatus{Members: []flockv1alpha1.FlockMember{
		{Ordinal: 0, Node: "kwok-0", Ready: true},
		{Ordinal: 1, Node: "kwok-1", Message: "pod is Pending and not Ready"},
		{Ordinal: 2, Node: "kwok-2", Message: "waiting for its claim to be bound"},
	}}})
	got := strings.Join(kindClients{kube: kube, flock: flocks}.stuckReport(context.Background(), tFlock, ns, 3), "\n")
	for _, want := range []string{
		"2 member pods, 1 Ready, 1 members have no pod",
		"pod r-0-1 on (no node), Pending; PodScheduled=False Unschedulable 0/2 nodes are available",
		"Flock status: 2 members not Ready",
		"member r-0/2 on kwok-2: waiting for its claim to be bound",
		"1 warning events",
		"warning FailedScheduling Pod/r-0-1 x2: 0/2 nodes are available",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "r-0-0 on") || strings.Contains(got, "Scheduled Pod") {
		t.Errorf("the report names a Ready pod or a normal event:\n%s", got)
	}
}

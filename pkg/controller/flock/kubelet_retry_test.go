package flock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	flockfake "flock.dev/flock/pkg/generated/clientset/versioned/fake"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
)

// kubeletRefusal is kubelet's FailedMount event for pod when the node
// authorizer refused it the pod's claim.
func kubeletRefusal(pod *corev1.Pod, name string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
		Reason:         "FailedMount",
		Type:           corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "kubelet", Host: "real-1"},
		Count:          1,
		Message: fmt.Sprintf(`Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC %s/data-%s: failed to fetch PVC from API server: persistentvolumeclaims "data-%s" is forbidden: User "system:node:real-1" cannot get resource "persistentvolumeclaims" in API group "" in the namespace "%s": node: no relationship found between node 'real-1' and this object`,
			pod.Namespace, pod.Name, pod.Name, pod.Namespace),
	}
}

func memberPod(name string, uid types.UID) *corev1.Pod {
	fl := newFlock("pg", 3)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: uid,
			OwnerReferences: []metav1.OwnerReference{*newControllerRef(fl)}},
		Spec:   corev1.PodSpec{NodeName: "real-1"},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// startPodRetries runs a PodRetryController on client's informers until
// ctx ends.
func startPodRetries(ctx context.Context, t *testing.T, client *k8sfake.Clientset) *record.FakeRecorder {
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(10)
	c, err := NewPodRetryController(ctx, client, factory.Core().V1().Events().Informer(), factory.Core().V1().Pods(), factory.Core().V1().PersistentVolumeClaims(), recorder)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
		factory.Shutdown()
	})
	return recorder
}

// TestKubeletRetry: kubelet's FailedMount event for a member pod whose
// claim the node authorizer refused gets the pod annotated (kubelet syncs a
// pod whose annotations change at once, instead of after its 10-15 s
// backoff), once per failure, at most maxKubeletRetries times, with an event
// on the Flock; other events, other pods and started pods get nothing.
func TestKubeletRetry(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	stuck := memberPod("pg-0", "uid-stuck")
	started := memberPod("pg-1", "uid-started")
	started.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: testNamespace, UID: "uid-other"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	client := k8sfake.NewClientset(stuck, started, other)
	recorder := startPodRetries(ctx, t, client)

	annotation := func(name string) string {
		pod, err := client.CoreV1().Pods(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pod.Annotations[AnnotationKubeletRetry]
	}
	waitFor := func(name, want string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return annotation(name) == want, nil
		}); err != nil {
			t.Fatalf("pod %s: annotation %s = %q, want %q", name, AnnotationKubeletRetry, annotation(name), want)
		}
	}

	// Not retried: a started member, a pod no Flock controls, another
	// kubelet failure of a member.
	unrelated := kubeletRefusal(stuck, "ev-other-message")
	unrelated.Message = "Unable to attach or mount volumes: unmounted volumes=[data]: timed out waiting for the condition"
	for _, ev := range []*corev1.Event{kubeletRefusal(started, "ev-started"), kubeletRefusal(other, "ev-other"), unrelated} {
		if _, err := client.CoreV1().Events(testNamespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Retried: the stuck member, once per failure.
	ev, err := client.CoreV1().Events(testNamespace).Create(ctx, kubeletRefusal(stuck, "ev-stuck"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor("pg-0", "1")
	if got := <-recorder.Events; !strings.HasPrefix(got, "Normal "+ReasonKubeletRetried) || !strings.Contains(got, "pg-0") || !strings.Contains(got, "real-1") {
		t.Errorf("event %q, want a Normal %s event naming the pod and its node", got, ReasonKubeletRetried)
	}
	for n := 2; n <= maxKubeletRetries+1; n++ {
		ev.Count = int32(n)
		ev.ResourceVersion = fmt.Sprint(n)
		if ev, err = client.CoreV1().Events(testNamespace).Update(ctx, ev, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if n <= maxKubeletRetries {
			waitFor("pg-0", fmt.Sprint(n))
		}
	}
	// The last failure asks for nothing more; neither do the others.
	time.Sleep(200 * time.Millisecond)
	if got := annotation("pg-0"); got != fmt.Sprint(maxKubeletRetries) {
		t.Errorf("after %d failures the annotation is %q, want %d (no more retries)", maxKubeletRetries+1, got, maxKubeletRetries)
	}
	for _, name := range []string{"pg-1", "web-0"} {
		if got := annotation(name); got != "" {
			t.Errorf("pod %s was asked to retry (%q)", name, got)
		}
	}
	if got := len(recorder.Events); got != maxKubeletRetries-1 {
		t.Errorf("%d more events, want %d (one per retry)", got, maxKubeletRetries-1)
	}
}

// TestDisruptionBudgetsInALaterTerm: after a lost lease, the next term of
// the budget controller keeps budgets again (each term had its queue shut
// down when it ended).
func TestDisruptionBudgetsInALaterTerm(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kubeClient := k8sfake.NewClientset()
	flockClient := flockfake.NewSimpleClientset()
	kubeFactory := informers.NewSharedInformerFactory(kubeClient, 0)
	flockFactory := flockinformers.NewSharedInformerFactory(flockClient, 0)
	c, err := NewDisruptionBudgetController(ctx, kubeClient, flockClient, flockFactory.Flock().V1alpha1().Flocks(),
		kubeFactory.Policy().V1().PodDisruptionBudgets(), kubeFactory.Core().V1().Namespaces(), record.NewFakeRecorder(100))
	if err != nil {
		t.Fatal(err)
	}
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	kubeFactory.Start(stop.Done())
	flockFactory.Start(stop.Done())

	budgetOf := func(name string) {
		t.Helper()
		fl := newFlock(name, 3)
		fl.Status.Replicas = 3 // its member pods exist
		if _, err := flockClient.FlockV1alpha1().Flocks(testNamespace).Create(ctx, fl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			_, err := kubeClient.PolicyV1().PodDisruptionBudgets(testNamespace).Get(ctx, name, metav1.GetOptions{})
			return err == nil, nil
		}); err != nil {
			t.Fatalf("no PodDisruptionBudget for Flock %s", name)
		}
	}
	for term, name := range []string{"first", "second"} {
		termCtx, endTerm := context.WithCancel(stop)
		done := make(chan struct{})
		go func() { defer close(done); c.Run(termCtx, 1) }()
		budgetOf(name)
		endTerm()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("term %d did not end", term+1)
		}
	}
}

// TestSchedulerRetry: a member pod that kube-scheduler refused for an
// unbound claim while its claim is Bound gets the claim annotated (an update
// of the claim, on which the scheduler tries the pod again), again after
// each delay while it stays refused, at most MaxSchedulerRetries times, with
// an event on the Flock. A pod whose claim is not Bound yet waits for it,
// unless it was refused longer ago than the scheduler's own flush; a pod
// refused for another reason or placed gets nothing.
func TestSchedulerRetry(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Put back once the controller has stopped (startPodRetries' cleanup
	// comes first).
	delay := schedulerRetryDelay
	t.Cleanup(func() { schedulerRetryDelay = delay })
	schedulerRetryDelay = 20 * time.Millisecond

	refused := func(name string, uid types.UID, message string) (*corev1.Pod, *corev1.PersistentVolumeClaim) {
		pod := memberPod(name, uid)
		pod.Spec.NodeName = ""
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}}}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: message, LastTransitionTime: metav1.Now()}}
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-" + name, Namespace: testNamespace, UID: uid + "-claim",
				Annotations: map[string]string{annBindCompleted: "yes"}},
			Spec:   corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
		}
		return pod, claim
	}
	const refusal = "0/1000 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found"
	stuck, stuckClaim := refused("pg-0", "uid-stuck", refusal)
	unbound, unboundClaim := refused("pg-1", "uid-unbound", refusal)
	unboundClaim.Annotations, unboundClaim.Status.Phase = nil, corev1.ClaimPending
	other, otherClaim := refused("pg-2", "uid-other", "0/3 nodes are available: 1 node(s) had untolerated taint(s)")
	placed, placedClaim := refused("pg-3", "uid-placed", refusal)
	placed.Spec.NodeName = "kwok-3"
	// Refused longer ago than the scheduler's flush: not looked at again.
	old, oldClaim := refused("pg-4", "uid-old", refusal)
	old.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now().Add(-2 * schedulerFlush))
	oldClaim.Annotations, oldClaim.Status.Phase = nil, corev1.ClaimPending
	client := k8sfake.NewClientset(stuck, stuckClaim, unbound, unboundClaim, other, otherClaim, placed, placedClaim, old, oldClaim)
	recorder := startPodRetries(ctx, t, client)

	annotation := func(name string) string {
		claim, err := client.CoreV1().PersistentVolumeClaims(testNamespace).Get(ctx, "data-"+name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return claim.Annotations[AnnotationSchedulerRetry]
	}
	waitFor := func(name, want string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return annotation(name) == want, nil
		}); err != nil {
			t.Fatalf("claim of %s: retry annotation %q, want %q", name, annotation(name), want)
		}
	}
	// Refused all along: retried after each delay, MaxSchedulerRetries times.
	waitFor("pg-0", strconv.Itoa(MaxSchedulerRetries))
	time.Sleep(10 * schedulerRetryDelay)
	if got := annotation("pg-0"); got != strconv.Itoa(MaxSchedulerRetries) {
		t.Errorf("claim of pg-0: retry annotation %q after the last retry, want %d", got, MaxSchedulerRetries)
	}
	for i := 1; i <= MaxSchedulerRetries; i++ {
		select {
		case e := <-recorder.Events:
			if !strings.Contains(e, ReasonSchedulerRetried) || !strings.Contains(e, "pod pg-0") || !strings.Contains(e, "claim data-pg-0 is Bound") {
				t.Errorf("event %d: %q", i, e)
			}
		default:
			t.Errorf("event %d of %d missing", i, MaxSchedulerRetries)
		}
	}
	// Not Bound: nothing until its binding completes.
	if got := annotation("pg-1"); got != "" {
		t.Errorf("claim of pg-1 (not Bound) annotated %q", got)
	}
	for _, claim := range []*corev1.PersistentVolumeClaim{unboundClaim, oldClaim} {
		claim.Annotations = map[string]string{annBindCompleted: "yes"}
		claim.Status.Phase = corev1.ClaimBound
		if _, err := client.CoreV1().PersistentVolumeClaims(testNamespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("pg-1", "1")
	time.Sleep(10 * schedulerRetryDelay)
	for _, name := range []string{"pg-2", "pg-3", "pg-4"} {
		if got := annotation(name); got != "" {
			t.Errorf("claim of %s annotated %q", name, got)
		}
	}
}

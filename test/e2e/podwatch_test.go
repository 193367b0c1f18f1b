package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// podEvent is one pod watch event, with a copy of the pod.
type podEvent struct {
	Type watch.EventType
	Pod  *corev1.Pod
	At   time.Time
}

// podRecorder records the pod events of a namespace that a label selector
// matches, from a watch.
type podRecorder struct {
	mu     sync.Mutex
	list   []podEvent
	closed error
}

// watchPods records pod events in ns (selector may be "") from now until
// the test ends.
func watchPods(t *testing.T, ns, selector string) *podRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := env.Kube.CoreV1().Pods(ns).List(ctxFor(t), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w, err := env.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &podRecorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			r.mu.Lock()
			if ok {
				r.list = append(r.list, podEvent{Type: ev.Type, Pod: pod.DeepCopy(), At: time.Now()})
			} else {
				r.closed = fmt.Errorf("watch event %s: %v", ev.Type, ev.Object)
			}
			r.mu.Unlock()
		}
		r.mu.Lock()
		if r.closed == nil && ctx.Err() == nil {
			r.closed = fmt.Errorf("the pod watch of %s ended early", ns)
		}
		r.mu.Unlock()
	}()
	t.Cleanup(func() {
		w.Stop()
		cancel()
		<-done
	})
	return r
}

// events returns the events so far; a watch that broke fails the test.
func (r *podRecorder) events(t *testing.T) []podEvent {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed != nil {
		t.Fatalf("pod watch: %v", r.closed)
	}
	return slices.Clone(r.list)
}

// String lists the events, one a line, for failure messages.
func (r *podRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, e := range r.list {
		p := e.Pod
		fmt.Fprintf(&b, "  %s %-8s %s uid=%s rev=%s node=%q phase=%s ready=%v deleting=%v\n", e.At.Format("15:04:05.000"), e.Type, p.Name,
			p.UID, p.Labels[flockv1alpha1.LabelRevision], p.Spec.NodeName, p.Status.Phase, podReady(p), p.DeletionTimestamp != nil)
	}
	return b.String()
}

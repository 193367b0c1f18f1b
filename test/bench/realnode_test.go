// File realnode_test.go: unit tests of the real-node case's pure parts: the
// steps the timeline reads from watch events, and its rows.

package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestTimelineSteps(t *testing.T) {
	tl := &timeline{seen: map[string]map[string]time.Time{}}
	start := time.Now()
	pod := func(name, node string, running, ready bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}}
		if running {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	tl.memberPod(watch.Event{Type: watch.Added, Object: pod("m-0", "", false, false)})
	tl.memberPod(watch.Event{Type: watch.Modified, Object: pod("m-0", "real-1", true, true)})
	tl.memberPod(watch.Event{Type: watch.Added, Object: pod("m-1", "real-2", false, false)})
	// A helper that is deleted before the watch shows it Succeeded is done.
	tl.helperPod(watch.Event{Type: watch.Added, Object: pod("h-0", "real-1", false, false)})
	tl.helperPod(watch.Event{Type: watch.Deleted, Object: pod("h-0", "real-1", false, false)})
	// One whose container exited 0 is done before its phase is Succeeded;
	// one that exited 1 is not.
	exited := func(code int32) *corev1.Pod {
		p := pod("h-1", "real-2", false, false)
		p.Spec.RestartPolicy = corev1.RestartPolicyNever // as every helper's
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
		return p
	}
	tl.helperPod(watch.Event{Type: watch.Modified, Object: exited(1)})
	if _, ok := tl.seen[stepHelperDone]["h-1"]; ok {
		t.Error("a helper whose container exited 1 counted as done")
	}
	tl.helperPod(watch.Event{Type: watch.Modified, Object: exited(0)})
	pending := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-m-0"}}
	tl.claim(watch.Event{Type: watch.Added, Object: pending})

	got := tl.last(start, 2)
	for _, step := range []string{stepPodCreated, stepPodScheduled, stepHelperCreated, stepHelperDone} {
		if d, ok := got[step]; !ok || d < 0 {
			t.Errorf("step %q: %v, %v; want passed by both", step, d, ok)
		}
	}
	for _, step := range []string{stepPodStarted, stepPodReady, stepClaimBound} {
		if _, ok := got[step]; ok {
			t.Errorf("step %q counted as passed by both members; only one (or none) did", step)
		}
	}
	if _, ok := tl.seen[stepClaimCreated]["data-m-0"]; !ok {
		t.Error("a Pending claim's Added event did not count as the claim created")
	}
	made := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-0"}, Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumePending}}
	tl.volume(watch.Event{Type: watch.Added, Object: made})
	if _, ok := tl.seen[stepVolumeBound]["pv-0"]; ok {
		t.Error("a Pending volume counted as taken up by the PersistentVolume controller")
	}
	taken := made.DeepCopy()
	taken.Status.Phase = corev1.VolumeBound
	tl.volume(watch.Event{Type: watch.Modified, Object: taken})
	for _, step := range []string{stepVolumeCreated, stepVolumeBound} {
		if _, ok := tl.seen[step]["pv-0"]; !ok {
			t.Errorf("step %q not recorded for a volume made, then Bound", step)
		}
	}
	if _, ok := tl.seen[stepPrepared]["pv-0"]; ok {
		t.Error("a volume without the prepared mark counted as prepared")
	}
	first := tl.seen[stepPodCreated]["m-0"]
	tl.memberPod(watch.Event{Type: watch.Modified, Object: pod("m-0", "real-1", true, true)})
	if tl.seen[stepPodCreated]["m-0"] != first {
		t.Error("a later event moved the first time a step was seen")
	}

	rows := newTimelineRows("2 members")
	rows.add(tFlock, map[string]time.Duration{stepPodReady: 300 * time.Millisecond, stepHelperDone: 100 * time.Millisecond})
	rows.add(tFlock, map[string]time.Duration{stepPodReady: 500 * time.Millisecond, stepHelperDone: 200 * time.Millisecond})
	rows.add(tSTS, map[string]time.Duration{stepPodReady: 50 * time.Millisecond})
	res := rows.result()
	if len(res) != 2 || res[0].Case != "timeline of 2 members: "+stepHelperDone || res[1].Case != "timeline of 2 members: "+stepPodReady {
		t.Fatalf("rows %+v, want helper done then Ready (the steps' order)", res)
	}
	if v := res[1].Values; v[tFlock] != 500 || v[tSTS] != 50 {
		t.Errorf("Ready medians %v, want Flock 500 (of 300, 500) and StatefulSet 50", v)
	}
}

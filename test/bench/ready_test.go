// File ready_test.go: unit tests of the readiness cases' pure parts: the
// kinds' turns, the StatefulSet+PV kind's volumes, the volumes a run leaves
// and the table's ratios.

package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
)

func TestTurnsRotate(t *testing.T) {
	first := map[string]int{}
	for run := range len(readyKinds) {
		order := turns(readyKinds, run)
		if got := slices.Sorted(slices.Values(order)); !slices.Equal(got, slices.Sorted(slices.Values(readyKinds))) {
			t.Fatalf("run %d: order %v is not a permutation of %v", run, order, readyKinds)
		}
		first[order[0]]++
	}
	for _, k := range readyKinds {
		if first[k] != 1 {
			t.Errorf("%s went first in %d of %d runs, want 1", k, first[k], len(readyKinds))
		}
	}
	if got := turns(floodKinds, 1); !slices.Equal(got, []string{tFlock, tSTS}) {
		t.Errorf("two kinds, run 1: %v, want them swapped", got)
	}
	if readyKinds[0] != tSTS {
		t.Errorf("turns changed its input: %v", readyKinds)
	}
}

func TestLocalVolumesSpread(t *testing.T) {
	hosts := []string{"node-1", "node-2", "node-3", "node-4"}
	pvs := localVolumes("0-1", "/tmp/bench-local", 6, hosts)
	if len(pvs) != 6+len(hosts) {
		t.Fatalf("%d volumes, want %d (one per claim, one spare per node)", len(pvs), 6+len(hosts))
	}
	perHost := map[string]int{}
	names := map[string]bool{}
	for _, pv := range pvs {
		host := volumeHost(pv)
		if host == "" {
			t.Fatalf("%s: node affinity %+v, want one hostname", pv.Name, pv.Spec.NodeAffinity)
		}
		perHost[host]++
		names[pv.Name] = true
		if pv.Spec.StorageClassName != localClass || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain ||
			pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != "/tmp/bench-local/"+pv.Name || pv.Labels[volumeSetLabel] != "0-1" {
			t.Errorf("%s: %+v", pv.Name, pv.Spec)
		}
	}
	if len(names) != len(pvs) {
		t.Errorf("%d distinct names for %d volumes", len(names), len(pvs))
	}
	for _, h := range hosts {
		if perHost[h] < 2 || perHost[h] > 3 {
			t.Errorf("%s has %d volumes, want 2 or 3 (10 round-robin over 4 nodes)", h, perHost[h])
		}
	}
}

func TestReadyRatio(t *testing.T) {
	r := row{Values: map[string]float64{tSTS: 100, tSTSPV: 400, tFlock: 200},
		Samples: map[string][]float64{tSTS: {100, 50}, tSTSPV: {400, 500}, tFlock: {200, 250}}}
	if got, want := readyRatio(r, tSTS), "(2.00) [2.00 5.00]"; got != want {
		t.Errorf("vs StatefulSet: %q, want %q", got, want)
	}
	if got, want := readyRatio(r, tSTSPV), "(0.50) [0.50 0.50]"; got != want {
		t.Errorf("vs StatefulSet+PV: %q, want %q", got, want)
	}
	delete(r.Values, tSTSPV)
	if got := readyRatio(r, tSTSPV); got != "(-)" {
		t.Errorf("without the anchor: %q, want (-)", got)
	}
}

func TestKindsToRun(t *testing.T) {
	got, err := kindsToRun(" StatefulSet+PV ,")
	if err != nil || !slices.Equal(got, []string{tSTS, tFlock}) {
		t.Errorf("skip StatefulSet+PV: %v, %v; want [%s %s]", got, err, tSTS, tFlock)
	}
	if got, err := kindsToRun(""); err != nil || !slices.Equal(got, readyKinds) {
		t.Errorf("skip nothing: %v, %v", got, err)
	}
	if _, err := kindsToRun("Deployment"); err == nil || !strings.Contains(err.Error(), `"Deployment" is not one of`) {
		t.Errorf("unknown kind: err = %v", err)
	}
	if _, err := kindsToRun(strings.Join(readyKinds, ",")); err == nil {
		t.Error("skipping every kind: no error")
	}
}

func TestReadyCountNeedsAllAtOnce(t *testing.T) {
	rc := &readyCount{want: 2, ready: map[string]struct{}{}, replicas: map[string]int32{}, done: make(chan struct{}), start: time.Now()}
	pod := func(name string, ready bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	rc.pod(watch.Event{Type: watch.Added, Object: pod("a", true)})
	rc.pod(watch.Event{Type: watch.Modified, Object: pod("a", true)}) // no double count
	rc.pod(watch.Event{Type: watch.Modified, Object: pod("b", false)})
	if rc.out.pods != 0 || len(rc.ready) != 1 {
		t.Fatalf("one of two Ready: pods time %v, %d Ready", rc.out.pods, len(rc.ready))
	}
	rc.pod(watch.Event{Type: watch.Deleted, Object: pod("a", true)})
	rc.pod(watch.Event{Type: watch.Modified, Object: pod("b", true)})
	if rc.out.pods != 0 || len(rc.ready) != 1 {
		t.Fatalf("a deleted, b Ready: pods time %v, %d Ready", rc.out.pods, len(rc.ready))
	}
	rc.pod(watch.Event{Type: watch.Added, Object: pod("a2", true)})
	if rc.out.pods == 0 {
		t.Fatal("two Ready at once: no pods time")
	}
	rc.object("x", false, 1)
	rc.object("x", false, 1)
	rc.object("y", false, 2)
	rc.object("y", true, 2)
	if rc.out.status != 0 || rc.sum != 1 {
		t.Fatalf("readyReplicas 1 + deleted: status time %v, sum %d", rc.out.status, rc.sum)
	}
	select {
	case <-rc.done:
		t.Fatal("done before readyReplicas added up")
	default:
	}
	rc.object("x", false, 2)
	select {
	case <-rc.done:
	default:
		t.Fatal("not done once both added up")
	}
	rc.object("x", false, 2) // after done: no second close
}

func TestSmokeFailsOnUnfinishedCases(t *testing.T) {
	done := row{Case: "ready: 5 members Parallel", Unfinished: map[string]string{}}
	if err := smokeFailures([]row{done}); err != nil {
		t.Fatalf("every case finished: %v", err)
	}
	late := row{Case: "ready: 50 x 3 Parallel, 50 nodes", Unfinished: map[string]string{tFlock: "not all Ready within 3m0s: 12 of 150"}}
	err := smokeFailures([]row{done, late})
	if err == nil || !strings.Contains(err.Error(), "50 x 3") || !strings.Contains(err.Error(), "12 of 150") {
		t.Fatalf("an unfinished case: %v, want it named with its count", err)
	}
}

func TestDeleteRunVolumesTakesOnlyTheRunsVolumes(t *testing.T) {
	pv := func(name, set, claimNS string) *corev1.PersistentVolume {
		v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if set != "" {
			v.Labels = map[string]string{volumeSetLabel: set}
		}
		if claimNS != "" {
			v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: claimNS, Name: "data-" + name}
		}
		return v
	}
	kube := fake.NewClientset(
		pv("spare", "2-1", ""),          // the set's, unclaimed
		pv("claimed", "2-1", "ready-x"), // the set's, claimed from the run's namespace
		pv("flock-member", "", "ready-2-1-flock"),
		pv("other-set", "2-0", ""),            // an earlier run's set
		pv("other-ns", "", "ready-2-0-flock"), // another namespace's claim
		pv("free", "", ""),
	)
	if err := deleteRunVolumes(t.Context(), kube, "ready-2-1-flock", "2-1"); err != nil {
		t.Fatal(err)
	}
	l, err := kube.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, v := range l.Items {
		left = append(left, v.Name)
	}
	slices.Sort(left)
	if want := []string{"free", "other-ns", "other-set"}; !slices.Equal(left, want) {
		t.Errorf("volumes left %v, want %v", left, want)
	}
}

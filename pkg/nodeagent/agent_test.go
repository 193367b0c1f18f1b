package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
)

// poll calls cond every 20 ms until it is true, failing the test after
// 10 s.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAgent(t *testing.T) {
	const node = "node-a"
	root := t.TempDir()
	outside := t.TempDir()
	uid, gid := self()
	member := func(name, node, path string) *corev1.PersistentVolume {
		pv := volume(name, path)
		pv.UID = types.UID("uid-" + name)
		SetRequest(pv, node, uid, gid, 0o750)
		return pv
	}
	mine := member("mine", node, filepath.Join(root, "ns", "f", "m-0"))
	other := member("other", "node-b", filepath.Join(root, "ns", "f", "m-1"))
	// Not a clean path: it would lead out of the data root.
	escape := member("escape", node, root+"/../"+filepath.Base(outside)+"/m-2")
	prepared := member("prepared", node, filepath.Join(root, "ns", "f", "m-3"))
	prepared.Annotations[AnnotationPrepared] = "true"
	client := fake.NewClientset(mine, other, escape, prepared)

	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	agent := New(client, Options{NodeName: node, DataRoot: root})
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()

	annotated := func(name string) bool {
		pv, err := client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pv.Annotations[AnnotationPrepared] == "true"
	}
	event := func(name, reason string) bool {
		events, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason {
				return true
			}
		}
		return false
	}

	poll(t, "the volume of this node marked prepared", func() bool { return annotated("mine") })
	if u, g, m := stat(t, mine.Spec.HostPath.Path); int64(u) != uid || int64(g) != gid || m != 0o750 {
		t.Errorf("prepared directory is %d:%d %#o, want %d:%d 0750", u, g, m, uid, gid)
	}
	poll(t, "a DataPrepared event", func() bool { return event("mine", ReasonDataPrepared) })
	poll(t, "a PrepareRefused event for the escaping volume", func() bool { return event("escape", ReasonPrepareRefused) })
	if !agent.Synced() {
		t.Error("agent not synced while running")
	}

	if annotated("other") {
		t.Error("the volume of another node was marked prepared")
	}
	if annotated("escape") {
		t.Error("the escaping volume was marked prepared")
	}
	for _, p := range []string{other.Spec.HostPath.Path, prepared.Spec.HostPath.Path, filepath.Join(outside, "m-2")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s was made (or: %v)", p, err)
		}
	}
	if event("prepared", ReasonDataPrepared) || event("other", ReasonDataPrepared) {
		t.Error("an event for a volume that was not pending")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the context was cancelled")
	}
}

// With AnyNode (one host process standing in for the agents of kwok
// nodes) the volumes of every node are prepared, and still only those that
// ask for it.
func TestAgentAnyNode(t *testing.T) {
	root := t.TempDir()
	uid, gid := self()
	a := volume("a", filepath.Join(root, "ns", "f", "m-0"))
	SetRequest(a, "kwok-1", uid, gid, 0o700)
	b := volume("b", filepath.Join(root, "ns", "f", "m-1"))
	SetRequest(b, "kwok-2", uid, gid, 0o700)
	unasked := volume("unasked", filepath.Join(root, "ns", "f", "m-2"))
	client := fake.NewClientset(a, b, unasked)

	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, client, Options{NodeName: "simulated", DataRoot: root, AnyNode: true}) }()
	for _, pv := range []*corev1.PersistentVolume{a, b} {
		poll(t, "volume "+pv.Name+" marked prepared", func() bool {
			got, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return err == nil && got.Annotations[AnnotationPrepared] == "true"
		})
		if _, _, m := stat(t, pv.Spec.HostPath.Path); m != 0o700 {
			t.Errorf("%s: mode %#o, want 0700", pv.Spec.HostPath.Path, m)
		}
	}
	if _, err := os.Lstat(unasked.Spec.HostPath.Path); !os.IsNotExist(err) {
		t.Errorf("a volume that asks no agent was prepared (or: %v)", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// A new volume's directory is prepared at once, but its mark waits for the
// PersistentVolume controller's first phase of the volume (a mark before
// that made the controller's phase write fail with a conflict), or for the
// end of MarkWait when that controller is behind.
func TestAgentMarkWaitsForTheVolumesFirstPhase(t *testing.T) {
	for _, tc := range []struct {
		name     string
		markWait time.Duration
		// bound: the test gives the volume its phase Bound once its
		// directory is prepared.
		bound bool
	}{
		// The default wait: a volume still Pending 1.5 s after it was
		// made (the default was 1 s; at 50 x 3 the PersistentVolume
		// controller reached many volumes about then, and the mark made
		// its phase write fail) is not marked before its phase.
		{name: "marked once the volume has its phase, with the default wait", bound: true},
		{name: "marked after MarkWait while the volume stays Pending", markWait: 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			uid, gid := self()
			pv := volume("young", filepath.Join(root, "ns", "f", "m-0"))
			pv.UID = "uid-young"
			pv.CreationTimestamp = metav1.Now()
			pv.Status.Phase = corev1.VolumePending
			SetRequest(pv, "node-a", uid, gid, 0o750)
			client := fake.NewClientset(pv)

			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, client, Options{NodeName: "node-a", DataRoot: root, MarkWait: tc.markWait})
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			marked := func() bool {
				got, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
				return err == nil && got.Annotations[AnnotationPrepared] == "true"
			}

			start := time.Now()
			poll(t, "the directory prepared", func() bool {
				_, err := os.Lstat(pv.Spec.HostPath.Path)
				return err == nil
			})
			if u, g, m := stat(t, pv.Spec.HostPath.Path); int64(u) != uid || int64(g) != gid || m != 0o750 {
				t.Errorf("prepared directory is %d:%d %#o, want %d:%d 0750", u, g, m, uid, gid)
			}
			if !tc.bound {
				// Unless this machine was too slow to tell: the check must
				// come well before MarkWait is over.
				if age := time.Since(pv.CreationTimestamp.Time); age < tc.markWait/2 && marked() {
					t.Fatalf("a Pending volume was marked %v after it was made, before MarkWait (%v)", age, tc.markWait)
				}
				poll(t, "the mark after MarkWait", marked)
				if age := time.Since(pv.CreationTimestamp.Time); age < tc.markWait {
					t.Errorf("marked %v after the volume was made, before MarkWait (%v)", age, tc.markWait)
				}
				return
			}
			time.Sleep(1500 * time.Millisecond)
			if marked() {
				t.Fatalf("a Pending volume was marked before its phase (the default MarkWait is %v)", DefaultMarkWait)
			}
			upd := pv.DeepCopy()
			upd.Status.Phase = corev1.VolumeBound
			if _, err := client.CoreV1().PersistentVolumes().UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			poll(t, "the mark once the volume is Bound", marked)
			t.Logf("marked %v after the agent started", time.Since(start))
		})
	}
}

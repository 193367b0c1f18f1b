package kubectlflock

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"flock.dev/flock/internal/syncbuffer"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
	flockfake "flock.dev/flock/pkg/generated/clientset/versioned/fake"
)

func TestFlockName(t *testing.T) {
	for arg, want := range map[string]string{"web": "web", "fl/web": "web", "flock/web": "web", "flocks.flock.dev/web": "web"} {
		if got, err := flockName(arg); err != nil || got != want {
			t.Errorf("flockName(%q) = %q, %v; want %q", arg, got, err, want)
		}
	}
	for _, arg := range []string{"sts/web", "fl/"} {
		if got, err := flockName(arg); err == nil {
			t.Errorf("flockName(%q) = %q, want an error", arg, got)
		}
	}
}

func TestRolloutState(t *testing.T) {
	flock := func(mutate func(f *v1alpha1.Flock)) *v1alpha1.Flock {
		f := &v1alpha1.Flock{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 2}}
		f.Spec.Replicas = ptr.To[int32](3)
		f.Status = v1alpha1.FlockStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 3, CurrentReplicas: 3,
			CurrentRevision: "new", UpdateRevision: "new"}
		mutate(f)
		return f
	}
	for _, c := range []struct {
		name string
		f    *v1alpha1.Flock
		want string
		done bool
	}{
		{"complete", flock(func(*v1alpha1.Flock) {}), "rolling update complete: 3 members at revision new", true},
		{"spec not observed", flock(func(f *v1alpha1.Flock) { f.Status.ObservedGeneration = 1 }),
			"Waiting for the Flock's spec (generation 2) to be observed...", false},
		{"members not Ready, one blocked", flock(func(f *v1alpha1.Flock) {
			f.Status.ReadyReplicas = 1
			f.Status.Conditions = []metav1.Condition{{Type: v1alpha1.FlockMembersBlocked, Status: metav1.ConditionTrue, Reason: "ImagePullBackOff", Message: "member 2: no image"}}
		}), "Waiting for 2 of 3 members to be Ready... (ImagePullBackOff: member 2: no image)", false},
		{"scaling down", flock(func(f *v1alpha1.Flock) { f.Status.Replicas = 4 }),
			"Waiting for the scale down: 4 members, 3 wanted...", false},
		{"members on the old revision", flock(func(f *v1alpha1.Flock) {
			f.Status.CurrentRevision, f.Status.UpdatedReplicas = "old", 1
		}), "Waiting for the rolling update: 1 of 3 members at revision new...", false},
		{"partition not reached", flock(func(f *v1alpha1.Flock) {
			f.Spec.UpdateStrategy.RollingUpdate = &v1alpha1.RollingUpdateFlockStrategy{Partition: ptr.To[int32](1)}
			f.Status.CurrentRevision, f.Status.UpdatedReplicas = "old", 1
		}), "Waiting for the partitioned rollout: 1 of 2 members from ordinal 1 at revision new...", false},
		{"partition reached", flock(func(f *v1alpha1.Flock) {
			f.Spec.UpdateStrategy.RollingUpdate = &v1alpha1.RollingUpdateFlockStrategy{Partition: ptr.To[int32](1)}
			f.Status.CurrentRevision, f.Status.UpdatedReplicas = "old", 2
		}), "partitioned rollout complete: 2 members from ordinal 1 at revision new", true},
	} {
		got, done, err := rolloutState(c.f)
		if err != nil || got != c.want || done != c.done {
			t.Errorf("%s: rolloutState = %q, %v, %v; want %q, %v", c.name, got, done, err, c.want, c.done)
		}
	}
	halted := flock(func(f *v1alpha1.Flock) {
		f.Status.ReadyReplicas, f.Status.CurrentRevision, f.Status.UpdatedReplicas = 2, "old", 1
		f.Status.Conditions = []metav1.Condition{{Type: v1alpha1.FlockProgressing, Status: metav1.ConditionFalse,
			Reason: flockcontroller.ReasonRolloutHalted, Message: "halted at pod web-2"}}
	})
	if _, _, err := rolloutState(halted); err == nil || err.Error() != "rollout of Flock web halted: halted at pod web-2" {
		t.Errorf("rolloutState of a halted rollout: %v", err)
	}
	onDelete := flock(func(f *v1alpha1.Flock) { f.Spec.UpdateStrategy.Type = v1alpha1.OnDeleteFlockStrategyType })
	if _, _, err := rolloutState(onDelete); err == nil || !strings.Contains(err.Error(), "needs the RollingUpdate update strategy") {
		t.Errorf("rolloutState of an OnDelete Flock: %v, want an error naming the strategy", err)
	}
}

// A watched rollout prints each new state and returns once it is complete.
func TestRolloutStatusWatches(t *testing.T) {
	f := &v1alpha1.Flock{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 1}}
	f.Spec.Replicas = ptr.To[int32](2)
	f.Status = v1alpha1.FlockStatus{ObservedGeneration: 1, ReadyReplicas: 2, UpdatedReplicas: 1, CurrentRevision: "old", UpdateRevision: "new"}
	fc := flockfake.NewSimpleClientset(f)
	c := &clients{flock: fc, kube: kubefake.NewClientset(), namespace: "ns"}
	var out syncbuffer.Buffer
	done := make(chan error, 1)
	go func() { done <- rolloutStatus(context.Background(), c, "web", true, time.Minute, &out) }()

	time.Sleep(100 * time.Millisecond)
	f = f.DeepCopy()
	f.Status.UpdatedReplicas, f.Status.CurrentRevision = 2, "new"
	if _, err := fc.FlockV1alpha1().Flocks("ns").UpdateStatus(context.Background(), f, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("rollout status did not return after the rollout completed")
	}
	want := "Waiting for the rolling update: 1 of 2 members at revision new...\nrolling update complete: 2 members at revision new\n"
	if out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}

	// Without --watch, one line and no wait; a timeout names the last state.
	f.Status.ReadyReplicas = 1
	if _, err := fc.FlockV1alpha1().Flocks("ns").UpdateStatus(context.Background(), f, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var once bytes.Buffer
	if err := rolloutStatus(context.Background(), c, "web", false, 0, &once); err != nil || once.String() != "Waiting for 1 of 2 members to be Ready...\n" {
		t.Errorf("without --watch: %q, %v", once.String(), err)
	}
	err := rolloutStatus(context.Background(), c, "web", true, 200*time.Millisecond, &once)
	if err == nil || !strings.Contains(err.Error(), "timed out after 200ms") || !strings.Contains(err.Error(), "1 of 2 members to be Ready") {
		t.Errorf("with a timeout: %v", err)
	}

	// A Flock deleted while its rollout is followed ends the wait.
	go func() { done <- rolloutStatus(context.Background(), c, "web", true, time.Minute, io.Discard) }()
	time.Sleep(100 * time.Millisecond)
	if err := fc.FlockV1alpha1().Flocks("ns").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || err.Error() != "Flock web was deleted" {
			t.Errorf("after the Flock was deleted: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("rollout status did not return after the Flock was deleted")
	}
}

func revisionOf(f *v1alpha1.Flock, image string, number int64, cause string) *appsv1.ControllerRevision {
	g := f.DeepCopy()
	g.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: image}}
	if cause != "" {
		g.Annotations = map[string]string{flockcontroller.ChangeCauseAnnotation: cause}
	}
	return flockcontroller.NewControllerRevision(g, &g.Spec.Template, flockcontroller.Revision(&g.Spec.Template), number)
}

func TestRolloutHistoryAndUndo(t *testing.T) {
	f := &v1alpha1.Flock{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-web"}}
	f.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:2"}}
	rev1, rev2 := revisionOf(f, "app:1", 1, ""), revisionOf(f, "app:2", 2, "image 2")
	// A revision labelled for web that another object controls (an earlier
	// Flock of the name): not web's.
	foreign := revisionOf(f, "app:0", 7, "")
	foreign.Name += "-x"
	foreign.OwnerReferences[0].UID = ktypes.UID("uid-gone")
	f.Status.Members = []v1alpha1.FlockMember{{Ordinal: 0, Revision: rev2.Labels[v1alpha1.LabelRevision]}}
	fc := flockfake.NewSimpleClientset(f)
	c := &clients{flock: fc, kube: kubefake.NewClientset([]runtime.Object{rev2, foreign, rev1}...), namespace: "ns"}
	ctx := context.Background()

	var out bytes.Buffer
	if err := rolloutHistory(ctx, c, "web", 0, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || lines[0] != "flock.flock.dev/web" || !strings.HasPrefix(lines[1], "REVISION") ||
		strings.Fields(lines[2])[0] != "1" || strings.Fields(lines[2])[3] != "<none>" ||
		strings.Join(strings.Fields(lines[3]), " ") != "2 "+rev2.Labels[v1alpha1.LabelRevision]+" 1 image 2" {
		t.Errorf("history:\n%s", out.String())
	}
	out.Reset()
	if err := rolloutHistory(ctx, c, "web", 1, &out); err != nil || !strings.Contains(out.String(), "with revision #1") || !strings.Contains(out.String(), "image: app:1") {
		t.Errorf("history --revision=1: %v\n%s", err, out.String())
	}
	if err := rolloutHistory(ctx, c, "web", 7, &out); err == nil || !strings.Contains(err.Error(), "has no revision 7 (it has 1, 2)") {
		t.Errorf("history --revision=7 (not web's): %v", err)
	}

	out.Reset()
	if err := rolloutUndo(ctx, c, "web", 2, "none", &out); err != nil || out.String() != "flock.flock.dev/web skipped rollback (its template is already revision 2's)\n" {
		t.Errorf("undo to the current revision: %q, %v", out.String(), err)
	}
	out.Reset()
	// A client dry run sends nothing.
	if err := rolloutUndo(ctx, c, "web", 0, "client", &out); err != nil || out.String() != "flock.flock.dev/web rolled back to revision 1 (client dry run)\n" {
		t.Fatalf("undo --dry-run=client: %q, %v", out.String(), err)
	}
	if got, _ := fc.FlockV1alpha1().Flocks("ns").Get(ctx, "web", metav1.GetOptions{}); got.Spec.Template.Spec.Containers[0].Image != "app:2" {
		t.Fatal("undo --dry-run=client changed the Flock")
	}
	out.Reset()
	if err := rolloutUndo(ctx, c, "web", 0, "none", &out); err != nil || out.String() != "flock.flock.dev/web rolled back to revision 1\n" {
		t.Fatalf("undo: %q, %v", out.String(), err)
	}
	got, err := fc.FlockV1alpha1().Flocks("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := got.Spec.Template.Spec.Containers[0].Image; img != "app:1" {
		t.Errorf("template image after undo %q, want app:1", img)
	}
	if flockcontroller.Revision(&got.Spec.Template) != rev1.Labels[v1alpha1.LabelRevision] {
		t.Error("the template after undo does not hash to revision 1's: the controller would make a new revision")
	}
}

func TestRolloutUndoWithoutAnEarlierRevision(t *testing.T) {
	f := &v1alpha1.Flock{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-web"}}
	c := &clients{flock: flockfake.NewSimpleClientset(f), kube: kubefake.NewClientset(revisionOf(f, "app:1", 1, "")), namespace: "ns"}
	var out bytes.Buffer
	if err := rolloutUndo(context.Background(), c, "web", 0, "none", &out); err == nil || !strings.Contains(err.Error(), "no earlier revision") {
		t.Errorf("undo of a Flock with one revision: %v", err)
	}
}

func TestRestartPatch(t *testing.T) {
	now := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	data, err := restartPatch(now)
	if err != nil {
		t.Fatal(err)
	}
	var f v1alpha1.Flock
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if got := f.Spec.Template.Annotations[restartedAtAnnotation]; got != "2026-12-06T19:00:00Z" {
		t.Errorf("patch %s sets %s to %q", data, restartedAtAnnotation, got)
	}
}

// --dry-run takes none, server or client as kubectl's; bare, it is server.
func TestRolloutUndoDryRunFlag(t *testing.T) {
	for args, want := range map[string]string{"": "none", "--dry-run": "server", "--dry-run=client": "client", "--dry-run=server": "server"} {
		cmd := newRolloutUndoCommand(&options{})
		if err := cmd.ParseFlags(strings.Fields(args)); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if got := cmd.Flags().Lookup("dry-run").Value.String(); got != want {
			t.Errorf("%q: --dry-run is %q, want %q", args, got, want)
		}
	}
	cmd := newRolloutUndoCommand(&options{})
	cmd.SetArgs([]string{"web", "--dry-run=yes"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.Execute(); err == nil || err.Error() != `--dry-run="yes": want none, server or client` {
		t.Errorf("--dry-run=yes: %v", err)
	}
}

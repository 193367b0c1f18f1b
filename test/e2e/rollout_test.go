package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flockcontroller "flock.dev/flock/pkg/controller/flock"
)

// rolloutStatusTimeout is what `rollout status --timeout` gets, inside the
// test's bound on one kubectl call.
const rolloutStatusTimeout = "50s"

// `kubectl flock rollout` does for a Flock what `kubectl rollout` does for a
// StatefulSet: status follows a template change to its end, history lists
// the revisions with their change causes and the members at each, undo
// goes back a revision (which becomes the newest, renumbered), restart
// rolls the members with a restartedAt annotation, and a revision that is
// not there is refused with the numbers there are.
func TestKubectlFlockRollout(t *testing.T) {
	ns := newNamespace(t)
	path := pluginPath(t)
	k := env.KubectlBuilt()
	run := func(args ...string) string {
		t.Helper()
		return kubectlFlock(t, k, path, append(append([]string{"rollout"}, args...), "-n", ns)...)
	}
	fl := newFlock("web", ns, 2)
	fl.Annotations = map[string]string{flockcontroller.ChangeCauseAnnotation: "first"}
	createFlock(t, fl)
	rev1 := flockcontroller.Revision(&fl.Spec.Template)

	// statusAt waits for the rollout to complete at revision rev and returns
	// what status printed.
	statusAt := func(rev string) string {
		t.Helper()
		out := run("status", "fl/web", "--timeout="+rolloutStatusTimeout)
		if want := "rolling update complete: 2 members at revision " + rev; lastLine(out) != want {
			t.Fatalf("rollout status printed %q, want it to end with %q", out, want)
		}
		t.Logf("rollout status printed:\n%s", out)
		return out
	}
	// history returns revision number -> [hash, members, change cause].
	history := func() map[string][]string {
		t.Helper()
		out := run("history", "web")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) < 2 || lines[0] != "flock.flock.dev/web" || strings.Join(strings.Fields(lines[1]), " ") != "REVISION HASH MEMBERS CHANGE-CAUSE" {
			t.Fatalf("rollout history printed %q", out)
		}
		rows := map[string][]string{}
		for _, l := range lines[2:] {
			f := strings.Fields(l)
			rows[f[0]] = []string{f[1], f[2], strings.Join(f[3:], " ")}
		}
		return rows
	}
	expectHistory := func(want map[string][]string) {
		t.Helper()
		if got := history(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("rollout history %v, want %v", got, want)
		}
	}

	statusAt(rev1)
	expectHistory(map[string][]string{"1": {rev1, "2", "first"}})

	// A template change, with its cause.
	kubectl(t, k, "patch", "fl/web", "-n", ns, "--type=merge", "-p",
		`{"metadata":{"annotations":{"kubernetes.io/change-cause":"env X=1"}},`+
			`"spec":{"template":{"spec":{"containers":[{"name":"app","image":"busybox:1.36","command":["sleep","infinity"],"env":[{"name":"X","value":"1"}]}]}}}}`)
	f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rev2 := flockcontroller.Revision(&f.Spec.Template)
	statusAt(rev2)
	expectHistory(map[string][]string{"1": {rev1, "0", "first"}, "2": {rev2, "2", "env X=1"}})
	if out := run("history", "web", "--revision=2"); !strings.Contains(out, "with revision #2 ("+rev2+")") || !strings.Contains(out, "name: X") {
		t.Errorf("history --revision=2 printed %q", out)
	}

	// Undo: back to revision 1's template, which becomes revision 3.
	if out := run("undo", "web"); strings.TrimSpace(out) != "flock.flock.dev/web rolled back to revision 1" {
		t.Errorf("rollout undo printed %q", out)
	}
	statusAt(rev1)
	expectHistory(map[string][]string{"2": {rev2, "0", "env X=1"}, "3": {rev1, "2", "first"}})
	if out := run("undo", "web", "--to-revision=3"); strings.TrimSpace(out) != "flock.flock.dev/web skipped rollback (its template is already revision 3's)" {
		t.Errorf("rollout undo to the current revision printed %q", out)
	}
	if out := run("undo", "web", "--to-revision=2", "--dry-run=server"); strings.TrimSpace(out) != "flock.flock.dev/web rolled back to revision 2 (server dry run)" {
		t.Errorf("rollout undo --dry-run printed %q", out)
	}
	if f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "web", metav1.GetOptions{}); err != nil || flockcontroller.Revision(&f.Spec.Template) != rev1 {
		t.Errorf("after an undo's dry run the template is not revision 1's any more (%v)", err)
	}
	if stderr := kubectlFlockFails(t, k, path, "rollout", "undo", "web", "--to-revision=9", "-n", ns); !strings.Contains(stderr, "Flock web has no revision 9 (it has 2, 3)") {
		t.Errorf("rollout undo --to-revision=9: %q", stderr)
	}

	// Restart: a new revision, rolled out; each pod carries restartedAt.
	if out := run("restart", "fl/web"); strings.TrimSpace(out) != "flock.flock.dev/web restarted" {
		t.Errorf("rollout restart printed %q", out)
	}
	f, err = env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restartedAt := f.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"]
	if restartedAt == "" {
		t.Fatalf("template annotations after restart: %v", f.Spec.Template.Annotations)
	}
	statusAt(flockcontroller.Revision(&f.Spec.Template))
	eventually(t, availableTimeout, "both member pods carry restartedAt", func(ctx context.Context) error {
		for _, name := range []string{"web-0", "web-1"} {
			p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := p.Annotations["kubectl.kubernetes.io/restartedAt"]; got != restartedAt {
				return fmt.Errorf("pod %s restartedAt %q, want %q", name, got, restartedAt)
			}
		}
		return nil
	})
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/test/cluster"
)

// callTimeout bounds one kubectl run or API call.
const callTimeout = 60 * time.Second

// forEachKubectl runs f as a subtest for the built v1.37 kubectl ("built")
// and the system's kubectl ("system", v1.32 here). A missing system kubectl
// fails the subtest; nothing is skipped silently.
func forEachKubectl(t *testing.T, f func(t *testing.T, k cluster.Kubectl)) {
	t.Helper()
	t.Run("built", func(t *testing.T) { f(t, env.KubectlBuilt()) })
	t.Run("system", func(t *testing.T) {
		k, err := env.KubectlSystem()
		if err != nil {
			t.Fatalf("the kubectl version-skew check needs a second kubectl: %v", err)
		}
		f(t, k)
	})
}

// kubectl runs k and fails the test unless it exits 0; it returns stdout.
func kubectl(t *testing.T, k cluster.Kubectl, args ...string) string {
	t.Helper()
	return kubectlInput(t, k, "", args...)
}

// kubectlInput is kubectl with stdin.
func kubectlInput(t *testing.T, k cluster.Kubectl, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := env.KubectlInput(ctx, k, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return res.Stdout
}

// kubectlFails runs k, fails the test if it exits 0, and returns what it printed.
func kubectlFails(t *testing.T, k cluster.Kubectl, stdin string, args ...string) *cluster.KubectlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := env.KubectlInput(ctx, k, stdin, args...)
	if err == nil {
		t.Fatalf("kubectl (%s) %s succeeded, want a failure; stdout:\n%s", k.Name, strings.Join(args, " "), res.Stdout)
	}
	var ke *cluster.KubectlError
	if !errors.As(err, &ke) || res.ExitCode <= 0 {
		t.Fatalf("kubectl (%s) %s did not run: %v", k.Name, strings.Join(args, " "), err)
	}
	return res
}

// ctxFor returns a context bounded by callTimeout and the test. It is
// already canceled in t.Cleanup functions; use context.Background there.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls f every 250ms until it returns nil, failing the test with
// f's last error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var err error
	for {
		if err = f(ctx); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not true after %v: %v", what, timeout, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// consistently polls f every 250ms for d, failing the test as soon as it
// returns an error: what must stay true, e.g. that nothing moves. Each call
// of f gets a context of its own, bounded by callTimeout and not by the end
// of the window: a call made just before the window closes must not fail for
// want of time (client-go's rate limiter refuses at once a wait that would
// pass its context's deadline).
func consistently(t *testing.T, d time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	window := time.NewTimer(d)
	defer window.Stop()
	for {
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		err := f(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: stopped being true: %v", what, err)
		}
		select {
		case <-window.C:
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// newNamespace creates a namespace named after the test and deletes it when
// the test ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	base := nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-")
	if len(base) > 40 {
		base = base[:40]
	}
	name := fmt.Sprintf("e2e-%s-%04x", strings.Trim(base, "-"), rand.IntN(1<<16))
	ctx := ctxFor(t)
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := env.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return name
}

// ownControlPlane brings up a control plane of the test's own next to env
// (same binaries, a work directory under t.TempDir(), opts for the rest),
// bounded by upTimeout, and stops it when the test ends. what names it in
// messages.
func ownControlPlane(t *testing.T, what string, opts cluster.Options) *cluster.Cluster {
	t.Helper()
	opts.BinDir, opts.RepoRoot = env.BinDir(), env.RepoRoot()
	opts.WorkDir = filepath.Join(t.TempDir(), what)
	ctx, cancel := context.WithTimeout(t.Context(), upTimeout)
	c, err := cluster.Up(ctx, opts)
	cancel()
	if err != nil {
		t.Fatalf("the %s control plane: %v", what, err)
	}
	t.Cleanup(func() {
		if err := c.Down(); err != nil {
			t.Errorf("stopping the %s control plane: %v", what, err)
		}
	})
	return c
}

// flockManifest is a minimal valid Flock as YAML.
func flockManifest(name, namespace string, replicas int) string {
	return flockManifestWith(name, namespace, replicas, "", "")
}

// flockManifestWith is flockManifest with YAML lines added to the pod spec
// (podExtra, indented 6) and to its one container (containerExtra, indented 8).
func flockManifestWith(name, namespace string, replicas int, podExtra, containerExtra string) string {
	return fmt.Sprintf(`apiVersion: flock.dev/v1alpha1
kind: Flock
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  replicas: %[3]d
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
%[4]s      containers:
      - name: app
        image: busybox:1.36
        command: ["sleep", "infinity"]
%[5]s`, name, namespace, replicas, podExtra, containerExtra)
}

// newFlock is a minimal valid Flock.
func newFlock(name, namespace string, replicas int32) *flockv1alpha1.Flock {
	labels := map[string]string{"app": name}
	return &flockv1alpha1.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: flockv1alpha1.FlockSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "infinity"},
				}}},
			},
		},
	}
}

// createFlock creates a Flock through kube-apiserver with the clientset.
func createFlock(t *testing.T, f *flockv1alpha1.Flock) *flockv1alpha1.Flock {
	t.Helper()
	out, err := env.Flock.FlockV1alpha1().Flocks(f.Namespace).Create(ctxFor(t), f, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Flock %s/%s: %v", f.Namespace, f.Name, err)
	}
	return out
}

// lineReader collects the lines a background command prints.
type lineReader struct {
	mu    sync.Mutex
	lines []string
	eof   bool
	more  chan struct{}
}

func newLineReader(r io.Reader) *lineReader {
	lr := &lineReader{more: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lr.mu.Lock()
			lr.lines = append(lr.lines, sc.Text())
			lr.mu.Unlock()
			lr.notify()
		}
		lr.mu.Lock()
		lr.eof = true
		lr.mu.Unlock()
		lr.notify()
	}()
	return lr
}

func (lr *lineReader) notify() {
	select {
	case lr.more <- struct{}{}:
	default:
	}
}

// waitFor waits until a line matching re has been read, and returns it. It
// fails the test after timeout, or at once when the output has ended.
func (lr *lineReader) waitFor(t *testing.T, re *regexp.Regexp, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		lr.mu.Lock()
		for _, l := range lr.lines {
			if re.MatchString(l) {
				lr.mu.Unlock()
				return l
			}
		}
		seen := append([]string(nil), lr.lines...)
		eof := lr.eof
		lr.mu.Unlock()
		if eof {
			t.Fatalf("output ended without a line matching %q; got:\n%s", re, strings.Join(seen, "\n"))
		}
		select {
		case <-lr.more:
		case <-deadline:
			t.Fatalf("no line matching %q within %v; got:\n%s", re, timeout, strings.Join(seen, "\n"))
		}
	}
}

// addNode adds a kwok node (Ready, with the usual labels plus labels and
// taints) and deletes it when the test ends.
func addNode(t *testing.T, name string, labels map[string]string, taints []corev1.Taint) *corev1.Node {
	t.Helper()
	n, err := env.AddNode(ctxFor(t), name, labels, taints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := env.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete node %s: %v", name, err)
		}
	})
	// kube-controller-manager's node lifecycle controller gives a new node
	// the not-ready taint and lifts it once it has seen the node Ready;
	// until then Flock admission counts the node as tainted (CI saw a
	// create refused so right after addNode: "1 has untolerated taint
	// node.kubernetes.io/not-ready:NoSchedule").
	eventually(t, time.Minute, "node "+name+" without the not-ready taint", func(ctx context.Context) error {
		got, err := env.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, taint := range got.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady && !slices.ContainsFunc(taints, func(w corev1.Taint) bool { return w.Key == taint.Key }) {
				return fmt.Errorf("still has taint %s", taint.ToString())
			}
		}
		n = got
		return nil
	})
	return n
}

// TestConsistentlyGivesEachCallItsOwnTime: a call made just before
// consistently's window closes still has time of its own. f refuses, as
// client-go's rate limiter does, a context with less than 300ms left; over a
// window of 1s polled every 250ms, a context bounded by the window would
// reach the last call with about 250ms left.
func TestConsistentlyGivesEachCallItsOwnTime(t *testing.T) {
	calls := 0
	consistently(t, time.Second, "each call's context has time left", func(ctx context.Context) error {
		calls++
		dl, ok := ctx.Deadline()
		if !ok {
			return errors.New("the call's context has no deadline")
		}
		if left := time.Until(dl); left < 300*time.Millisecond {
			return fmt.Errorf("only %v left for call %d", left, calls)
		}
		return nil
	})
	if calls < 3 {
		t.Fatalf("f was called %d times in a window of 1s polled every 250ms, want at least 3", calls)
	}
}

// File flock_helpers_test.go: helpers of the tests that work on Flocks:
// create and wait until Available, member nodes, the aggregated OpenAPI, and
// running kubectl and other tools.

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/test/cluster"
)

// availableTimeout bounds the wait for the controller (and kwok) to make a
// small Flock Available.
const availableTimeout = 90 * time.Second

// createAvailable creates f through kube-apiserver and waits until its
// condition Available is True for its current generation; it returns the
// Flock as last read.
func createAvailable(t *testing.T, f *flockv1alpha1.Flock) *flockv1alpha1.Flock {
	t.Helper()
	createFlock(t, f)
	return waitFlockAvailable(t, f.Namespace, f.Name)
}

// waitFlockAvailable waits until Flock ns/name is Available for its
// generation with every member recorded and Ready, and returns it.
func waitFlockAvailable(t *testing.T, ns, name string) *flockv1alpha1.Flock {
	t.Helper()
	var got *flockv1alpha1.Flock
	eventually(t, availableTimeout, fmt.Sprintf("Flock %s/%s Available", ns, name), func(ctx context.Context) error {
		f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := flockAvailableErr(f); err != nil {
			return err
		}
		got = f
		return nil
	})
	return got
}

// flockAvailableErr says why f is not Available for its generation with
// members 0..replicas-1 recorded and Ready, or nil.
func flockAvailableErr(f *flockv1alpha1.Flock) error {
	replicas := flockv1alpha1.ReplicasOf(&f.Spec)
	available := meta.FindStatusCondition(f.Status.Conditions, flockv1alpha1.FlockAvailable)
	if f.Status.ObservedGeneration != f.Generation || available == nil || available.Status != metav1.ConditionTrue ||
		f.Status.ReadyReplicas != replicas || int32(len(f.Status.Members)) != replicas {
		return fmt.Errorf("observedGeneration %d of %d, Available %+v, %d ready, members %+v",
			f.Status.ObservedGeneration, f.Generation, available, f.Status.ReadyReplicas, f.Status.Members)
	}
	for i, m := range f.Status.Members {
		if m.Ordinal != int32(i) || !m.Ready {
			return fmt.Errorf("members %+v", f.Status.Members)
		}
	}
	return nil
}

// withFlockLabels sets f's labels and returns f.
func withFlockLabels(f *flockv1alpha1.Flock, kv ...string) *flockv1alpha1.Flock {
	if f.Labels == nil {
		f.Labels = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Labels[kv[i]] = kv[i+1]
	}
	return f
}

// kubectlWithEnv runs k with extra environment variables (e.g. EDITOR) and
// stdin; it returns what kubectl printed and its error (a
// *cluster.KubectlError for a non-zero exit).
func kubectlWithEnv(t *testing.T, k cluster.Kubectl, extraEnv []string, stdin string, args ...string) (*cluster.KubectlResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	cmd := env.KubectlCommand(ctx, k, args...)
	cmd.Env = append(cmd.Env, extraEnv...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := &cluster.KubectlResult{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: -1}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if err != nil {
		return res, &cluster.KubectlError{Kubectl: k, Args: args, Result: res, Err: err}
	}
	return res, nil
}

// splitTable runs `kubectl get` output through strings.Fields per line and
// returns the header and the rows.
func splitTable(t *testing.T, out string) (header []string, rows [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		t.Fatalf("no table in output %q", out)
	}
	header = strings.Fields(lines[0])
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return header, rows
}

// memberNodes returns the node of each member, in ordinal order.
func memberNodes(f *flockv1alpha1.Flock) []string {
	nodes := make([]string, len(f.Status.Members))
	for i, m := range f.Status.Members {
		nodes[i] = m.Node
	}
	return nodes
}

// runTool runs a command (not kubectl) with a timeout and returns its
// combined output.
func runTool(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("%s %s: timed out after %v: %w", name, strings.Join(args, " "), timeout, ctx.Err())
	}
	return string(out), err
}

// waitFlockOpenAPI waits until kube-apiserver's aggregated OpenAPI v3 index
// lists flock.dev/v1alpha1 and serves the Flock schema. The aggregator
// fetches flock-apiserver's OpenAPI asynchronously, so for a few seconds
// after the APIService becomes Available `kubectl explain` cannot find
// flocks yet.
func waitFlockOpenAPI(t *testing.T) {
	t.Helper()
	eventually(t, 60*time.Second, "kube-apiserver serves the Flock OpenAPI v3 schema", func(ctx context.Context) error {
		raw, err := env.Kube.Discovery().RESTClient().Get().AbsPath("/openapi/v3/apis/flock.dev/v1alpha1").DoRaw(ctx)
		if err != nil {
			return err
		}
		if !bytes.Contains(raw, []byte(`"dev.flock.v1alpha1.Flock"`)) {
			return fmt.Errorf("no dev.flock.v1alpha1.Flock schema yet")
		}
		return nil
	})
}

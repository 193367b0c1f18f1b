package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"flock.dev/flock/internal/syskubectl"
)

// Kubectl is one kubectl binary.
type Kubectl struct {
	// Name is short and fit for a subtest name: "built" (v1.37 from
	// `make tools`) or "system" (the one on PATH, v1.32 here).
	Name string
	// Path is the binary.
	Path string
}

// KubectlResult is what a kubectl run printed.
type KubectlResult struct {
	Stdout, Stderr string
	ExitCode       int
}

// KubectlError is returned when kubectl exits non-zero (or cannot run).
type KubectlError struct {
	Kubectl Kubectl
	Args    []string
	Result  *KubectlResult
	Err     error
}

func (e *KubectlError) Error() string {
	return fmt.Sprintf("kubectl (%s) %s: %v\nstdout: %s\nstderr: %s", e.Kubectl.Name, strings.Join(e.Args, " "), e.Err,
		strings.TrimSpace(e.Result.Stdout), strings.TrimSpace(e.Result.Stderr))
}

func (e *KubectlError) Unwrap() error { return e.Err }

// KubectlBuilt is the v1.37 kubectl built into BinDir.
func (c *Cluster) KubectlBuilt() Kubectl {
	return Kubectl{Name: "built", Path: c.bin("kubectl")}
}

// KubectlSystem is the second, older kubectl (Options.SystemKubectl; by
// default the first kubectl on PATH that is not BinDir's, else
// BinDir/kubectl-1.32: see package syskubectl), or an error if there is none.
func (c *Cluster) KubectlSystem() (Kubectl, error) {
	if c.opts.SystemKubectl == "" {
		return Kubectl{}, errors.New("no system kubectl: no kubectl on PATH other than the built " + c.bin("kubectl") +
			" and no " + c.bin(syskubectl.SkewName) + " (install one, build one with FLOCK_SKEW_KUBECTL=1 ./hack/build-tools.sh, or set Options.SystemKubectl)")
	}
	return Kubectl{Name: "system", Path: c.opts.SystemKubectl}, nil
}

// Kubectls returns the built kubectl and, if there is one, the system's.
func (c *Cluster) Kubectls() []Kubectl {
	out := []Kubectl{c.KubectlBuilt()}
	if s, err := c.KubectlSystem(); err == nil {
		out = append(out, s)
	}
	return out
}

// KubectlCommand returns a command running k with args against the cluster as
// admin: KUBECONFIG is the admin kubeconfig and HOME a directory of the
// cluster's own, so discovery caches never leak between runs or binaries.
// The command is killed when ctx ends. Use it for long-running commands such
// as `kubectl get -w`; Kubectl is simpler for the rest.
func (c *Cluster) KubectlCommand(ctx context.Context, k Kubectl, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.Path, args...)
	home := c.path("home", k.Name)
	_ = os.MkdirAll(home, 0o755)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath, "HOME="+home)
	cmd.Dir = c.opts.WorkDir
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Kubectl runs k with args (as admin; add --as to impersonate) and returns
// its output. A non-zero exit is a *KubectlError that still carries the output.
func (c *Cluster) Kubectl(ctx context.Context, k Kubectl, args ...string) (*KubectlResult, error) {
	return c.KubectlInput(ctx, k, "", args...)
}

// KubectlInput is Kubectl with stdin (e.g. for `apply -f -`).
func (c *Cluster) KubectlInput(ctx context.Context, k Kubectl, stdin string, args ...string) (*KubectlResult, error) {
	cmd := c.KubectlCommand(ctx, k, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	res := &KubectlResult{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: -1}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if err != nil {
		return res, &KubectlError{Kubectl: k, Args: args, Result: res, Err: err}
	}
	return res, nil
}

// Package e2e drives Flock end to end: one local control plane (package
// test/cluster, the same code as `make local-up`) is brought up once for the
// whole run, flock-apiserver is registered behind kube-apiserver's
// aggregation layer, and the tests use real kubectl binaries and clientsets
// against it.
//
// Run with `make test-e2e` (FLOCK_BIN=_output/bin). The work directory with
// every component's log is printed at the start; it is kept when a test fails
// (or FLOCK_E2E_KEEP=1) and removed after a clean run.
//
// Writing a test: use env (the *cluster.Cluster), newNamespace(t) for an
// isolated namespace, forEachKubectl to run a check with the built v1.37 and
// the system kubectl, and eventually for bounded waits. Leave shared state
// (nodes, cordons, taints) as you found it; use t.Cleanup.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"flock.dev/flock/test/cluster"
)

// env is the cluster every test runs against.
var env *cluster.Cluster

// upTimeout bounds bringing the control plane up.
const upTimeout = 5 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, binDir, workDir, err := cluster.SuiteDirs("e2e", "test-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// Each run gets its own directory; a directory given in
	// FLOCK_E2E_WORKDIR is never removed.
	ownDir := os.Getenv("FLOCK_E2E_WORKDIR") == ""
	if !ownDir {
		workDir = os.Getenv("FLOCK_E2E_WORKDIR")
	}
	fmt.Fprintf(os.Stderr, "e2e: work directory (certificates, kubeconfig, logs): %s\n", workDir)

	// Ctrl-C or SIGTERM: abort the start-up, or stop the cluster and exit.
	// A panic or `go test -timeout` kills the test binary, and its children
	// die with it (Pdeathsig); the logs stay in workDir.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	defer cancel()
	var (
		mu      sync.Mutex
		running *cluster.Cluster
	)
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-finished:
			return
		case <-sigs:
		}
		fmt.Fprintln(os.Stderr, "e2e: interrupted; stopping the local control plane")
		cancel()
		mu.Lock()
		c := running
		mu.Unlock()
		if c != nil {
			_ = c.Down()
			fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", c.LogDir())
			os.Exit(1)
		}
	}()

	upCtx, upCancel := context.WithTimeout(ctx, upTimeout)
	c, err := cluster.Up(upCtx, cluster.Options{
		BinDir:   binDir,
		WorkDir:  workDir,
		RepoRoot: root,
		Nodes:    3,
		// Real nodes (realnode_test.go) are added when a test needs them,
		// tainted so that only Flocks meant for them land there; their
		// members' data is under the work directory, and the cleanup
		// helper runs the offline test image.
		TaintRealNodes: true,
		DataRoot:       filepath.Join(workDir, "data"),
		FlockArgs:      flockArgs(),
		// client-go's cache mutation detector in every informer of
		// flock-apiserver: it panics when a cached object is changed. The
		// server's Flock informer holds the watch cache's own objects
		// (pkg/registry/flock/cached_versions.go), so a change there would
		// change what the API serves.
		FlockEnv: []string{"KUBE_CACHE_MUTATION_DETECTOR=true"},
	})
	upCancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: bringing up the local control plane failed: %v\ne2e: logs kept in %s\n", err, filepath.Join(workDir, "logs"))
		return 1
	}
	mu.Lock()
	running = c
	mu.Unlock()
	env = c
	for _, k := range c.Kubectls() {
		out, _ := exec.Command(k.Path, "version", "--client").Output()
		fmt.Fprintf(os.Stderr, "e2e: kubectl %q: %s (%s)\n", k.Name, k.Path, strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0])
	}

	code := m.Run()

	if err := c.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping the local control plane:", err)
		if code == 0 {
			code = 1
		}
	}
	if code != 0 || os.Getenv("FLOCK_E2E_KEEP") != "" || !ownDir {
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", c.LogDir())
	} else {
		_ = os.RemoveAll(workDir)
	}
	return code
}

// flockArgs are the main flock-apiserver's own flags: the helper image the
// nodes have offline, and FLOCK_E2E_FLOCK_ARGS. A test that restarts it
// with other flags restores these.
func flockArgs() []string {
	return append([]string{"--helper-image=" + cluster.TestImage}, strings.Fields(os.Getenv("FLOCK_E2E_FLOCK_ARGS"))...)
}

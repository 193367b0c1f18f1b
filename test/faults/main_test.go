// Package faults is the fault suite (`make test-faults`, issue 16): a
// workload of Flocks being created, scaled, rolled and deleted runs on a
// local control plane of its own (package test/cluster, kwok nodes) while the
// suite kills, hangs and restarts its components and removes and partitions
// nodes, one fault at a time and then overlapping. Invariants are checked
// continuously from watches (invariants_test.go); after each fault every
// Flock must converge.
//
// The control plane: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok with faultNodes nodes, and two flock-apiservers that
// share one etcd process of their own (etcd-flock): the main one behind the
// APIService and an extra one, so that the controller's Lease can move
// between them. flock-apiserver's default embedded etcd runs in its process;
// here the store is a separate process, so killing it is a fault of its own,
// and killing a flock-apiserver kills only the server.
package faults

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"flock.dev/flock/test/cluster"
)

const (
	// faultNodes is the number of kwok nodes.
	faultNodes = 10
	// upTimeout bounds bringing the control plane up.
	upTimeout = 5 * time.Minute
	// serverStartTimeout bounds starting one flock-apiserver.
	serverStartTimeout = 3 * time.Minute
)

// serverArgs make the controller's Lease move quickly (a leader that cannot
// renew for 6s loses it) and the servers log what the controller writes.
var serverArgs = []string{"-v=2", "--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}

var (
	// env is the control plane; pair its two flock-apiservers and their etcd.
	env  *cluster.Cluster
	pair *cluster.FlockPair
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) (code int) {
	root, binDir, workDir, err := cluster.SuiteDirs("faults", "test-faults")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "faults: work directory (certificates, kubeconfig, logs): %s\n", workDir)

	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			fmt.Fprintln(os.Stderr, "faults: interrupted")
			cancel()
		}
	}()

	upCtx, upCancel := context.WithTimeout(ctx, upTimeout)
	defer upCancel()
	c, err := cluster.Up(upCtx, cluster.Options{
		BinDir:     binDir,
		WorkDir:    workDir,
		RepoRoot:   root,
		Nodes:      faultNodes,
		WithoutDNS: true,
		DataRoot:   filepath.Join(workDir, "data"),
		FlockArgs:  mainFlockArgs(),
		// --v=2: the scheduler logs why it leaves a pod unscheduled, which
		// a convergence failure prints (unscheduledPods).
		SchedulerArgs: []string{"--v=2"},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults: bringing up the local control plane failed: %v\nfaults: logs kept in %s\n", err, filepath.Join(workDir, "logs"))
		return 1
	}
	env = c
	code = 1
	defer func() {
		if pair != nil && pair.A != nil {
			_ = pair.A.Signal(syscall.SIGCONT)
		}
		if err := c.Down(); err != nil {
			fmt.Fprintln(os.Stderr, "faults: stopping the local control plane:", err)
			code = 1
		}
		if code != 0 || os.Getenv("FLOCK_E2E_KEEP") != "" {
			fmt.Fprintf(os.Stderr, "faults: logs kept in %s\n", c.LogDir())
		} else {
			_ = os.RemoveAll(workDir)
		}
	}()
	pair, err = c.StartFlockPair(upCtx, "flock", mainFlockArgs(), serverArgs, serverStartTimeout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults: starting the two flock-apiservers failed: %v\n", err)
		return 1
	}
	return m.Run()
}

// mainFlockArgs are the main flock-apiserver's own flags (the cleanup
// helper's image, as in the e2e suite; kwok does not pull it).
func mainFlockArgs() []string {
	return []string{"--helper-image=" + cluster.TestImage}
}

// This file restarts a component after a fault (a SIGKILL, a crash) the way
// its supervisor would: the same binary, flags, environment and data
// directory, then waits until it is ready again.

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// RestartComponent starts p again (same name, binary, flags, environment,
// so the same ports and data directory) once it has exited, and waits until
// the new process is ready: etcd /health, kube-apiserver /readyz,
// kube-controller-manager and kube-scheduler /healthz, flock-apiserver
// /readyz (and, for the server behind the APIService, Flocks served through
// kube-apiserver again). p must have been stopped or killed by the caller;
// it is an error if it still runs.
func (c *Cluster) RestartComponent(ctx context.Context, p *Process) (*Process, error) {
	np, main, err := c.restart(ctx, p)
	if err != nil {
		return nil, err
	}
	return np, c.waitComponentReady(ctx, np, main)
}

// RestartComponentUnready starts p again as RestartComponent does, but
// does not wait for it to be ready: a flock-apiserver that refuses to serve
// its store never is.
func (c *Cluster) RestartComponentUnready(ctx context.Context, p *Process) (*Process, error) {
	np, _, err := c.restart(ctx, p)
	return np, err
}

// restart starts p again and reports whether it is the flock-apiserver
// behind the APIService.
func (c *Cluster) restart(ctx context.Context, p *Process) (*Process, bool, error) {
	if !p.Exited() {
		return nil, false, fmt.Errorf("%s (pid %d) is still running", p.Name, p.PID())
	}
	c.mu.Lock()
	main := c.flock == p
	c.mu.Unlock()
	np, err := c.startPath(ctx, p.Name, p.Path, p.Args, p.Env)
	if err != nil {
		return nil, false, err
	}
	klog.FromContext(ctx).Info("Restarted", "component", p.Name, "oldPID", p.PID(), "pid", np.PID())
	if main {
		c.mu.Lock()
		c.flock = np
		c.mu.Unlock()
	}
	return np, main, nil
}

// waitComponentReady waits until the component p runs is ready, judged by
// its binary and flags; main says p is the flock-apiserver behind the
// APIService.
func (c *Cluster) waitComponentReady(ctx context.Context, p *Process, main bool) error {
	switch filepath.Base(p.Path) {
	case "etcd":
		url := flagValue(p.Args, "--listen-client-urls")
		client := &http.Client{Timeout: 2 * time.Second}
		return c.waitFor(ctx, p, p.Name+" /health", func(ctx context.Context) (bool, error) {
			return httpOK(ctx, client, url+"/health")
		})
	case "kube-apiserver":
		client, err := c.HTTPClient(c.PKI.Admin)
		if err != nil {
			return err
		}
		return c.waitFor(ctx, p, p.Name+" /readyz", func(ctx context.Context) (bool, error) {
			return httpOK(ctx, client, c.KubeAPIServerURL+"/readyz")
		})
	case "kube-controller-manager", "kube-scheduler":
		client, err := c.HTTPClient(nil)
		if err != nil {
			return err
		}
		url := "https://127.0.0.1:" + flagValue(p.Args, "--secure-port") + "/healthz"
		return c.waitFor(ctx, p, p.Name+" /healthz", func(ctx context.Context) (bool, error) {
			return httpOK(ctx, client, url)
		})
	case "flock-apiserver":
		if err := c.waitFlockReady(ctx, p, "https://127.0.0.1:"+flagValue(p.Args, "--secure-port")); err != nil {
			return err
		}
		if main {
			return c.waitFlockServed(ctx, p)
		}
	}
	return nil
}

// flagValue returns the value of the last --name=value in args ("" if none).
func flagValue(args []string, name string) string {
	v := ""
	for _, a := range args {
		if s, ok := strings.CutPrefix(a, name+"="); ok {
			v = s
		}
	}
	return v
}

// Component returns the latest process of the component named name (e.g.
// "kube-apiserver", "etcd"), or nil.
func (c *Cluster) Component(name string) *Process {
	return c.processNamed(name)
}

package e2e

// Issue 14.5 end to end: the embedded controller acts under its own
// ServiceAccount with only the verbs it uses; the server's ServiceAccount only
// reads; the test-only standalone mode refuses to listen beyond loopback.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"flock.dev/flock/test/cluster"
)

// What each ServiceAccount may do, asked of kube-apiserver's RBAC with
// `kubectl auth can-i --as`, while a Flock still gets its members: the pods
// are created by the controller's identity, not the server's.
func TestLeastPrivilege(t *testing.T) {
	ns := newNamespace(t)
	createFlock(t, newFlock("members", ns, 2))
	waitFlockAvailable(t, ns, "members")

	server := "--as=system:serviceaccount:" + cluster.FlockNamespace + ":" + cluster.FlockServiceAccount
	controller := "--as=system:serviceaccount:" + cluster.FlockNamespace + ":" + cluster.ControllerServiceAccount
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "pods", "-n", ns, controller}, "yes"},
		{[]string{"delete", "pods", "-n", ns, controller}, "yes"},
		{[]string{"create", "services", "-n", ns, controller}, "yes"},
		{[]string{"delete", "services", "-n", ns, controller}, "no"},
		{[]string{"update", "events", "-n", ns, controller}, "no"},
		{[]string{"get", "secrets", "-n", ns, controller}, "no"},
		{[]string{"get", "pods", "-n", ns, controller}, "no"},
		{[]string{"update", "leases/flock-controller", "-n", cluster.FlockNamespace, controller}, "yes"},
		{[]string{"update", "leases/kube-scheduler", "-n", cluster.FlockNamespace, controller}, "no"},
		{[]string{"get", "leases/other", "-n", cluster.FlockNamespace, controller}, "no"},
		{[]string{"create", "pods", "-n", ns, server}, "no"},
		{[]string{"create", "services", "-n", ns, server}, "no"},
		{[]string{"list", "pods", "-n", ns, server}, "no"},
		{[]string{"update", "leases/flock-controller", "-n", cluster.FlockNamespace, server}, "no"},
		{[]string{"list", "nodes", server}, "yes"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		res, _ := env.Kubectl(ctx, env.KubectlBuilt(), append([]string{"auth", "can-i"}, tc.args...)...)
		cancel()
		if got := strings.TrimSpace(res.Stdout); got != tc.want {
			t.Errorf("kubectl auth can-i %s: %q, want %q (stderr %s)", strings.Join(tc.args, " "), got, tc.want, res.Stderr)
		}
	}
}

// --insecure-standalone-for-tests allows every request, so flock-apiserver
// refuses it on any address but loopback, before it serves anything.
func TestStandaloneRefusedBeyondLoopback(t *testing.T) {
	bin := filepath.Join(os.Getenv("FLOCK_BIN"), "flock-apiserver")
	if !filepath.IsAbs(bin) {
		root, err := cluster.FindRepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(root, bin)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	ports, err := cluster.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "--insecure-standalone-for-tests", "--bind-address=0.0.0.0",
		"--secure-port="+strconv.Itoa(ports[0]), "--cert-dir="+filepath.Join(dir, "certs"),
		"--embedded-etcd-data-dir="+filepath.Join(dir, "etcd"),
		"--embedded-etcd-client-port="+strconv.Itoa(ports[1]), "--embedded-etcd-peer-port="+strconv.Itoa(ports[2]))
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("flock-apiserver --insecure-standalone-for-tests --bind-address=0.0.0.0 did not exit with an error (err %v):\n%s", err, out)
	}
	if want := "--insecure-standalone-for-tests allows every request: it needs --bind-address on loopback (127.0.0.1 or ::1), got 0.0.0.0"; !strings.Contains(string(out), want) {
		t.Errorf("output:\n%s\nwant it to contain %q", out, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "etcd")); !os.IsNotExist(err) {
		t.Errorf("the refused server created its etcd data directory (stat: %v)", err)
	}
}

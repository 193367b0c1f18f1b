package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"flock.dev/flock/internal/syncbuffer"
	"flock.dev/flock/test/cluster"
)

// `make local-up` in a fresh copy of the checkout, as a new user would run
// it: it reaches "ready", kubectl works against it, a second one says so
// plainly, SIGTERM stops every process and exits 0, and a busy port is
// reported by name.
//
// To keep the run short the copy reuses the control-plane binaries already
// built in FLOCK_BIN (symlinks, and FLOCK_TOOLS_BIN so `make tools` sees them
// as current); flock-apiserver and local-up are built from the copy.
func TestLocalUp(t *testing.T) {
	fresh := copyCheckout(t)
	bin := filepath.Join(fresh, "_output", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok", "coredns"} {
		if err := os.Symlink(filepath.Join(env.BinDir(), b), filepath.Join(bin, b)); err != nil {
			t.Fatal(err)
		}
	}
	baseEnv := append(os.Environ(), "FLOCK_TOOLS_BIN="+env.BinDir(), "NODES=2", "REAL_NODES=0",
		"KUBE_APISERVER_PORT=0", "FLOCK_APISERVER_PORT=0")
	baseEnv = withoutEnv(baseEnv, "FLOCK_BIN", "KUBECONFIG", "MAKEFLAGS", "MAKELEVEL")

	// make local-up, in its own process group like a terminal job.
	var stdout, stderr syncbuffer.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	mk := exec.Command("make", "-C", fresh, "local-up")
	mk.Env = baseEnv
	pr, pw := io.Pipe()
	mk.Stdout = io.MultiWriter(&stdout, pw)
	mk.Stderr = &stderr
	mk.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := mk.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() {
		waitErr = mk.Wait()
		pw.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			// Stop what is left by the process group we created;
			// local-up's children die with it (Pdeathsig).
			_ = syscall.Kill(-mk.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = syscall.Kill(-mk.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		}
		keepLocalUpOutput(t, fresh, fmt.Sprintf("make local-up: %v", waitErr), stdout.String(), stderr.String())
	})
	lr := newLineReader(pr)
	line := lr.waitFor(t, regexp.MustCompile(`^\s*export KUBECONFIG=`), 6*time.Minute)
	kubeconfig := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "export KUBECONFIG="))
	if want := filepath.Join(fresh, "_output", "local-up", "kubeconfig"); kubeconfig != want {
		t.Errorf("KUBECONFIG = %q, want %q", kubeconfig, want)
	}
	out := stdout.String()
	for _, want := range []string{"local-up: ready", "kubectl get flocks -A", "Ctrl-C"} {
		if !strings.Contains(out, want) {
			t.Errorf("local-up output lacks %q:\n%s", want, out)
		}
	}

	// kubectl against it, with the kubeconfig it printed.
	run := func(path string, args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Env = append(withoutEnv(os.Environ(), "KUBECONFIG"), "KUBECONFIG="+kubeconfig, "HOME="+t.TempDir())
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		return o.String(), e.String(), err
	}
	kubectls := []string{env.KubectlBuilt().Path}
	if k, err := env.KubectlSystem(); err == nil {
		kubectls = append(kubectls, k.Path)
	} else {
		t.Errorf("no system kubectl: %v", err)
	}
	for _, k := range kubectls {
		o, e, err := run(k, "get", "flocks", "-A")
		if err != nil || !strings.Contains(e, "No resources found") {
			t.Errorf("%s get flocks -A: %v\n%s%s", k, err, o, e)
		}
		o, e, err = run(k, "get", "apiservice", cluster.APIServiceName, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
		if err != nil || o != "True" {
			t.Errorf("%s: APIService Available = %q (%v %s)", k, o, err, e)
		}
		o, _, err = run(k, "get", "nodes", "--no-headers")
		if err != nil || len(regexp.MustCompile(`(?m)^node-\d+\s+Ready\s`).FindAllString(o, -1)) != 2 {
			t.Errorf("%s get nodes: want 2 Ready nodes (NODES=2): %v\n%s", k, err, o)
		}
	}

	// A second local-up while this one runs says so plainly.
	pid := cluster.ReadLockPID(filepath.Join(fresh, "_output", "local-up"))
	if pid <= 0 {
		t.Fatal("no PID in the lock file")
	}
	second := exec.CommandContext(ctx, filepath.Join(fresh, "hack", "local-up.sh"))
	second.Env = baseEnv
	secondOut, err := second.CombinedOutput()
	if err == nil {
		t.Errorf("a second local-up succeeded:\n%s", secondOut)
	}
	if want := fmt.Sprintf("already running in %s (pid %d)", filepath.Join(fresh, "_output", "local-up"), pid); !strings.Contains(string(secondOut), want) {
		t.Errorf("second local-up: want %q in:\n%s", want, secondOut)
	}

	// SIGTERM (what `kill` sends): local-up stops everything and exits 0,
	// and so does make.
	pids := startedPIDs(stderr.String())
	if len(pids) < 6 {
		t.Fatalf("found %d started processes in local-up's log, want at least 6:\n%s", len(pids), tail(stderr.String(), 30))
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("make local-up after SIGTERM: %v, want exit 0\n%s", waitErr, tail(stderr.String(), 20))
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("local-up did not exit within 2 minutes of SIGTERM")
	}
	if !strings.Contains(stdout.String(), "stopped every process") {
		t.Errorf("local-up's goodbye is missing:\n%s", tail(stdout.String(), 5))
	}
	for name, p := range pids {
		if err := syscall.Kill(p, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after local-up exited (kill -0: %v)", name, p, err)
		}
	}
	if port := serverPort(t, kubeconfig); port > 0 {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
			c.Close()
			t.Errorf("kube-apiserver's port %d still accepts connections", port)
		}
	}

	// A busy port is reported by name.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	third := exec.CommandContext(ctx, filepath.Join(fresh, "hack", "local-up.sh"))
	third.Env = append(withoutEnv(baseEnv, "KUBE_APISERVER_PORT"), "KUBE_APISERVER_PORT="+strconv.Itoa(busy))
	thirdOut, err := third.CombinedOutput()
	if err == nil {
		t.Errorf("local-up with a busy port succeeded:\n%s", thirdOut)
	}
	if want := fmt.Sprintf("port %d for kube-apiserver is already in use", busy); !strings.Contains(string(thirdOut), want) {
		t.Errorf("busy port: want %q in:\n%s", want, thirdOut)
	}
}

// copyCheckout copies the files git knows (tracked and untracked, not
// ignored) of the repository into a new directory: what a fresh clone of
// this working tree holds.
func copyCheckout(t *testing.T) string {
	t.Helper()
	root := env.RepoRoot()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "flock")
	n := 0
	for _, rel := range strings.Split(string(out), "\x00") {
		if rel == "" {
			continue
		}
		src := filepath.Join(root, rel)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the working tree, or not a file
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n < 20 {
		t.Fatalf("copied only %d files from %s", n, root)
	}
	return dst
}

var startedRE = regexp.MustCompile(`"Started" component="([^"]+)" pid=(\d+)`)

// startedPIDs finds the processes local-up reported starting.
func startedPIDs(log string) map[string]int {
	out := map[string]int{}
	for _, m := range startedRE.FindAllStringSubmatch(log, -1) {
		pid, _ := strconv.Atoi(m[2])
		out[m[1]] = pid
	}
	return out
}

var serverRE = regexp.MustCompile(`server: https://127\.0\.0\.1:(\d+)`)

func serverPort(t *testing.T, kubeconfig string) int {
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Errorf("read %s: %v", kubeconfig, err)
		return 0
	}
	m := serverRE.FindSubmatch(data)
	if m == nil {
		t.Errorf("no server URL in %s", kubeconfig)
		return 0
	}
	p, _ := strconv.Atoi(string(m[1]))
	return p
}

func withoutEnv(env []string, names ...string) []string {
	var out []string
next:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// keepLocalUpOutput, when t failed, keeps what a local-up run in the fresh
// checkout printed and its components' logs (which go with t's temporary
// directory) in the suite's log directory, and says where. It logs only a
// few lines itself, so that t's own errors stay at the end of a CI
// excerpt, right above.
func keepLocalUpOutput(t *testing.T, fresh, how, stdout, stderr string) {
	t.Helper()
	if !t.Failed() {
		return
	}
	dir := filepath.Join(env.LogDir(), t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("%s; keeping its output: %v", how, err)
		return
	}
	err := os.CopyFS(filepath.Join(dir, "logs"), os.DirFS(filepath.Join(fresh, "_output", "local-up", "logs")))
	err = errors.Join(err, os.WriteFile(filepath.Join(dir, "stdout.txt"), []byte(stdout), 0o644),
		os.WriteFile(filepath.Join(dir, "stderr.txt"), []byte(stderr), 0o644))
	t.Logf("%s; its output and logs are kept in %s (%v); stderr's last lines:\n%s", how, dir, err, tail(stderr, 5))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

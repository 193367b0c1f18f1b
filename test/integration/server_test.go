package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	versioned "flock.dev/flock/pkg/generated/clientset/versioned"
)

// binary is the flock-apiserver built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "flock-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "flock-apiserver")
	build := exec.Command("go", "build", "-o", binary, "flock.dev/flock/cmd/flock-apiserver")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building flock-apiserver:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is one flock-apiserver process with an embedded etcd member.
type server struct {
	t       *testing.T
	dir     string // data dir (etcd) and cert dir, kept across restarts
	ports   [3]int // secure, etcd client, etcd peer
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	config  *rest.Config
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServer starts flock-apiserver standalone (no core cluster: the
// documented test-only mode) on loopback, and waits until /readyz is ok.
func startServer(t *testing.T) *server {
	t.Helper()
	s := &server{t: t, dir: t.TempDir()}
	for i := range s.ports {
		s.ports[i] = freePort(t)
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) start() {
	t := s.t
	t.Helper()
	s.logPath = filepath.Join(s.dir, fmt.Sprintf("flock-apiserver-%d.log", time.Now().UnixNano()))
	logFile, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(binary,
		"--insecure-standalone-for-tests",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(s.ports[0]),
		"--cert-dir="+filepath.Join(s.dir, "certs"),
		"--embedded-etcd-data-dir="+filepath.Join(s.dir, "etcd"),
		"--embedded-etcd-client-port="+strconv.Itoa(s.ports[1]),
		"--embedded-etcd-peer-port="+strconv.Itoa(s.ports[2]),
		"-v=2",
	)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); logFile.Close(); close(s.exited) }()

	s.config = &rest.Config{
		Host:            "https://127.0.0.1:" + strconv.Itoa(s.ports[0]),
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(s.dir, "certs", "apiserver.crt")},
		Timeout:         30 * time.Second,
	}
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-s.exited:
			return false, errors.New("flock-apiserver exited")
		default:
		}
		if _, err := os.Stat(s.config.TLSClientConfig.CAFile); err != nil {
			return false, nil
		}
		client, err := rest.HTTPClientFor(s.config)
		if err != nil {
			return false, nil
		}
		resp, err := client.Get(s.config.Host + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		log, _ := os.ReadFile(s.logPath)
		t.Fatalf("flock-apiserver not ready: %v\n%s", err, log)
	}
}

// stop sends SIGTERM and waits (bounded) for the process, then SIGKILL.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.t.Logf("flock-apiserver (pid %d) did not stop on SIGTERM; killing it", s.cmd.Process.Pid)
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

func (s *server) restart() {
	s.stop()
	if s.cmd.ProcessState != nil && !s.cmd.ProcessState.Success() {
		log, _ := os.ReadFile(s.logPath)
		s.t.Fatalf("flock-apiserver did not exit cleanly on SIGTERM: %v\n%s", s.cmd.ProcessState, log)
	}
	s.start()
}

func (s *server) client() versioned.Interface {
	return versioned.NewForConfigOrDie(s.config)
}

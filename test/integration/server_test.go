package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	versioned "flock.dev/flock/pkg/generated/clientset/versioned"
	"flock.dev/flock/test/cluster"
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
	t      *testing.T
	dir    string // data dir (etcd) and cert dir, kept across restarts
	ports  []int  // secure, etcd client, etcd peer
	proc   *cluster.Process
	config *rest.Config
	// args are flags added to every start, changed between restarts.
	args []string
}

// startServer starts flock-apiserver standalone (no core cluster: the
// documented test-only mode) on loopback, and waits until /readyz is ok.
func startServer(t *testing.T) *server {
	t.Helper()
	ports, err := cluster.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, dir: t.TempDir(), ports: ports}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) start() {
	t := s.t
	t.Helper()
	var err error
	s.proc, err = cluster.StartProcess("flock-apiserver", binary, append([]string{
		"--insecure-standalone-for-tests",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(s.ports[0]),
		"--cert-dir=" + filepath.Join(s.dir, "certs"),
		"--embedded-etcd-data-dir=" + filepath.Join(s.dir, "etcd"),
		"--embedded-etcd-client-port=" + strconv.Itoa(s.ports[1]),
		"--embedded-etcd-peer-port=" + strconv.Itoa(s.ports[2]),
		"-v=2",
	}, s.args...), nil, filepath.Join(s.dir, "flock-apiserver.log"), s.dir)
	if err != nil {
		t.Fatal(err)
	}

	s.config = &rest.Config{
		Host:            "https://127.0.0.1:" + strconv.Itoa(s.ports[0]),
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(s.dir, "certs", "apiserver.crt")},
		Timeout:         30 * time.Second,
	}
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if s.proc.Exited() {
			return false, errors.New("flock-apiserver exited")
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
		t.Fatalf("flock-apiserver not ready: %v\n%s", err, s.proc.LogTail(50))
	}
}

// stop sends SIGTERM and waits (bounded) for the process, then SIGKILL.
func (s *server) stop() {
	if s.proc == nil {
		return
	}
	if err := s.proc.Stop(30 * time.Second); err != nil {
		s.t.Error(err)
	}
}

// restart stops the server, which must exit cleanly on SIGTERM, and starts
// it again on the same data.
func (s *server) restart() {
	s.stop()
	if err := s.proc.ExitErr(); err != nil {
		s.t.Fatalf("flock-apiserver did not exit cleanly on SIGTERM: %v\n%s", err, s.proc.LogTail(50))
	}
	s.start()
}

func (s *server) client() versioned.Interface {
	return versioned.NewForConfigOrDie(s.config)
}

package cluster

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestNewPKI(t *testing.T) {
	p, err := NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if p.ClusterCA.Cert.Equal(p.FrontProxyCA.Cert) || p.ClusterCA.Cert.Subject.CommonName == p.FrontProxyCA.Cert.Subject.CommonName {
		t.Fatal("front-proxy CA must differ from the cluster CA")
	}
	verify := func(kp *KeyPair, ca *CA, usage x509.ExtKeyUsage, name string) error {
		_, err := kp.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name, KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	server, client := x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth
	for _, tc := range []struct {
		desc   string
		kp     *KeyPair
		ca     *CA
		usage  x509.ExtKeyUsage
		name   string
		wantOK bool
	}{
		{"flock serving for the APIService name", p.FlockAPIServer, p.ClusterCA, server, FlockServiceDNSName, true},
		{"flock serving for localhost", p.FlockAPIServer, p.ClusterCA, server, "localhost", true},
		{"flock serving for 127.0.0.1", p.FlockAPIServer, p.ClusterCA, server, "127.0.0.1", true},
		{"flock serving for another service", p.FlockAPIServer, p.ClusterCA, server, "api.flock-system.svc", false},
		{"flock serving is not from the front-proxy CA", p.FlockAPIServer, p.FrontProxyCA, server, "localhost", false},
		{"kube-apiserver serving for 127.0.0.1", p.KubeAPIServer, p.ClusterCA, server, "127.0.0.1", true},
		{"kube-apiserver serving for kubernetes.default.svc", p.KubeAPIServer, p.ClusterCA, server, "kubernetes.default.svc", true},
		{"controller-manager serving for 127.0.0.1", p.ControllerManager, p.ClusterCA, server, "127.0.0.1", true},
		{"scheduler serving for 127.0.0.1", p.Scheduler, p.ClusterCA, server, "127.0.0.1", true},
		{"admin is a client of the cluster CA", p.Admin, p.ClusterCA, client, "", true},
		{"admin is not a serving cert", p.Admin, p.ClusterCA, server, "", false},
		{"admin is not trusted by the front-proxy CA", p.Admin, p.FrontProxyCA, client, "", false},
		{"front-proxy client is a client of the front-proxy CA", p.FrontProxyClient, p.FrontProxyCA, client, "", true},
		{"front-proxy client is not trusted by the cluster CA", p.FrontProxyClient, p.ClusterCA, client, "", false},
	} {
		err := verify(tc.kp, tc.ca, tc.usage, tc.name)
		if (err == nil) != tc.wantOK {
			t.Errorf("%s: verify error = %v, want ok=%v", tc.desc, err, tc.wantOK)
		}
	}
	if got := p.Admin.Cert.Subject; got.CommonName != "admin" || len(got.Organization) != 1 || got.Organization[0] != "system:masters" {
		t.Errorf("admin subject = %v, want CN=admin O=system:masters", got)
	}
	if got := p.FrontProxyClient.Cert.Subject.CommonName; got != FrontProxyClientName {
		t.Errorf("front-proxy client CN = %q, want %q", got, FrontProxyClientName)
	}
	for _, f := range []string{p.ServiceAccountKeyFile, p.ServiceAccountPubFile, p.ClusterCA.KeyFile, p.FlockAPIServer.KeyFile} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".key") && st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, want 0600", f, st.Mode().Perm())
		}
	}
	if _, err := p.FlockAPIServer.TLSCertificate(); err != nil {
		t.Errorf("flock serving pair does not load: %v", err)
	}
	other, err := p.FrontProxyCA.IssueClient(t.TempDir(), "intruder", "not-the-aggregator")
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(other, p.FrontProxyCA, client, ""); err != nil || other.Cert.Subject.CommonName != "not-the-aggregator" {
		t.Errorf("IssueClient: CN %q, verify %v", other.Cert.Subject.CommonName, err)
	}
}

func TestAllocatePorts(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	var p Ports
	p.FlockAPIServer = busyPort
	err = allocatePorts(p.named())
	var inUse *PortInUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("allocatePorts with a busy port: err = %v, want *PortInUseError", err)
	}
	if inUse.Name != "flock-apiserver" || inUse.Port != busyPort {
		t.Errorf("PortInUseError = %+v, want flock-apiserver port %d", inUse, busyPort)
	}
	if !strings.Contains(err.Error(), "flock-apiserver") || !strings.Contains(err.Error(), strconv.Itoa(busyPort)) {
		t.Errorf("message %q does not name the component and port", err)
	}

	var q Ports
	if err := allocatePorts(q.named()); err != nil {
		t.Fatal(err)
	}
	seen := map[int]string{}
	for _, np := range q.named() {
		if *np.port <= 0 {
			t.Errorf("%s: no port allocated", np.name)
		}
		if prev, dup := seen[*np.port]; dup {
			t.Errorf("%s and %s both got port %d", prev, np.name, *np.port)
		}
		seen[*np.port] = np.name
	}
	free, err := FreePorts(3)
	if err != nil || len(free) != 3 || free[0] == free[1] || free[1] == free[2] || free[0] == free[2] {
		t.Errorf("FreePorts(3) = %v, %v", free, err)
	}
}

func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := ReadLockPID(dir); got != os.Getpid() {
		t.Errorf("lock file PID = %d, want %d", got, os.Getpid())
	}
	_, err = lockDir(dir)
	var running *AlreadyRunningError
	if !errors.As(err, &running) {
		t.Fatalf("second lock: err = %v, want *AlreadyRunningError", err)
	}
	if running.PID != os.Getpid() || !strings.Contains(err.Error(), "already running") || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Errorf("second lock error = %q (pid %d), want it to say already running with pid %d", err, running.PID, os.Getpid())
	}
	l.release()
	l2, err := lockDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.release()
}

// TestHelperProcess is not a test: the process tests run the test binary as
// a child that behaves as FLOCK_CLUSTER_HELPER says.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("FLOCK_CLUSTER_HELPER")
	if mode == "" {
		return
	}
	if mode == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	}
	os.Stdout.WriteString("helper up\n")
	time.Sleep(time.Minute)
	os.Exit(3)
}

func startHelper(t *testing.T, mode string) *Process {
	t.Helper()
	log := filepath.Join(t.TempDir(), "helper.log")
	p, err := StartProcess("helper-"+mode, os.Args[0], []string{"-test.run=^TestHelperProcess$"},
		[]string{"FLOCK_CLUSTER_HELPER=" + mode}, log, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.LogTail(5), "helper up") {
		if time.Now().After(deadline) || p.Exited() {
			t.Fatalf("helper did not start: %s", p.LogTail(5))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

func TestProcessStop(t *testing.T) {
	t.Run("SIGTERM is enough", func(t *testing.T) {
		p := startHelper(t, "plain")
		start := time.Now()
		if err := p.Stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if !p.Exited() || time.Since(start) > 5*time.Second {
			t.Fatalf("exited=%v after %v", p.Exited(), time.Since(start))
		}
		if err := p.ExitErr(); err == nil || !strings.Contains(err.Error(), "signal: terminated") {
			t.Errorf("exit = %v, want killed by SIGTERM", p.ExitErr())
		}
		if p.Unexpected() {
			t.Error("a stopped process counts as unexpected")
		}
	})
	t.Run("SIGKILL after the grace period", func(t *testing.T) {
		p := startHelper(t, "ignore-term")
		start := time.Now()
		if err := p.Stop(300 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 300*time.Millisecond || el > 10*time.Second {
			t.Errorf("stop took %v, want the grace period then a kill", el)
		}
		if err := p.ExitErr(); err == nil || !strings.Contains(err.Error(), "signal: killed") {
			t.Errorf("exit = %v, want killed by SIGKILL", p.ExitErr())
		}
	})
	t.Run("unexpected exit", func(t *testing.T) {
		p := startHelper(t, "plain")
		if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("no exit after SIGKILL")
		}
		if !p.Unexpected() {
			t.Error("a process that died on its own is not reported as unexpected")
		}
		if d := p.exitDescription(); !strings.Contains(d, "helper up") || !strings.Contains(d, p.LogFile) {
			t.Errorf("exit description lacks the log: %q", d)
		}
	})
}

func TestPatchRegistration(t *testing.T) {
	objs := func(insecure bool) []*unstructured.Unstructured {
		svc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": FlockServiceName, "namespace": FlockNamespace},
			"spec": map[string]any{"type": "ExternalName", "externalName": "localhost",
				"ports": []any{map[string]any{"name": "https", "port": int64(443), "targetPort": int64(443)}}},
		}}
		spec := map[string]any{"group": "flock.dev", "version": "v1alpha1",
			"service": map[string]any{"name": FlockServiceName, "namespace": FlockNamespace, "port": int64(443)}}
		if insecure {
			spec["insecureSkipTLSVerify"] = true
		}
		api := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": APIServiceName}, "spec": spec,
		}}
		return []*unstructured.Unstructured{svc, api}
	}
	ca := []byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")
	o := objs(false)
	if err := patchRegistration(o, 9443, ca); err != nil {
		t.Fatal(err)
	}
	ports, _, _ := unstructured.NestedSlice(o[0].Object, "spec", "ports")
	if p := ports[0].(map[string]any); p["port"] != int64(9443) || p["targetPort"] != int64(9443) || p["name"] != "https" {
		t.Errorf("service port = %v", p)
	}
	if got, _, _ := unstructured.NestedInt64(o[1].Object, "spec", "service", "port"); got != 9443 {
		t.Errorf("APIService port = %d, want 9443", got)
	}
	bundle, _, _ := unstructured.NestedString(o[1].Object, "spec", "caBundle")
	if dec, err := base64.StdEncoding.DecodeString(bundle); err != nil || string(dec) != string(ca) {
		t.Errorf("caBundle = %q (%v), want the CA PEM", bundle, err)
	}
	if err := patchRegistration(objs(true), 9443, ca); err == nil || !strings.Contains(err.Error(), "insecureSkipTLSVerify") {
		t.Errorf("insecureSkipTLSVerify accepted: %v", err)
	}
	if err := patchRegistration(objs(false)[:1], 9443, ca); err == nil {
		t.Error("manifests without the APIService accepted")
	}
}

func TestPrefixEnd(t *testing.T) {
	for in, want := range map[string]string{"/registry/": "/registry0", "a\xff": "b", "": "\x00"} {
		if got := string(prefixEnd([]byte(in))); got != want {
			t.Errorf("prefixEnd(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUsesExternalEtcd(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--etcd-servers="}, false},
		{[]string{"--etcd-servers=http://127.0.0.1:1"}, true},
		{[]string{"--etcd-servers", "http://127.0.0.1:1"}, true},
		{[]string{"--etcd-prefix=/x"}, false},
	} {
		if got := usesExternalEtcd(tc.args); got != tc.want {
			t.Errorf("usesExternalEtcd(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestOptionsComplete(t *testing.T) {
	bin := t.TempDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if err := os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{BinDir: bin, WorkDir: t.TempDir(), RepoRoot: t.TempDir()}
	err := o.complete()
	var missing *MissingBinariesError
	if !errors.As(err, &missing) {
		t.Fatalf("err = %v, want *MissingBinariesError", err)
	}
	want := "kube-controller-manager kube-scheduler kwok coredns flock-apiserver"
	if got := strings.Join(missing.Missing, " "); got != want {
		t.Errorf("missing = %v, want %s", missing.Missing, want)
	}
	if !strings.Contains(err.Error(), "make tools build") {
		t.Errorf("message %q does not say how to fix it", err)
	}
	// Without DNS and flock-apiserver, neither binary is needed.
	o = Options{BinDir: bin, WorkDir: t.TempDir(), RepoRoot: t.TempDir(), WithoutDNS: true, WithoutFlock: true}
	if err := o.complete(); !errors.As(err, &missing) || strings.Join(missing.Missing, " ") != "kube-controller-manager kube-scheduler kwok" {
		t.Errorf("WithoutDNS, WithoutFlock: err = %v, want only kube-controller-manager kube-scheduler kwok missing", err)
	}
}

func TestHandlersInFlight(t *testing.T) {
	dump := "goroutine 1 [IO wait]:\nnet/http.(*conn).readRequest(...)\n\n" +
		"goroutine 7 [select]:\nk8s.io/apiserver/pkg/endpoints/filters.stuck(...)\nnet/http.serverHandler.ServeHTTP(...)\n\n" +
		"goroutine 9 [running]:\nruntime/pprof.writeGoroutineStacks(...)\nnet/http/pprof.handler.ServeHTTP(...)\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/pprof/goroutine" || r.URL.Query().Get("debug") != "2" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, dump)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "goroutines")
	got := handlersInFlight(srv.Client(), srv.URL, file)
	if !strings.Contains(got, "filters.stuck") || strings.Contains(got, "readRequest") || strings.Contains(got, "writeGoroutineStacks") {
		t.Errorf("want only the stuck handler's stack, got:\n%s", got)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != dump {
		t.Errorf("dump file: %v, %q", err, b)
	}
	srv.Close()
	if got := handlersInFlight(srv.Client(), srv.URL, file); !strings.HasPrefix(got, "no goroutine dump") {
		t.Errorf("closed server: %s", got)
	}
}

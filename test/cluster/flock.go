package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/klog/v2"
)

// LocalOverlay is the kustomize overlay, relative to the repository root, that
// registers a flock-apiserver running on the host.
const LocalOverlay = "artifacts/deploy/overlays/dev"

// FieldManager is the server-side apply field manager of the harness.
const FieldManager = "flock-harness"

// flockTokenSeconds is the lifetime of flock-apiserver's ServiceAccount token.
const flockTokenSeconds = 7 * 24 * 3600

// FlockServer is a flock-apiserver process with its address.
type FlockServer struct {
	*Process
	// URL is https://127.0.0.1:<port>.
	URL  string
	Port int
	// EtcdURL is its embedded etcd's client URL (empty with --etcd-servers).
	EtcdURL string
}

// RegistrationManifests renders the local overlay with the built kubectl's
// kustomize and fills in what is only known at run time: the flock-apiserver
// port (Service and APIService) and the APIService caBundle (the CA that
// signed flock-apiserver's serving certificate). It refuses an APIService
// with insecureSkipTLSVerify.
func (c *Cluster) RegistrationManifests(ctx context.Context) ([]*unstructured.Unstructured, error) {
	overlay := filepath.Join(c.opts.RepoRoot, LocalOverlay)
	res, err := c.Kubectl(ctx, c.KubectlBuilt(), "kustomize", overlay)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", overlay, err)
	}
	objs, err := decodeManifests([]byte(res.Stdout))
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", overlay, err)
	}
	if err := patchRegistration(objs, c.Ports.FlockAPIServer, c.PKI.ClusterCA.CertPEM()); err != nil {
		return nil, fmt.Errorf("%s: %w", overlay, err)
	}
	return objs, nil
}

// patchRegistration points the flock-apiserver Service and the APIServices at
// port and sets their caBundle to caPEM.
func patchRegistration(objs []*unstructured.Unstructured, flockPort int, caPEM []byte) error {
	port := int64(flockPort)
	var sawService, sawAPIService bool
	for _, o := range objs {
		switch {
		case o.GetKind() == "Service" && o.GetName() == FlockServiceName && o.GetNamespace() == FlockNamespace:
			sawService = true
			ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
			if len(ports) == 0 {
				ports = []any{map[string]any{"name": "https", "protocol": "TCP"}}
			}
			for _, p := range ports {
				pm, ok := p.(map[string]any)
				if !ok {
					return fmt.Errorf("Service %s: malformed spec.ports", o.GetName())
				}
				pm["port"] = port
				pm["targetPort"] = port
			}
			if err := unstructured.SetNestedSlice(o.Object, ports, "spec", "ports"); err != nil {
				return err
			}
		case o.GetKind() == "APIService":
			if skip, _, _ := unstructured.NestedBool(o.Object, "spec", "insecureSkipTLSVerify"); skip {
				return fmt.Errorf("APIService %s sets insecureSkipTLSVerify; the harness requires a caBundle", o.GetName())
			}
			if o.GetName() == APIServiceName {
				sawAPIService = true
			}
			if err := unstructured.SetNestedField(o.Object, base64.StdEncoding.EncodeToString(caPEM), "spec", "caBundle"); err != nil {
				return err
			}
			if err := unstructured.SetNestedField(o.Object, port, "spec", "service", "port"); err != nil {
				return err
			}
		}
	}
	if !sawService || !sawAPIService {
		return fmt.Errorf("want Service %s/%s and APIService %s", FlockNamespace, FlockServiceName, APIServiceName)
	}
	return nil
}

func decodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// applyRegistration applies the registration manifests with server-side apply.
func (c *Cluster) applyRegistration(ctx context.Context) error {
	objs, err := c.RegistrationManifests(ctx)
	if err != nil {
		return err
	}
	return c.applyObjects(ctx, objs, LocalOverlay)
}

// applyObjects applies objs, from source, with server-side apply.
func (c *Cluster) applyObjects(ctx context.Context, objs []*unstructured.Unstructured, source string) error {
	items := make([]any, 0, len(objs))
	for _, o := range objs {
		items = append(items, o.Object)
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	if _, err := c.KubectlInput(ctx, c.KubectlBuilt(), string(list),
		"apply", "--server-side", "--field-manager="+FieldManager, "-f", "-"); err != nil {
		return fmt.Errorf("apply %s: %w", source, err)
	}
	klog.FromContext(ctx).Info("Applied manifests", "source", source, "objects", len(objs))
	return nil
}

// writeFlockKubeconfig writes the kubeconfigs of flock-apiserver's two
// ServiceAccounts: flock-apiserver (the server) and flock-controller (its
// controller), so each gets exactly the permissions its RBAC manifests grant.
func (c *Cluster) writeFlockKubeconfig(ctx context.Context) error {
	var err error
	if c.FlockKubeconfigPath, err = c.writeServiceAccountKubeconfig(ctx, FlockServiceAccount, "flock-apiserver.kubeconfig"); err != nil {
		return err
	}
	c.ControllerKubeconfigPath, err = c.writeServiceAccountKubeconfig(ctx, ControllerServiceAccount, "flock-controller.kubeconfig")
	return err
}

// writeServiceAccountKubeconfig writes file, a kubeconfig with a fresh token
// of ServiceAccount flock-system/sa, and returns its path.
func (c *Cluster) writeServiceAccountKubeconfig(ctx context.Context, sa, file string) (string, error) {
	exp := int64(flockTokenSeconds)
	tr, err := c.Kube.CoreV1().ServiceAccounts(FlockNamespace).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request a token for ServiceAccount %s/%s: %w", FlockNamespace, sa, err)
	}
	path := c.path(file)
	return path, writeKubeconfig(path, c.KubeAPIServerURL, c.PKI.ClusterCA.CertPEM(), kubeconfigUser{
		name: "system:serviceaccount:" + FlockNamespace + ":" + sa, token: tr.Status.Token,
	})
}

// flockArgs are the flags of a flock-apiserver serving on port with an
// embedded etcd on etcdPort/etcdPeerPort in dataDir, followed by extra.
func (c *Cluster) flockArgs(port, etcdPort, etcdPeerPort int, dataDir string, extra []string) []string {
	kc := c.FlockKubeconfigPath
	args := []string{
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--tls-cert-file=" + c.PKI.FlockAPIServer.CertFile,
		"--tls-private-key-file=" + c.PKI.FlockAPIServer.KeyFile,
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--controller-kubeconfig=" + c.ControllerKubeconfigPath,
		"--embedded-etcd-data-dir=" + dataDir,
		"--embedded-etcd-client-port=" + strconv.Itoa(etcdPort),
		"--embedded-etcd-peer-port=" + strconv.Itoa(etcdPeerPort),
	}
	if c.opts.DataRoot != "" {
		args = append(args, "--data-root="+c.opts.DataRoot)
	}
	return append(args, extra...)
}

// usesExternalEtcd reports whether args point flock-apiserver at an external etcd.
func usesExternalEtcd(args []string) bool {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok && v != "" {
			return true
		}
		if a == "--etcd-servers" && i+1 < len(args) && args[i+1] != "" {
			return true
		}
	}
	return false
}

func (c *Cluster) startFlock(ctx context.Context) error {
	if err := c.applyRegistration(ctx); err != nil {
		return err
	}
	if err := c.writeFlockKubeconfig(ctx); err != nil {
		return err
	}
	if c.opts.FlockReplicas > 1 {
		if err := c.startFlockReplicas(ctx); err != nil {
			return err
		}
	} else if err := c.runMainFlock(ctx, c.opts.FlockArgs); err != nil {
		return err
	}
	// What a user tries first.
	if _, err := c.Kubectl(ctx, c.KubectlBuilt(), "get", "flocks", "-A"); err != nil {
		return fmt.Errorf("flock-apiserver is up, but kubectl cannot list flocks: %w", err)
	}
	return nil
}

// runMainFlock starts the flock-apiserver the APIService routes to and waits
// until flocks can be listed through kube-apiserver.
func (c *Cluster) runMainFlock(ctx context.Context, extra []string) error {
	args := c.flockArgs(c.Ports.FlockAPIServer, c.Ports.FlockEtcd, c.Ports.FlockEtcdPeer, c.path("flock", "etcd"), extra)
	p, err := c.start(ctx, "flock-apiserver", "flock-apiserver", args, c.opts.FlockEnv)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.flock = p
	c.mu.Unlock()
	c.FlockEtcdURL = ""
	if !usesExternalEtcd(extra) {
		c.FlockEtcdURL = "http://127.0.0.1:" + strconv.Itoa(c.Ports.FlockEtcd)
	}
	if err := c.waitFlockReady(ctx, p, c.FlockAPIServerURL); err != nil {
		return err
	}
	return c.waitFlockServed(ctx, p)
}

// waitFlockServed waits until the APIService is Available, Flocks can be
// listed through kube-apiserver and their schema is in its OpenAPI; p is
// the process whose exit ends the wait.
func (c *Cluster) waitFlockServed(ctx context.Context, p *Process) error {
	if err := c.waitFor(ctx, p, "APIService "+APIServiceName+" Available", func(ctx context.Context) (bool, error) {
		return c.APIServiceAvailable(ctx)
	}); err != nil {
		return err
	}
	// Available can be stale right after a restart; a real list through
	// the aggregator is the proof.
	if err := c.waitFor(ctx, p, "flocks listable through kube-apiserver", func(ctx context.Context) (bool, error) {
		_, err := c.Flock.FlockV1alpha1().Flocks("").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, err
	}); err != nil {
		return err
	}
	// kube-apiserver aggregates the OpenAPI document a few seconds after the
	// APIService is Available; until then `kubectl explain` cannot find Flocks.
	return c.waitFor(ctx, p, "the Flock schema in kube-apiserver's OpenAPI v3", func(ctx context.Context) (bool, error) {
		body, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/openapi/v3/apis/flock.dev/v1alpha1").DoRaw(ctx)
		return err == nil && strings.Contains(string(body), "dev.flock.v1alpha1.Flock"), err
	})
}

func (c *Cluster) waitFlockReady(ctx context.Context, p *Process, url string) error {
	client, err := c.HTTPClient(c.PKI.Admin)
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, p, p.Name+" /readyz", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, client, url+"/readyz")
	}); err != nil {
		return err
	}
	// /readyz covers the front-proxy CA's content (check
	// requestheader-client-ca), read from kube-system/extension-apiserver-
	// authentication; this proves the aggregator's identity is accepted.
	proxy, err := c.HTTPClient(c.PKI.FrontProxyClient)
	if err != nil {
		return err
	}
	err = c.waitFor(ctx, p, p.Name+" accepting the front-proxy identity", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/apis/flock.dev/v1alpha1", nil)
		if err != nil {
			return false, err
		}
		req.Header.Set("X-Remote-User", "flock-harness")
		req.Header.Set("X-Remote-Group", "system:masters")
		ok, err := doOK(proxy, req)
		if !ok {
			// Each attempt on a new connection: a TLS client sends its
			// certificate only when the server's handshake names its CA
			// among the acceptable ones, and flock-apiserver names the
			// front-proxy CA only once it has read it. A connection made
			// before that stays anonymous for as long as it is kept alive
			// (CI saw 451 attempts over 90 s refused as system:anonymous).
			proxy.CloseIdleConnections()
		}
		return ok, err
	})
	if err != nil && !p.Exited() {
		err = fmt.Errorf("%w\n%s", err, handlersInFlight(client, url, p.LogFile+".goroutines"))
	}
	return err
}

// handlersInFlight describes the HTTP handlers a running server is inside,
// from its goroutine dump (the whole dump is saved to dumpFile): what a
// request that never answers waits on.
func handlersInFlight(client *http.Client, url, dumpFile string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/debug/pprof/goroutine?debug=2", nil)
	if err != nil {
		return "no goroutine dump: " + err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return "no goroutine dump: " + err.Error()
	}
	defer resp.Body.Close()
	dump, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("no goroutine dump: %d %v", resp.StatusCode, err)
	}
	_ = os.WriteFile(dumpFile, dump, 0o644)
	var out []string
	stacks := strings.Split(string(dump), "\n\n")
	for _, g := range stacks {
		if !strings.Contains(g, "ServeHTTP") || strings.Contains(g, "pprof.handler") {
			continue
		}
		lines := strings.Split(g, "\n")
		out = append(out, strings.Join(lines[:min(len(lines), 40)], "\n"))
		if len(out) == 3 {
			break
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("no HTTP handler in flight in %s (%d goroutines)", dumpFile, len(stacks))
	}
	return fmt.Sprintf("HTTP handlers in flight (first %d; all goroutines in %s):\n%s", len(out), dumpFile, strings.Join(out, "\n\n"))
}

// APIServiceAvailable reports whether APIService v1alpha1.flock.dev has
// condition Available=True; the error carries the condition's reason and
// message otherwise.
func (c *Cluster) APIServiceAvailable(ctx context.Context) (bool, error) {
	raw, err := c.Kube.Discovery().RESTClient().Get().
		AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/" + APIServiceName).DoRaw(ctx)
	if err != nil {
		return false, err
	}
	var svc struct {
		Status struct {
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &svc); err != nil {
		return false, err
	}
	for _, cond := range svc.Status.Conditions {
		if cond.Type == "Available" {
			if cond.Status == metav1.ConditionTrue {
				return true, nil
			}
			return false, fmt.Errorf("APIService %s Available=%s: %s: %s", APIServiceName, cond.Status, cond.Reason, cond.Message)
		}
	}
	return false, fmt.Errorf("APIService %s has no Available condition yet", APIServiceName)
}

// RestartFlockAPIServer stops the flock-apiserver behind the APIService
// (SIGTERM, bounded) and starts it again on the same ports and data
// directory with the harness's flags followed by args (which replace
// Options.FlockArgs), then waits until flocks are served through
// kube-apiserver again.
func (c *Cluster) RestartFlockAPIServer(ctx context.Context, args []string) (*Process, error) {
	if c.opts.WithoutFlock {
		return nil, errors.New("cluster was started WithoutFlock")
	}
	old := c.FlockProcess()
	if err := old.Stop(DefaultStopGrace); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Stopped flock-apiserver for a restart", "pid", old.PID(), "exit", old.ExitErr())
	if err := c.runMainFlock(ctx, args); err != nil {
		return nil, err
	}
	return c.FlockProcess(), nil
}

// StartExtraFlockAPIServer starts another flock-apiserver (named name, e.g.
// "flock-apiserver-2") on free ports with its own embedded etcd data
// directory, the same ServiceAccount kubeconfig and serving certificate, and
// the harness's flags followed by args (e.g. --etcd-servers of an etcd from
// StartEtcd, so that two servers share one store). The APIService keeps
// routing to the main one. It waits for /readyz; Down stops it.
func (c *Cluster) StartExtraFlockAPIServer(ctx context.Context, name string, args []string) (*FlockServer, error) {
	if c.opts.WithoutFlock {
		return nil, errors.New("cluster was started WithoutFlock")
	}
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	fa := c.flockArgs(ports[0], ports[1], ports[2], c.path("extra", name, "etcd"), args)
	p, err := c.start(ctx, name, "flock-apiserver", fa, nil)
	if err != nil {
		return nil, err
	}
	s := &FlockServer{Process: p, Port: ports[0], URL: "https://127.0.0.1:" + strconv.Itoa(ports[0])}
	if !usesExternalEtcd(args) {
		s.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	}
	if err := c.waitFlockReady(ctx, p, s.URL); err != nil {
		return nil, err
	}
	return s, nil
}

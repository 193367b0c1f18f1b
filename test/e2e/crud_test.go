package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/test/cluster"
)

// Create, get (table), list, watch, patch and delete through kube-apiserver
// with kubectl.
func TestKubectlCRUD(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		out := kubectlInput(t, k, flockManifest("web", ns, 1), "create", "-f", "-")
		if !strings.Contains(out, "flock.flock.dev/web created") {
			t.Errorf("create printed %q", out)
		}

		// get: the server's table, not just NAME and AGE.
		table := kubectl(t, k, "get", "flocks", "-n", ns)
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if len(lines) != 2 {
			t.Fatalf("get flocks: want a header and one row:\n%s", table)
		}
		header := strings.Fields(lines[0])
		if strings.Join(header, " ") != "NAME READY AGE" {
			t.Errorf("table header = %v, want NAME READY AGE", header)
		}
		if row := strings.Fields(lines[1]); len(row) != 3 || row[0] != "web" || !regexp.MustCompile(`^\d+/1$`).MatchString(row[1]) {
			t.Errorf("table row = %v, want web <ready>/1 <age>", row)
		}
		wide := strings.Fields(strings.SplitN(kubectl(t, k, "get", "fl", "web", "-n", ns, "-o", "wide"), "\n", 2)[0])
		if strings.Join(wide, " ") != "NAME READY AGE SERVICE NODES" {
			t.Errorf("wide header = %v, want NAME READY AGE SERVICE NODES", wide)
		}

		// Defaults applied by the server are visible in get -o json.
		var got struct {
			Spec struct {
				Replicas    int    `json:"replicas"`
				ServiceName string `json:"serviceName"`
			} `json:"spec"`
		}
		if err := json.Unmarshal([]byte(kubectl(t, k, "get", "flock/web", "-n", ns, "-o", "json")), &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Replicas != 1 || got.Spec.ServiceName != "web" {
			t.Errorf("spec = %+v, want replicas 1 and serviceName defaulted to web", got.Spec)
		}

		// list across namespaces.
		kubectlInput(t, k, flockManifest("db", ns, 1), "apply", "-f", "-")
		names := kubectl(t, k, "get", "flocks", "-A", "-o", `jsonpath={range .items[?(@.metadata.namespace=="`+ns+`")]}{.metadata.name}{" "}{end}`)
		if strings.TrimSpace(names) != "db web" {
			t.Errorf("list -A in %s = %q, want \"db web\"", ns, names)
		}

		// watch sees a change made elsewhere.
		wctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		cmd := env.KubectlCommand(wctx, k, "get", "fl", "web", "-n", ns, "-w",
			"-o", `jsonpath={.metadata.name} replicas={.spec.replicas} team={.metadata.labels.team}{"\n"}`)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		lr := newLineReader(stdout)
		lr.waitFor(t, regexp.MustCompile(`^web replicas=1 team=$`), 30*time.Second)

		// patch (merge) and see it through the watch and a get.
		out = kubectl(t, k, "patch", "fl", "web", "-n", ns, "--type=merge", "-p", `{"metadata":{"labels":{"team":"blue"}},"spec":{"replicas":2}}`)
		if !strings.Contains(out, "flock.flock.dev/web patched") {
			t.Errorf("patch printed %q", out)
		}
		lr.waitFor(t, regexp.MustCompile(`^web replicas=2 team=blue$`), 30*time.Second)
		if got := kubectl(t, k, "get", "fl", "web", "-n", ns, "-o", "jsonpath={.spec.replicas}"); got != "2" {
			t.Errorf("replicas after patch = %q", got)
		}
		// A JSON patch too.
		kubectl(t, k, "patch", "fl", "web", "-n", ns, "--type=json", "-p", `[{"op":"replace","path":"/spec/replicas","value":1}]`)
		lr.waitFor(t, regexp.MustCompile(`^web replicas=1 team=blue$`), 30*time.Second)

		// delete, and it is gone.
		out = kubectl(t, k, "delete", "fl", "web", "-n", ns, "--wait=true", "--timeout=60s")
		if !strings.Contains(out, `flock.flock.dev "web" deleted`) {
			t.Errorf("delete printed %q", out)
		}
		res := kubectlFails(t, k, "", "get", "fl", "web", "-n", ns)
		if !strings.Contains(res.Stderr, "NotFound") || !strings.Contains(res.Stderr, `flocks.flock.dev "web" not found`) {
			t.Errorf("get after delete: %s", res.Stderr)
		}
	})
}

// `kubectl scale` goes through the scale subresource and changes spec.replicas.
func TestKubectlScale(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		createFlock(t, newFlock("x", ns, 1))
		out := kubectl(t, k, "scale", "fl/x", "-n", ns, "--replicas=2")
		if !strings.Contains(out, "flock.flock.dev/x scaled") {
			t.Errorf("scale printed %q", out)
		}
		f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "x", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if f.Spec.Replicas == nil || *f.Spec.Replicas != 2 {
			t.Errorf("spec.replicas after scale = %v, want 2", f.Spec.Replicas)
		}
		// The scale subresource itself.
		var scale struct {
			Kind string
			Spec struct{ Replicas int }
		}
		raw := kubectl(t, k, "get", "--raw", fmt.Sprintf("/apis/flock.dev/v1alpha1/namespaces/%s/flocks/x/scale", ns))
		if err := json.Unmarshal([]byte(raw), &scale); err != nil {
			t.Fatal(err)
		}
		if scale.Kind != "Scale" || scale.Spec.Replicas != 2 {
			t.Errorf("scale subresource = %s", raw)
		}
		// --current-replicas is a precondition, as for built-in kinds.
		res := kubectlFails(t, k, "", "scale", "fl/x", "-n", ns, "--current-replicas=3", "--replicas=1")
		if !strings.Contains(res.Stderr, "Expected replicas to be 3, was 2") {
			t.Errorf("scale with a wrong precondition: %s", res.Stderr)
		}
	})
}

// Server-side apply by two managers of one field conflicts exactly as it does
// for a built-in kind.
func TestServerSideApplyConflict(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		cm := func(v string) string {
			return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: %s\ndata:\n  size: %q\n", ns, v)
		}
		type conflict struct{ manifest1, manifest2, field, kind string }
		for _, c := range []conflict{
			{cm("1"), cm("2"), ".data.size", "configmap"},
			{flockManifest("x", ns, 1), flockManifest("x", ns, 2), ".spec.replicas", "flock.flock.dev"},
		} {
			kubectlInput(t, k, c.manifest1, "apply", "--server-side", "--field-manager=alice", "-f", "-")
			res := kubectlFails(t, k, c.manifest2, "apply", "--server-side", "--field-manager=bob", "-f", "-")
			want := `Apply failed with 1 conflict: conflict with "alice": ` + c.field
			if !strings.Contains(res.Stderr, want) {
				t.Errorf("%s: second manager's apply: want %q in:\n%s", c.kind, want, res.Stderr)
			}
			if !strings.Contains(res.Stderr, "--force-conflicts") {
				t.Errorf("%s: conflict message lacks the --force-conflicts advice:\n%s", c.kind, res.Stderr)
			}
			out := kubectlInput(t, k, c.manifest2, "apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", "-")
			if !strings.Contains(out, c.kind+"/x serverside-applied") {
				t.Errorf("%s: forced apply printed %q", c.kind, out)
			}
		}
		f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "x", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *f.Spec.Replicas != 2 {
			t.Errorf("replicas = %d after bob forced 2", *f.Spec.Replicas)
		}
		owners := map[string]bool{}
		for _, mf := range f.ManagedFields {
			if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:replicas"`) {
				owners[mf.Manager] = true
			}
		}
		if !owners["bob"] || owners["alice"] {
			t.Errorf("spec.replicas owners = %v, want only bob", owners)
		}
	})
}

// Flocks live in flock-apiserver's etcd, under its prefix, and never in
// kube-apiserver's.
func TestStoredInFlockEtcd(t *testing.T) {
	if env.FlockEtcdURL == "" {
		t.Fatal("flock-apiserver runs with an external etcd; this test checks the embedded one")
	}
	ns := newNamespace(t)
	createFlock(t, newFlock("stored", ns, 1))
	ctx := ctxFor(t)

	flockKeys, err := cluster.EtcdKeys(ctx, env.FlockEtcdURL, "/registry/flock.dev/")
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, k := range flockKeys {
		if strings.HasSuffix(k, "/"+ns+"/stored") {
			mine = append(mine, k)
		}
	}
	if len(mine) != 1 || !strings.Contains(mine[0], "flocks") {
		t.Fatalf("flock-apiserver's etcd: keys for %s/stored = %v, want one flocks key under /registry/flock.dev/ (all: %v)", ns, mine, flockKeys)
	}

	kubeKeys, err := cluster.EtcdKeys(ctx, env.EtcdURL, "")
	if err != nil {
		t.Fatal(err)
	}
	sawNamespace := false
	for _, k := range kubeKeys {
		if k == "/registry/namespaces/"+ns {
			sawNamespace = true
		}
		// The controller's own objects named after the Flock (its headless
		// Service and PodDisruptionBudget) belong in kube-apiserver's etcd;
		// the Flock itself does not.
		ownObject := strings.HasPrefix(k, "/registry/services/") || strings.HasPrefix(k, "/registry/poddisruptionbudgets/")
		if strings.HasPrefix(k, "/registry/flock.dev") || strings.Contains(k, "/flocks/") || (strings.HasSuffix(k, "/"+ns+"/stored") && !ownObject) {
			t.Errorf("kube-apiserver's etcd holds %q", k)
		}
	}
	if !sawNamespace {
		t.Errorf("kube-apiserver's etcd lacks /registry/namespaces/%s; is %s the right etcd? (%d keys)", ns, env.EtcdURL, len(kubeKeys))
	}

	// Deleting removes the key.
	if err := env.Flock.FlockV1alpha1().Flocks(ns).Delete(ctx, "stored", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "flock key removed from etcd", func(ctx context.Context) error {
		if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, "stored", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still served (err %v)", err)
		}
		keys, err := cluster.EtcdKeys(ctx, env.FlockEtcdURL, mine[0])
		if err != nil {
			return err
		}
		if len(keys) != 0 {
			return fmt.Errorf("key %s still present", mine[0])
		}
		return nil
	})
}

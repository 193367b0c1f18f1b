package e2e

// Clients other than kubectl (issue 7): the generated Go clientset, apply
// configurations and informers used from another program
// (examples/create-and-wait), the OpenAPI v2 and v3 documents that every
// client generator reads, and a JavaScript client (@kubernetes/client-node,
// examples/node-client).

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Go example builds against the module and creates a Flock that becomes
// Available; a Flock the cluster cannot hold makes it exit non-zero.
func TestGoClientExample(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "create-and-wait")
	if out, err := runTool(t, 5*time.Minute, env.RepoRoot(), nil, goBin, "build", "-o", bin, "./examples/create-and-wait"); err != nil {
		t.Fatalf("go build ./examples/create-and-wait: %v\n%s", err, out)
	}
	ns := newNamespace(t)
	run := func(args ...string) (string, error) {
		return runTool(t, 2*time.Minute, t.TempDir(), nil, bin, append([]string{"--kubeconfig=" + env.KubeconfigPath, "--namespace=" + ns}, args...)...)
	}

	start := time.Now()
	out, err := run("--name=from-go", "--replicas=2", "--timeout=100s")
	if err != nil {
		t.Fatalf("create-and-wait: %v\n%s", err, out)
	}
	// It returns as soon as the Flock is Available, not at its timeout.
	if took := time.Since(start); took > 60*time.Second {
		t.Errorf("create-and-wait took %v", took)
	}
	f := getFlock(t, ns, "from-go")
	if err := flockAvailableErr(f); err != nil {
		t.Errorf("the example returned but the Flock is not Available: %v", err)
	}
	want := []string{fmt.Sprintf("flock %s/from-go is Available: 2/2 members ready", ns)}
	for _, m := range f.Status.Members {
		want = append(want, fmt.Sprintf("member %d: pod %s on node %s (%s) ready=true", m.Ordinal, m.Pod, m.Node, m.Hostname))
	}
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	// It used server-side apply with its own field manager.
	applied := false
	for _, mf := range f.ManagedFields {
		applied = applied || (mf.Manager == "create-and-wait" && mf.Operation == metav1.ManagedFieldsOperationApply)
	}
	if !applied || f.Labels["app.kubernetes.io/managed-by"] != "create-and-wait" {
		t.Errorf("managedFields %v labels %v: want an Apply by create-and-wait", f.ManagedFields, f.Labels)
	}

	// Running it again is harmless: same object, still Available.
	if out, err := run("--name=from-go", "--replicas=2", "--timeout=60s"); err != nil || !strings.Contains(out, "is Available: 2/2") {
		t.Errorf("second run: %v\n%s", err, out)
	}
	if again := getFlock(t, ns, "from-go"); again.UID != f.UID || again.Generation != f.Generation {
		t.Errorf("second run changed the Flock: uid %s -> %s, generation %d -> %d", f.UID, again.UID, f.Generation, again.Generation)
	}

	// Refused by admission: exit 1 with the reason.
	out, err = run("--name=too-big", "--replicas=50", "--timeout=20s")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, "eligible") || !strings.Contains(out, "50") {
		t.Errorf("too many replicas: err %v, output:\n%s", err, out)
	}
	if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "too-big", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused Flock exists: %v", err)
	}
}

// /openapi/v2 through kube-apiserver: the Flock definitions, complete and
// documented, and the operations with their patch types.
func TestOpenAPIV2(t *testing.T) {
	waitFlockOpenAPI(t)
	raw, err := env.Kube.Discovery().RESTClient().Get().AbsPath("/openapi/v2").SetHeader("Accept", "application/json").DoRaw(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
		Paths       map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	checkFlockSchemas(t, doc.Definitions, "#/definitions/")

	item := doc.Paths["/apis/flock.dev/v1alpha1/namespaces/{namespace}/flocks/{name}"]
	patch, _ := item["patch"].(map[string]any)
	consumes := fmt.Sprint(patch["consumes"])
	for _, ct := range []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"} {
		if !strings.Contains(consumes, ct) {
			t.Errorf("PATCH flocks/{name} does not consume %s (consumes %s)", ct, consumes)
		}
	}
	for _, sub := range []string{"status", "scale"} {
		if _, ok := doc.Paths["/apis/flock.dev/v1alpha1/namespaces/{namespace}/flocks/{name}/"+sub]; !ok {
			t.Errorf("no path for the %s subresource", sub)
		}
	}
	if _, ok := doc.Paths["/apis/flock.dev/v1alpha1/watch/namespaces/{namespace}/flocks"]; !ok {
		t.Error("no watch path for flocks")
	}
}

// /openapi/v3/apis/flock.dev/v1alpha1 through kube-apiserver: the same
// schemas, self-contained.
func TestOpenAPIV3(t *testing.T) {
	waitFlockOpenAPI(t)
	index, err := env.Kube.Discovery().RESTClient().Get().AbsPath("/openapi/v3").DoRaw(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(index), `"apis/flock.dev/v1alpha1"`) {
		t.Errorf("/openapi/v3 does not list apis/flock.dev/v1alpha1")
	}
	raw, err := env.Kube.Discovery().RESTClient().Get().AbsPath("/openapi/v3/apis/flock.dev/v1alpha1").DoRaw(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI    string                    `json:"openapi"`
		Paths      map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi = %q", doc.OpenAPI)
	}
	checkFlockSchemas(t, doc.Components.Schemas, "#/components/schemas/")
	for _, p := range []string{
		"/apis/flock.dev/v1alpha1/namespaces/{namespace}/flocks",
		"/apis/flock.dev/v1alpha1/namespaces/{namespace}/flocks/{name}",
		"/apis/flock.dev/v1alpha1/namespaces/{namespace}/flocks/{name}/status",
		"/apis/flock.dev/v1alpha1/namespaces/{namespace}/flocks/{name}/scale",
	} {
		if _, ok := doc.Paths[p]; !ok {
			t.Errorf("no path %s", p)
		}
	}
}

// checkFlockSchemas asserts the Flock schemas in an OpenAPI document (v2
// definitions or v3 components.schemas, refs starting with refPrefix).
func checkFlockSchemas(t *testing.T, defs map[string]map[string]any, refPrefix string) {
	t.Helper()
	const p = "dev.flock.v1alpha1."
	flock := defs[p+"Flock"]
	if flock == nil {
		t.Fatalf("no %sFlock schema among %d", p, len(defs))
	}
	if gvk := fmt.Sprint(flock["x-kubernetes-group-version-kind"]); gvk != "[map[group:flock.dev kind:Flock version:v1alpha1]]" {
		t.Errorf("Flock x-kubernetes-group-version-kind = %s", gvk)
	}

	// Every Flock type and every one of its properties is documented.
	var flockTypes []string
	for name, s := range defs {
		if !strings.HasPrefix(name, p) {
			continue
		}
		flockTypes = append(flockTypes, strings.TrimPrefix(name, p))
		if desc, _ := s["description"].(string); len(desc) < 20 {
			t.Errorf("%s has no real description: %q", name, desc)
		}
		props, _ := s["properties"].(map[string]any)
		for prop, v := range props {
			if desc, _ := v.(map[string]any)["description"].(string); desc == "" {
				t.Errorf("%s.%s has no description", name, prop)
			}
		}
	}
	slices.Sort(flockTypes)
	wantTypes := []string{"Flock", "FlockDisruptionBudget", "FlockList", "FlockMember", "FlockMemberMove", "FlockMove", "FlockPlacement", "FlockSpec", "FlockStatus", "FlockStorage",
		"FlockUpdateStrategy", "MemberRecovery", "RetentionPolicy", "RollingUpdateFlockStrategy"}
	if !slices.Equal(flockTypes, wantTypes) {
		t.Errorf("Flock types = %v, want %v", flockTypes, wantTypes)
	}

	prop := func(typ, name string) map[string]any {
		t.Helper()
		props, _ := defs[p+typ]["properties"].(map[string]any)
		v, _ := props[name].(map[string]any)
		if v == nil {
			t.Errorf("%s has no property %s", typ, name)
			return map[string]any{}
		}
		return v
	}
	desc := func(v map[string]any) string { s, _ := v["description"].(string); return s }
	refOf := func(v map[string]any) string {
		if r, ok := v["$ref"].(string); ok {
			return r
		}
		if all, ok := v["allOf"].([]any); ok && len(all) == 1 {
			r, _ := all[0].(map[string]any)["$ref"].(string)
			return r
		}
		return ""
	}
	required := func(typ string) []string {
		var out []string
		for _, r := range defs[p+typ]["required"].([]any) {
			out = append(out, r.(string))
		}
		slices.Sort(out)
		return out
	}

	if r := refOf(prop("Flock", "spec")); r != refPrefix+p+"FlockSpec" {
		t.Errorf("Flock.spec ref = %q", r)
	}
	if r := refOf(prop("Flock", "status")); r != refPrefix+p+"FlockStatus" {
		t.Errorf("Flock.status ref = %q", r)
	}
	if got := required("FlockSpec"); !slices.Equal(got, []string{"selector", "template"}) {
		t.Errorf("FlockSpec required = %v", got)
	}
	replicas := prop("FlockSpec", "replicas")
	if replicas["type"] != "integer" || replicas["format"] != "int32" || !strings.Contains(desc(replicas), "may not exceed the number of eligible nodes") {
		t.Errorf("FlockSpec.replicas = %v", replicas)
	}
	if r := refOf(prop("FlockSpec", "template")); r != refPrefix+"io.k8s.api.core.v1.PodTemplateSpec" {
		t.Errorf("FlockSpec.template ref = %q", r)
	}
	if r := refOf(prop("FlockSpec", "placement")); r != refPrefix+p+"FlockPlacement" {
		t.Errorf("FlockSpec.placement ref = %q", r)
	}
	if d := desc(prop("FlockPlacement", "nodes")); !strings.Contains(d, "member i runs on nodes[i]") {
		t.Errorf("FlockPlacement.nodes description = %q", d)
	}
	if enum := fmt.Sprint(prop("RetentionPolicy", "whenDeleted")["enum"]); enum != "[Delete Retain]" {
		t.Errorf("RetentionPolicy.whenDeleted enum = %s", enum)
	}
	if enum := fmt.Sprint(prop("FlockSpec", "podManagementPolicy")["enum"]); enum != "[OrderedReady Parallel]" {
		t.Errorf("FlockSpec.podManagementPolicy enum = %s", enum)
	}
	if r := refOf(prop("RollingUpdateFlockStrategy", "maxUnavailable")); r != refPrefix+"io.k8s.apimachinery.pkg.util.intstr.IntOrString" {
		t.Errorf("RollingUpdateFlockStrategy.maxUnavailable ref = %q", r)
	}

	// status.members: a map list keyed by ordinal, merged by ordinal.
	members := prop("FlockStatus", "members")
	items, _ := members["items"].(map[string]any)
	if members["type"] != "array" || refOf(items) != refPrefix+p+"FlockMember" ||
		members["x-kubernetes-list-type"] != "map" || fmt.Sprint(members["x-kubernetes-list-map-keys"]) != "[ordinal]" ||
		members["x-kubernetes-patch-merge-key"] != "ordinal" || members["x-kubernetes-patch-strategy"] != "merge" ||
		!strings.Contains(desc(members), "durable map from ordinal to node") {
		t.Errorf("FlockStatus.members = %v", members)
	}
	if got := required("FlockMember"); !slices.Equal(got, []string{"node", "ordinal"}) {
		t.Errorf("FlockMember required = %v", got)
	}
	conditions := prop("FlockStatus", "conditions")
	if conditions["x-kubernetes-list-type"] != "map" || fmt.Sprint(conditions["x-kubernetes-list-map-keys"]) != "[type]" {
		t.Errorf("FlockStatus.conditions = %v", conditions)
	}

	// Complete: every schema reachable from Flock is in the document.
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "$ref" {
					name := strings.TrimPrefix(x.(string), refPrefix)
					if seen[name] {
						continue
					}
					seen[name] = true
					def, ok := defs[name]
					if !ok {
						t.Errorf("dangling $ref %s", x)
						continue
					}
					walk(def)
					continue
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(map[string]any{"$ref": refPrefix + p + "Flock"})
	for _, name := range []string{p + "FlockMember", "io.k8s.api.core.v1.PodTemplateSpec", "io.k8s.api.core.v1.Container", "io.k8s.apimachinery.pkg.apis.meta.v1.Condition"} {
		if !seen[name] {
			t.Errorf("%s is not reachable from Flock", name)
		}
	}
	if len(seen) < 50 {
		t.Errorf("only %d schemas reachable from Flock", len(seen))
	}
}

// npmNetworkError matches what npm prints when it cannot reach the registry.
var npmNetworkError = regexp.MustCompile(`(?i)ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network (request|connectivity)|getaddrinfo|socket hang up|request to https?://\S+ failed`)

// @kubernetes/client-node's CustomObjectsApi creates, reads, lists and
// deletes a Flock through kube-apiserver with the admin kubeconfig.
func TestNodeClient(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: the JavaScript client check needs Node.js and npm (Debian: apt-get install nodejs npm)", tool)
		}
	}
	dir := t.TempDir()
	src := filepath.Join(env.RepoRoot(), "examples", "node-client")
	for _, f := range []string{"package.json", "package-lock.json", "flock.mjs"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	npmEnv := []string{"npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false", "npm_config_fetch_retries=1", "npm_config_fetch_timeout=60000"}
	out, err := runTool(t, 4*time.Minute, dir, npmEnv, "npm", "ci", "--no-audit", "--no-fund", "--prefer-offline")
	if err != nil {
		if npmNetworkError.MatchString(out) {
			t.Skipf("SKIP: the npm registry is unreachable, so @kubernetes/client-node cannot be installed (%v); npm said:\n%s", err, out)
		}
		t.Fatalf("npm ci: %v\n%s", err, out)
	}

	ns := newNamespace(t)
	out, err = runTool(t, 90*time.Second, dir, []string{"KUBECONFIG=" + env.KubeconfigPath}, "node", "flock.mjs", ns, "from-node")
	if err != nil {
		t.Fatalf("node flock.mjs: %v\n%s", err, out)
	}
	uuid := `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
	m := regexp.MustCompile(`(?m)^created Flock ` + ns + `/from-node uid=(` + uuid + `)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no create line in:\n%s", out)
	}
	for _, want := range []string{
		// serviceName defaulted by the server: the read came from flock-apiserver.
		`(?m)^read from-node replicas=1 serviceName=from-node uid=` + m[1] + `$`,
		`(?m)^listed FlockList with 1 item\(s\): from-node$`,
		`(?m)^deleted ` + ns + `/from-node$`,
		`(?m)^gone ` + ns + `/from-node \(HTTP 404\)$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "from-node", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the script: get = %v, want NotFound", err)
	}
}

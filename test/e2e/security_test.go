package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/test/cluster"
)

// directRequest sends a request straight to flock-apiserver's port (not
// through kube-apiserver) with the given client certificate and headers.
func directRequest(t *testing.T, cert *cluster.KeyPair, method, path string, body []byte, headers map[string]string) (int, string) {
	t.Helper()
	client, err := env.HTTPClient(cert)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctxFor(t), method, env.FlockAPIServerURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// Only kube-apiserver's proxy identity may assert users to flock-apiserver.
func TestDirectAccessNeedsTheFrontProxyIdentity(t *testing.T) {
	ns := newNamespace(t)
	createFlock(t, newFlock("secret-flock", ns, 1))
	path := fmt.Sprintf("/apis/flock.dev/v1alpha1/namespaces/%s/flocks", ns)
	asAdmin := map[string]string{"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}

	intruder, err := env.PKI.FrontProxyCA.IssueClient(t.TempDir(), "intruder", "not-front-proxy-client")
	if err != nil {
		t.Fatal(err)
	}
	// The right name from the wrong CA: headers must not be trusted either.
	wrongCA, err := env.PKI.ClusterCA.IssueClient(t.TempDir(), "wrong-ca", cluster.FrontProxyClientName)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc string
		cert *cluster.KeyPair
	}{
		{"no client certificate", nil},
		{"front-proxy CA certificate with a name that is not allowed", intruder},
		{"allowed name signed by the cluster CA instead of the front-proxy CA", wrongCA},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, body := directRequest(t, tc.cert, http.MethodGet, path, nil, asAdmin)
			if code != http.StatusUnauthorized && code != http.StatusForbidden {
				t.Errorf("status = %d, want 401 or 403; body: %s", code, body)
			}
			if strings.Contains(body, "secret-flock") {
				t.Errorf("the response leaks data: %s", body)
			}
		})
	}
	// The same request with the aggregator's identity is served, so the
	// refusals above are about identity, not a broken path.
	t.Run("front-proxy-client is served", func(t *testing.T) {
		code, body := directRequest(t, env.PKI.FrontProxyClient, http.MethodGet, path, nil, asAdmin)
		if code != http.StatusOK || !strings.Contains(body, `"name":"secret-flock"`) {
			t.Errorf("status = %d, body = %s; want 200 with the flock", code, body)
		}
	})
}

// RBAC decides, through kube-apiserver and in flock-apiserver's own delegated
// authorization; the aggregated roles extend admin/edit/view.
func TestRBAC(t *testing.T) {
	ns := newNamespace(t)
	createFlock(t, newFlock("readable", ns, 1))
	ctx := ctxFor(t)
	rbac := env.Kube.RbacV1()
	if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "flock-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"flock.dev"}, Resources: []string{"flocks"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := func(name, kind, role, user string) {
		if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind("reader", "Role", "flock-reader", "reader")
	bind("editor", "ClusterRole", "edit", "editor")
	bind("viewer", "ClusterRole", "view", "viewer")

	// The built-in roles pick up Flocks through the aggregated ClusterRoles
	// (asynchronously, by the clusterrole-aggregation controller).
	eventually(t, 60*time.Second, "edit and view roles aggregate flocks", func(ctx context.Context) error {
		for _, args := range [][]string{{"create", "flocks", "--as=editor"}, {"list", "flocks", "--as=viewer"}} {
			res, err := env.Kubectl(ctx, env.KubectlBuilt(), append([]string{"auth", "can-i", "-n", ns}, args...)...)
			if err != nil {
				return fmt.Errorf("can-i %v: %q: %v", args, res.Stdout, err)
			}
		}
		return nil
	})
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		out := kubectl(t, k, "get", "fl", "-n", ns, "--as=reader", "-o", "name")
		if strings.TrimSpace(out) != "flock.flock.dev/readable" {
			t.Errorf("reader's list = %q", out)
		}
		if got := kubectl(t, k, "get", "fl", "readable", "-n", ns, "--as=reader", "-o", "jsonpath={.metadata.name}"); got != "readable" {
			t.Errorf("reader's get = %q", got)
		}
		res := kubectlFails(t, k, flockManifest("sneaky", ns, 1), "create", "-f", "-", "--as=reader")
		want := `User "reader" cannot create resource "flocks" in API group "flock.dev" in the namespace "` + ns + `"`
		if !strings.Contains(res.Stderr, "(Forbidden)") || !strings.Contains(res.Stderr, want) {
			t.Errorf("reader's create: want forbidden with %q, got:\n%s", want, res.Stderr)
		}
		res = kubectlFails(t, k, "", "delete", "fl", "readable", "-n", ns, "--as=reader")
		if !strings.Contains(res.Stderr, `cannot delete resource "flocks"`) {
			t.Errorf("reader's delete: %s", res.Stderr)
		}
		if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "sneaky", metav1.GetOptions{}); err == nil {
			t.Error("the forbidden create stored a Flock")
		}

		canI := func(want bool, args ...string) {
			t.Helper()
			full := append([]string{"auth", "can-i"}, append(args, "-n", ns)...)
			ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
			defer cancel()
			res, err := env.Kubectl(ctx, k, full...)
			got := strings.TrimSpace(res.Stdout)
			wantOut := map[bool]string{true: "yes", false: "no"}[want]
			if got != wantOut || (err == nil) != want {
				t.Errorf("kubectl %s = %q (err %v), want %q", strings.Join(full, " "), got, err, wantOut)
			}
		}
		canI(true, "list", "flocks", "--as=reader")
		canI(true, "get", "flocks.flock.dev", "--as=reader")
		canI(false, "create", "flocks", "--as=reader")
		canI(false, "delete", "flocks", "--as=reader")
		canI(false, "list", "flocks", "--as=stranger")
		canI(false, "create", "flocks", "--as=viewer")
		canI(true, "watch", "flocks", "--as=viewer")
		canI(true, "update", "flocks/scale", "--as=editor")
	})

	kubectlInput(t, env.KubectlBuilt(), flockManifest("edited", ns, 1), "create", "-f", "-", "--as=editor")

	// flock-apiserver authorizes on its own (SubjectAccessReview), not only
	// kube-apiserver: as reader through the front-proxy identity.
	t.Run("flock-apiserver's delegated authorization", func(t *testing.T) {
		path := fmt.Sprintf("/apis/flock.dev/v1alpha1/namespaces/%s/flocks", ns)
		asReader := map[string]string{"X-Remote-User": "reader"}
		code, body := directRequest(t, env.PKI.FrontProxyClient, http.MethodGet, path, nil, asReader)
		if code != http.StatusOK || !strings.Contains(body, `"name":"readable"`) {
			t.Errorf("reader's direct list: %d %s", code, body)
		}
		obj := []byte(fmt.Sprintf(`{"apiVersion":"flock.dev/v1alpha1","kind":"Flock","metadata":{"name":"direct"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}}}}`))
		code, body = directRequest(t, env.PKI.FrontProxyClient, http.MethodPost, path, obj, asReader)
		if code != http.StatusForbidden || !strings.Contains(body, `cannot create resource \"flocks\"`) {
			t.Errorf("reader's direct create: %d %s, want 403", code, body)
		}
		code, body = directRequest(t, env.PKI.FrontProxyClient, http.MethodGet, path+"/edited", nil, asReader)
		if code != http.StatusOK || !strings.Contains(body, `"name":"edited"`) {
			t.Errorf("reader's direct get: %d %s", code, body)
		}
	})

	// flock-apiserver first asks whether a user may act on every Flock of the
	// namespace, then on the one named: a role limited by resourceNames still
	// allows exactly its names.
	t.Run("a role with resourceNames allows only its names", func(t *testing.T) {
		if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "flock-one-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"flock.dev"}, Resources: []string{"flocks"},
				Verbs: []string{"get"}, ResourceNames: []string{"readable"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bind("one-reader", "Role", "flock-one-reader", "one-reader")
		path := fmt.Sprintf("/apis/flock.dev/v1alpha1/namespaces/%s/flocks", ns)
		asOne := map[string]string{"X-Remote-User": "one-reader"}
		eventually(t, 30*time.Second, "one-reader may get readable", func(context.Context) error {
			if code, body := directRequest(t, env.PKI.FrontProxyClient, http.MethodGet, path+"/readable", nil, asOne); code != http.StatusOK || !strings.Contains(body, `"name":"readable"`) {
				return fmt.Errorf("direct get of readable: %d %s", code, body)
			}
			return nil
		})
		for _, tc := range []struct{ method, path, want string }{
			{http.MethodGet, path + "/edited", `cannot get resource \"flocks\"`},
			{http.MethodGet, path, `cannot list resource \"flocks\"`},
			{http.MethodDelete, path + "/readable", `cannot delete resource \"flocks\"`},
		} {
			if code, body := directRequest(t, env.PKI.FrontProxyClient, tc.method, tc.path, nil, asOne); code != http.StatusForbidden || !strings.Contains(body, tc.want) {
				t.Errorf("one-reader's direct %s %s: %d %s, want 403 with %s", tc.method, tc.path, code, body, tc.want)
			}
		}
		if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "readable", metav1.GetOptions{}); err != nil {
			t.Errorf("the refused delete deleted readable: %v", err)
		}
		forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
			if got := kubectl(t, k, "get", "fl", "readable", "-n", ns, "--as=one-reader", "-o", "jsonpath={.metadata.name}"); got != "readable" {
				t.Errorf("one-reader's get = %q", got)
			}
			res := kubectlFails(t, k, "", "get", "fl", "edited", "-n", ns, "--as=one-reader")
			if !strings.Contains(res.Stderr, `cannot get resource "flocks"`) {
				t.Errorf("one-reader's get of edited: %s", res.Stderr)
			}
		})
	})
}

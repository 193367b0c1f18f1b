package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"flock.dev/flock/test/cluster"
)

// The APIService is Available and carries the real CA, never
// insecureSkipTLSVerify.
func TestAPIServiceAvailable(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		var svc struct {
			Spec struct {
				Group                 string `json:"group"`
				Version               string `json:"version"`
				GroupPriorityMinimum  int    `json:"groupPriorityMinimum"`
				VersionPriority       int    `json:"versionPriority"`
				InsecureSkipTLSVerify bool   `json:"insecureSkipTLSVerify"`
				CABundle              string `json:"caBundle"`
				Service               struct {
					Name, Namespace string
					Port            int
				} `json:"service"`
			} `json:"spec"`
			Status struct {
				Conditions []struct{ Type, Status, Reason string } `json:"conditions"`
			} `json:"status"`
		}
		out := kubectl(t, k, "get", "apiservice", cluster.APIServiceName, "-o", "json")
		if err := json.Unmarshal([]byte(out), &svc); err != nil {
			t.Fatal(err)
		}
		available := false
		for _, c := range svc.Status.Conditions {
			if c.Type == "Available" {
				available = c.Status == "True"
			}
		}
		if !available {
			t.Errorf("APIService conditions = %+v, want Available=True", svc.Status.Conditions)
		}
		s := svc.Spec
		if s.Group != "flock.dev" || s.Version != "v1alpha1" || s.GroupPriorityMinimum != 1000 || s.VersionPriority != 15 {
			t.Errorf("APIService spec = %+v", s)
		}
		if s.InsecureSkipTLSVerify {
			t.Error("APIService has insecureSkipTLSVerify")
		}
		ca, err := base64.StdEncoding.DecodeString(s.CABundle)
		if err != nil || !bytes.Equal(ca, env.PKI.ClusterCA.CertPEM()) {
			t.Errorf("caBundle is not the CA that signed flock-apiserver's serving certificate (decode err %v)", err)
		}
		if s.Service.Name != cluster.FlockServiceName || s.Service.Namespace != cluster.FlockNamespace || s.Service.Port != env.Ports.FlockAPIServer {
			t.Errorf("APIService service = %+v, want %s/%s port %d", s.Service, cluster.FlockNamespace, cluster.FlockServiceName, env.Ports.FlockAPIServer)
		}
		// The route: an ExternalName Service to localhost.
		svcOut := kubectl(t, k, "get", "service", "-n", cluster.FlockNamespace, cluster.FlockServiceName,
			"-o", "jsonpath={.spec.type} {.spec.externalName} {.spec.ports[0].port}")
		if want := "ExternalName localhost " + strconv.Itoa(env.Ports.FlockAPIServer); svcOut != want {
			t.Errorf("service = %q, want %q", svcOut, want)
		}
	})
}

// `kubectl api-resources` lists flocks with short name fl, namespaced, kind
// Flock, and discovery of every group works.
func TestAPIResources(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ctx := ctxFor(t)
		res, err := env.Kubectl(ctx, k, "api-resources", "-o", "wide")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(res.Stderr, "unable to retrieve") || strings.Contains(res.Stderr, "couldn't get resource list") {
			t.Errorf("discovery errors:\n%s", res.Stderr)
		}
		var line string
		for _, l := range strings.Split(res.Stdout, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "flocks" {
				line = l
			}
		}
		if line == "" {
			t.Fatalf("flocks not listed:\n%s", res.Stdout)
		}
		// NAME SHORTNAMES APIVERSION NAMESPACED KIND VERBS CATEGORIES
		f := strings.Fields(line)
		if len(f) < 7 || f[1] != "fl" || f[2] != "flock.dev/v1alpha1" || f[3] != "true" || f[4] != "Flock" || f[len(f)-1] != "all" {
			t.Errorf("flocks line = %q, want short name fl, flock.dev/v1alpha1, namespaced, kind Flock, category all", line)
		}
		for _, verb := range []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"} {
			if !strings.Contains(f[5], verb) {
				t.Errorf("verbs %s lack %s", f[5], verb)
			}
		}
		group := kubectl(t, k, "api-resources", "--api-group=flock.dev", "--no-headers")
		if got := strings.Fields(group); len(got) == 0 || got[0] != "flocks" {
			t.Errorf("api-resources --api-group=flock.dev = %q", group)
		}
		versions := kubectl(t, k, "api-versions")
		if !regexp.MustCompile(`(?m)^flock\.dev/v1alpha1$`).MatchString(versions) {
			t.Errorf("api-versions lacks flock.dev/v1alpha1:\n%s", versions)
		}
	})
	t.Run("discovery client", func(t *testing.T) {
		groups, resources, err := env.Kube.Discovery().ServerGroupsAndResources()
		if err != nil {
			t.Fatalf("discovery reports errors: %v", err)
		}
		foundGroup := false
		for _, g := range groups {
			if g.Name == "flock.dev" && g.PreferredVersion.Version == "v1alpha1" {
				foundGroup = true
			}
		}
		var subresources []string
		for _, rl := range resources {
			if rl.GroupVersion != "flock.dev/v1alpha1" {
				continue
			}
			for _, r := range rl.APIResources {
				subresources = append(subresources, r.Name)
			}
		}
		if !foundGroup {
			t.Error("discovery lacks group flock.dev with preferred version v1alpha1")
		}
		if got := strings.Join(subresources, ","); !strings.Contains(got, "flocks/status") || !strings.Contains(got, "flocks/scale") {
			t.Errorf("flock.dev/v1alpha1 resources = %s, want flocks with status and scale", got)
		}
	})
}

// `kubectl get fl` and `kubectl get all` show Flocks.
func TestGetShortNameAndAll(t *testing.T) {
	ns := newNamespace(t)
	createFlock(t, newFlock("shorty", ns, 1))
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		out := kubectl(t, k, "get", "fl", "-n", ns)
		if !regexp.MustCompile(`(?m)^shorty\s`).MatchString(out) {
			t.Errorf("kubectl get fl:\n%s", out)
		}
		all := kubectl(t, k, "get", "all", "-n", ns)
		if !strings.Contains(all, "flock.flock.dev/shorty") {
			t.Errorf("kubectl get all lacks flock.flock.dev/shorty:\n%s", all)
		}
	})
}

// `kubectl explain` prints the field documentation from the OpenAPI schema.
func TestExplain(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		// explain wraps descriptions; compare with whitespace collapsed.
		out := strings.Join(strings.Fields(kubectl(t, k, "explain", "flock.spec.placement")), " ")
		for _, want := range []string{
			"KIND:", "Flock", "flock.dev", "v1alpha1",
			"placement",
			"nodeSelector", "NodeSelector restricts the eligible pool to nodes with these labels", // field docs,
			"nodes", "member i runs on",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("explain flock.spec.placement lacks %q:\n%s", want, out)
			}
		}
		rec := kubectl(t, k, "explain", "fl.spec", "--recursive")
		for _, want := range []string{"replicas", "placement", "storage", "template", "memberRecovery"} {
			if !strings.Contains(rec, want) {
				t.Errorf("explain fl.spec --recursive lacks %q", want)
			}
		}
	})
}

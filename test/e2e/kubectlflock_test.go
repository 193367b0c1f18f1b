// The `kubectl flock` plugin (issue 19.2), found on PATH by both kubectls:
// `members` prints every member on the node the Flock's status and the pod
// agree on; `where` finds a node's members.
package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/test/cluster"
)

// pluginPath returns PATH with a directory holding only kubectl-flock (from
// FLOCK_BIN, built by `make build`) in front.
func pluginPath(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(env.BinDir(), "kubectl-flock")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the plugin is not built (make build): %v", err)
	}
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "kubectl-flock")); err != nil {
		t.Fatal(err)
	}
	return "PATH=" + dir + ":" + os.Getenv("PATH")
}

// kubectlFlock runs `kubectl flock args...` with the plugin on PATH.
func kubectlFlock(t *testing.T, k cluster.Kubectl, path string, args ...string) string {
	t.Helper()
	res, err := kubectlWithEnv(t, k, []string{path}, "", append([]string{"flock"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return res.Stdout
}

func TestKubectlFlockMembers(t *testing.T) {
	ns := newNamespace(t)
	path := pluginPath(t)
	createFlock(t, newFlock("web", ns, 3))
	f := waitFlockAvailable(t, ns, "web")
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podByName := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		podByName[p.Name] = p
	}

	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		header, rows := splitTable(t, kubectlFlock(t, k, path, "members", "web", "-n", ns))
		if want := []string{"ORDINAL", "NODE", "ZONE", "POD", "IP", "READY", "REVISION", "DATA", "AGE"}; !slices.Equal(header, want) {
			t.Fatalf("header %q, want %q", header, want)
		}
		if len(rows) != 3 {
			t.Fatalf("rows %q, want one per member", rows)
		}
		for i, row := range rows {
			m := f.Status.Members[i]
			p := podByName[m.Pod]
			if row[0] != strconv.Itoa(i) || row[1] != m.Node || row[1] != p.Spec.NodeName || row[3] != m.Pod || row[4] != p.Status.PodIP || row[5] != "true" || row[6] != m.Revision {
				t.Errorf("row %d = %q; want ordinal %d on node %s (pod %s on %s, IP %s), ready, revision %s",
					i, row, i, m.Node, m.Pod, p.Spec.NodeName, p.Status.PodIP, m.Revision)
			}
		}

		header, _ = splitTable(t, kubectlFlock(t, k, path, "members", "web", "-n", ns, "-o", "wide"))
		if !slices.Contains(header, "HOSTNAME") {
			t.Errorf("-o wide header %q lacks HOSTNAME", header)
		}
		var js []struct {
			Ordinal int32  `json:"ordinal"`
			Node    string `json:"node"`
			Pod     string `json:"pod"`
		}
		if err := json.Unmarshal([]byte(kubectlFlock(t, k, path, "members", "web", "-n", ns, "-o", "json")), &js); err != nil || len(js) != 3 {
			t.Fatalf("-o json: %v, %+v", err, js)
		}
		for i, m := range js {
			if m.Ordinal != int32(i) || m.Node != f.Status.Members[i].Node {
				t.Errorf("-o json member %d = %+v, want node %s", i, m, f.Status.Members[i].Node)
			}
		}

		// where: member 1's node holds member 1 of this Flock.
		node := f.Status.Members[1].Node
		header, rows = splitTable(t, kubectlFlock(t, k, path, "where", node))
		if len(header) < 3 || header[0] != "NAMESPACE" || header[1] != "FLOCK" {
			t.Fatalf("where header %q", header)
		}
		found := false
		for _, row := range rows {
			if row[0] == ns && row[1] == "web" {
				found = true
				if row[2] != "1" || row[3] != node {
					t.Errorf("where %s: row %q, want member 1 on %s", node, row, node)
				}
			}
		}
		if !found {
			t.Errorf("where %s: rows %q lack %s/web member 1", node, rows, ns)
		}

		// A Flock that does not exist: kubectl's NotFound, exit 1.
		res, err := kubectlWithEnv(t, k, []string{path}, "", "flock", "members", "nope", "-n", ns)
		if err == nil || res.ExitCode != 1 {
			t.Errorf("members of a missing Flock: exit %d, %v; want exit 1", res.ExitCode, err)
		}
	})
}

// createPooledAvailable creates Flock ns/name of replicas members on the
// nodes labelled flock-e2e-pool=pool, and waits until it is Available.
func createPooledAvailable(t *testing.T, name, ns string, replicas int32, pool string) *flockv1alpha1.Flock {
	t.Helper()
	f := newFlock(name, ns, replicas)
	f.Spec.Placement.NodeSelector = map[string]string{"flock-e2e-pool": pool}
	createFlock(t, f)
	return waitFlockAvailable(t, ns, name)
}

// TestFlockZoneSpread (issue 19.3): on 3 zones of 2 nodes each, a 3-member
// Flock lands one member per zone, and `kubectl flock members` shows each
// member's zone.
func TestFlockZoneSpread(t *testing.T) {
	ns := newNamespace(t)
	path := pluginPath(t)
	pool := "zones-" + ns
	zoneOf := map[string]string{}
	for _, z := range []string{"a", "b", "c"} {
		for i := 1; i <= 2; i++ {
			name := fmt.Sprintf("%s-%s%d", pool, z, i)
			zoneOf[name] = "zone-" + z
			addNode(t, name, map[string]string{"flock-e2e-pool": pool, corev1.LabelTopologyZone: "zone-" + z}, nil)
		}
	}
	f := createPooledAvailable(t, "spread", ns, 3, pool)
	zones := map[string]bool{}
	for _, m := range f.Status.Members {
		z, ok := zoneOf[m.Node]
		if !ok {
			t.Fatalf("member %d on %s, outside the pool", m.Ordinal, m.Node)
		}
		zones[z] = true
	}
	if len(zones) != 3 {
		t.Fatalf("members on %v: zones %v, want one member in each of 3 zones", memberNodes(f), zones)
	}
	_, rows := splitTable(t, kubectlFlock(t, env.KubectlBuilt(), path, "members", "spread", "-n", ns))
	for i, row := range rows {
		if len(row) < 3 || row[2] != zoneOf[f.Status.Members[i].Node] {
			t.Errorf("members row %d = %q, want zone %s", i, row, zoneOf[f.Status.Members[i].Node])
		}
	}
}

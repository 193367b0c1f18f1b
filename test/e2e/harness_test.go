package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/test/cluster"
)

// The harness helpers later tests rely on: a restarted flock-apiserver keeps
// its data (embedded etcd) and is served through the aggregator again; an
// extra flock-apiserver can run on an external etcd.
func TestHarnessFlockAPIServerLifecycle(t *testing.T) {
	ns := newNamespace(t)
	before := createFlock(t, newFlock("durable", ns, 1))

	oldPID := env.FlockProcess().PID()
	p, err := env.RestartFlockAPIServer(ctxFor(t), flockArgs())
	if err != nil {
		t.Fatal(err)
	}
	if p.PID() == oldPID {
		t.Fatal("restart kept the old process")
	}
	after, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "durable", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if after.UID != before.UID {
		t.Errorf("UID changed across a restart: %s -> %s", before.UID, after.UID)
	}

	etcd, err := env.StartEtcd(ctxFor(t), "etcd-extra")
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Stop(cluster.DefaultStopGrace)
	// A second, new store beside the main one: the members of the main
	// store's Flocks are not its loss (--store-guard).
	extra, err := env.StartExtraFlockAPIServer(ctxFor(t), "flock-apiserver-extra",
		[]string{"--etcd-servers=" + etcd.URL, "--controllers=-flock", "--store-guard=false"})
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Stop(cluster.DefaultStopGrace)
	if extra.EtcdURL != "" {
		t.Errorf("extra server with --etcd-servers reports an embedded etcd at %s", extra.EtcdURL)
	}
	client, err := env.HTTPClient(env.PKI.FrontProxyClient)
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"apiVersion":"flock.dev/v1alpha1","kind":"Flock","metadata":{"name":"elsewhere","namespace":%q},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"e"}},"template":{"metadata":{"labels":{"app":"e"}},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}}}}`, ns)
	req, _ := http.NewRequestWithContext(ctxFor(t), http.MethodPost, extra.URL+"/apis/flock.dev/v1alpha1/namespaces/"+ns+"/flocks", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Remote-User", "admin")
	req.Header.Set("X-Remote-Group", "system:masters")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	respBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create on the extra server: %d %s", resp.StatusCode, respBody)
	}
	keys, err := cluster.EtcdKeys(ctxFor(t), etcd.URL, "/registry/flock.dev/")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || !strings.HasSuffix(keys[0], "/"+ns+"/elsewhere") {
		t.Errorf("external etcd keys = %v, want the one flock", keys)
	}
	// The main server (its own embedded etcd) does not see it.
	if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "elsewhere", metav1.GetOptions{}); err == nil {
		t.Error("the main flock-apiserver serves a Flock stored in another etcd")
	}
}

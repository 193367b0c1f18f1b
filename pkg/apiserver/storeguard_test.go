package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes/fake"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/etcd"
	"flock.dev/flock/test/cluster"
)

func startGuardEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	var ports [2]int
	for i := range ports {
		p, err := cluster.FreeLoopbackPort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	s, err := etcd.Start(context.Background(), etcd.Config{DataDir: t.TempDir(), ClientPort: ports[0], PeerPort: ports[1]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.ClientURL()}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// member returns the metadata of an object of Flock flock (or of a
// ReplicaSet, when flock is empty) labelled as a member.
func member(ns, name, flock string) metav1.ObjectMeta {
	ref := metav1.OwnerReference{APIVersion: "flock.dev/v1alpha1", Kind: "Flock", Name: flock, UID: types.UID("uid-" + flock)}
	if flock == "" {
		ref = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs"}
	}
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.LabelFlockName: "x"}, OwnerReferences: []metav1.OwnerReference{ref}}
}

// guardAnswer sends req through the guard's handler and returns the code,
// the Retry-After header and the body.
func guardAnswer(g *StoreGuard, path string, info *genericapirequest.RequestInfo) (int, string, string) {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req = req.WithContext(genericapirequest.WithRequestInfo(req.Context(), info))
	w := httptest.NewRecorder()
	g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })).ServeHTTP(w, req)
	return w.Code, w.Header().Get("Retry-After"), w.Body.String()
}

// TestStoreGuard: a store without Flocks and without a mark is refused
// while pods or claims of Flocks exist (others with the label do not
// count): requests for Flocks get 503 with the reason, discovery passes,
// the readyz check fails with it. It is served once Flocks are restored,
// once the store is accepted (marked), or once the members are gone; a
// store served is marked, so that a later start with its Flocks all
// deleted serves it although members are still being collected.
func TestStoreGuard(t *testing.T) {
	ctx := context.Background()
	const prefix = "/registry/flock.dev"
	flockGet := &genericapirequest.RequestInfo{IsResourceRequest: true, APIGroup: "flock.dev", APIVersion: "v1alpha1", Resource: "flocks", Namespace: "db", Name: "pg", Verb: "get"}
	discovery := &genericapirequest.RequestInfo{Path: "/apis/flock.dev/v1alpha1"}

	refused := func(t *testing.T, g *StoreGuard, wantPods, wantClaims string) {
		t.Helper()
		if _, err := g.Check(ctx); err != nil {
			t.Fatal(err)
		}
		r := g.Refusal()
		for _, want := range []string{wantPods + " pods and " + wantClaims + " PersistentVolumeClaims", "etcd prefix " + prefix, "flock-apiserver restore", "accept-empty-store"} {
			if !strings.Contains(r, want) {
				t.Fatalf("refusal %q lacks %q", r, want)
			}
		}
		code, retry, body := guardAnswer(g, "/apis/flock.dev/v1alpha1/namespaces/db/flocks/pg", flockGet)
		var status metav1.Status
		if err := json.Unmarshal([]byte(body), &status); err != nil {
			t.Fatalf("503 body %q: %v", body, err)
		}
		if code != http.StatusServiceUnavailable || retry != "5" || status.Reason != metav1.StatusReasonServiceUnavailable || status.Message != r {
			t.Fatalf("a Flock get while refused: %d, Retry-After %q, %+v", code, retry, status)
		}
		if code, _, _ := guardAnswer(g, "/apis/flock.dev/v1alpha1", discovery); code != http.StatusOK {
			t.Fatalf("discovery while refused: %d", code)
		}
		if err := g.ReadyzCheck().Check(nil); err == nil || err.Error() != r {
			t.Fatalf("readyz while refused: %v", err)
		}
	}
	served := func(t *testing.T, g *StoreGuard, c *clientv3.Client, because string) {
		t.Helper()
		found, err := g.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if g.Refusal() != "" || !strings.Contains(found, because) {
			t.Fatalf("served because %q, refusal %q; want served because of %q", found, g.Refusal(), because)
		}
		if code, _, _ := guardAnswer(g, "/apis/flock.dev/v1alpha1/namespaces/db/flocks/pg", flockGet); code != http.StatusOK {
			t.Fatalf("a Flock get once served: %d", code)
		}
		if err := g.ReadyzCheck().Check(nil); err != nil {
			t.Fatalf("readyz once served: %v", err)
		}
		state, err := etcd.ReadStoreState(ctx, c, prefix)
		if err != nil {
			t.Fatal(err)
		}
		if state.Mark == nil {
			t.Fatal("a served store is not marked")
		}
	}
	members := func() *fake.Clientset {
		return fake.NewClientset(
			&corev1.Pod{ObjectMeta: member("db", "pg-0", "pg")},
			&corev1.Pod{ObjectMeta: member("db", "pg-1", "pg")},
			&corev1.Pod{ObjectMeta: member("db", "other", "")},
			&corev1.PersistentVolumeClaim{ObjectMeta: member("db", "data-pg-0", "pg")},
		)
	}

	t.Run("a new store with no members is served", func(t *testing.T) {
		c := startGuardEtcd(t)
		g := NewStoreGuard(c, prefix, fake.NewClientset(&corev1.Pod{ObjectMeta: member("db", "other", "")}))
		if g.Refusal() == "" {
			t.Fatal("served before the first check")
		}
		served(t, g, c, "no pod or claim in the cluster belongs to a Flock")
	})

	t.Run("lost, then restored", func(t *testing.T) {
		c := startGuardEtcd(t)
		g := NewStoreGuard(c, prefix, members())
		refused(t, g, "2", "1")
		if _, err := c.Put(ctx, prefix+"/flock.dev/flocks/db/pg", "restored"); err != nil {
			t.Fatal(err)
		}
		served(t, g, c, "the store holds Flocks")
		// Its Flocks deleted, the store is served on the next start,
		// members or not.
		if _, err := c.Delete(ctx, prefix+"/flock.dev/flocks/db/pg"); err != nil {
			t.Fatal(err)
		}
		served(t, NewStoreGuard(c, prefix, members()), c, "marked as served")
	})

	t.Run("lost, then accepted empty", func(t *testing.T) {
		c := startGuardEtcd(t)
		g := NewStoreGuard(c, prefix, members())
		refused(t, g, "2", "1")
		if _, err := etcd.MarkStore(ctx, c, prefix, etcd.StoreMark{Time: time.Now(), Reason: "accepted"}); err != nil {
			t.Fatal(err)
		}
		served(t, g, c, "(accepted)")
	})

	t.Run("lost, then the members gone", func(t *testing.T) {
		c := startGuardEtcd(t)
		core := members()
		g := NewStoreGuard(c, prefix, core)
		refused(t, g, "2", "1")
		if err := core.CoreV1().Pods("db").Delete(ctx, "pg-0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		refused(t, g, "1", "1")
		_ = core.CoreV1().Pods("db").Delete(ctx, "pg-1", metav1.DeleteOptions{})
		_ = core.CoreV1().PersistentVolumeClaims("db").Delete(ctx, "data-pg-0", metav1.DeleteOptions{})
		served(t, g, c, "no pod or claim")
	})

	t.Run("Run serves once the store may be", func(t *testing.T) {
		c := startGuardEtcd(t)
		g := NewStoreGuard(c, prefix, members())
		g.interval = 10 * time.Millisecond
		runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() { g.Run(runCtx); close(done) }()
		time.Sleep(50 * time.Millisecond)
		if g.Refusal() == "" {
			t.Fatal("served a lost store")
		}
		if _, err := c.Put(ctx, prefix+"/flock.dev/flocks/db/pg", "restored"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-runCtx.Done():
			t.Fatal("Run did not return after the restore")
		}
		if g.Refusal() != "" {
			t.Fatalf("Run returned refusing: %s", g.Refusal())
		}
	})
}

// TestCountOwnedPages: the guard's count follows the list's continue
// tokens, asks for members by their label, and counts only what a Flock
// owns.
func TestCountOwnedPages(t *testing.T) {
	pages := [][]corev1.Pod{
		{{ObjectMeta: member("a", "other", "")}, {ObjectMeta: member("a", "web-0", "web")}},
		{{ObjectMeta: member("b", "pg-0", "pg")}},
		{{ObjectMeta: member("b", "pg-1", "pg")}, {ObjectMeta: member("c", "rs-1", "")}},
	}
	var asked []metav1.ListOptions
	n, example, err := countOwned(context.Background(), "pod", func(opts metav1.ListOptions) (runtime.Object, error) {
		asked = append(asked, opts)
		i := len(asked) - 1
		list := &corev1.PodList{Items: pages[i]}
		if i+1 < len(pages) {
			list.Continue = fmt.Sprintf("page-%d", i+1)
		}
		return list, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 || example != "pod a/web-0 of Flock a/web, UID uid-web" {
		t.Fatalf("counted %d, example %q; want 3, pod a/web-0", n, example)
	}
	if len(asked) != 3 || asked[1].Continue != "page-1" || asked[2].Continue != "page-2" || asked[0].LabelSelector != v1alpha1.LabelFlockName || asked[0].Limit != dependentsPage {
		t.Fatalf("asked %+v", asked)
	}
}

package integration

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/storage/compression"
)

// TestFlocksStoredCompressed reads what flock-apiserver wrote to its etcd:
// a Flock is stored compressed (zstd, prefix flock:zstd:) and smaller than
// its JSON; with --storage-compression=none it is stored as JSON; and after
// each switch the Flocks stored the other way are still served, and
// rewritten the new way on their next update.
func TestFlocksStoredCompressed(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	c := s.client().FlockV1alpha1().Flocks(ns)
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:" + strconv.Itoa(s.ports[1])}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	// stored returns the Flock's value in etcd and whether it is compressed,
	// after checking that it holds the Flock.
	stored := func(name string) ([]byte, bool) {
		t.Helper()
		resp, err := etcd.Get(ctx, "/registry/flock.dev/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		var raw []byte
		for _, kv := range resp.Kvs {
			if strings.HasSuffix(string(kv.Key), "/flocks/"+ns+"/"+name) {
				raw = kv.Value
			}
		}
		if raw == nil {
			t.Fatalf("no etcd key of Flock %s among %d", name, len(resp.Kvs))
		}
		plain, compressed, err := compression.Decompress(raw)
		if err != nil {
			t.Fatal(err)
		}
		var f v1alpha1.Flock
		if err := json.Unmarshal(plain, &f); err != nil || f.Name != name || f.Kind != "Flock" {
			t.Fatalf("etcd value of Flock %s holds %q (%v)", name, plain, err)
		}
		if compressed && len(raw) >= len(plain) {
			t.Errorf("Flock %s stored compressed in %d bytes, not less than its %d bytes of JSON", name, len(raw), len(plain))
		}
		if !compressed && !bytes.HasPrefix(raw, []byte("{")) {
			t.Errorf("Flock %s stored neither compressed nor as JSON: %q", name, raw[:16])
		}
		return raw, compressed
	}
	relabel := func(name, label string) {
		t.Helper()
		f, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f.Labels = map[string]string{"step": label}
		if _, err := c.Update(ctx, f, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	served := func(names ...string) {
		t.Helper()
		list, err := c.List(ctx, metav1.ListOptions{ResourceVersion: ""})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range list.Items {
			got = append(got, f.Name)
		}
		if len(got) != len(names) {
			t.Fatalf("served %v, want %v", got, names)
		}
		for _, name := range names {
			if f, err := c.Get(ctx, name, metav1.GetOptions{}); err != nil || f.Spec.Replicas == nil || *f.Spec.Replicas != 2 {
				t.Fatalf("Flock %s: %v, %v", name, f, err)
			}
		}
	}

	if _, err := c.Create(ctx, newFlock("zipped", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, compressed := stored("zipped"); !compressed {
		t.Fatal("by default a Flock is not stored compressed")
	}

	s.args = []string{"--storage-compression=none"}
	s.restart()
	served("zipped")
	if _, err := c.Create(ctx, newFlock("plain", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, compressed := stored("plain"); compressed {
		t.Fatal("with --storage-compression=none a Flock is stored compressed")
	}
	relabel("zipped", "uncompressed")
	if _, compressed := stored("zipped"); compressed {
		t.Error("with --storage-compression=none a Flock stored compressed stays so after its update")
	}

	s.args = nil
	s.restart()
	served("plain", "zipped")
	if _, compressed := stored("plain"); compressed {
		t.Fatal("a Flock was rewritten without an update")
	}
	relabel("plain", "compressed")
	if _, compressed := stored("plain"); !compressed {
		t.Error("a Flock stored as JSON stays so after its update by a compressing server")
	}
	if f, err := c.Get(ctx, "plain", metav1.GetOptions{}); err != nil || f.Labels["step"] != "compressed" {
		t.Fatalf("Flock plain after its update: %v, %v", f, err)
	}
}

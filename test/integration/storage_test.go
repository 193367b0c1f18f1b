package integration

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/generated/clientset/versioned/scheme"
	flockclient "flock.dev/flock/pkg/generated/clientset/versioned/typed/flock/v1alpha1"
	"flock.dev/flock/pkg/storage/compression"
)

// TestFlocksStoredCompressed reads what flock-apiserver wrote to its etcd:
// a Flock is stored compressed (zstd, prefix flock:zstd:) and smaller than
// uncompressed; with --storage-compression=none it is stored as it is
// encoded (protobuf by default); and after
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
		raw := storedValue(t, ctx, etcd, name)
		plain, compressed, err := compression.Decompress(raw)
		if err != nil {
			t.Fatal(err)
		}
		if f := decodeStored(t, plain); f.Name != name {
			t.Fatalf("etcd value of Flock %s holds Flock %s", name, f.Name)
		}
		if compressed && len(raw) >= len(plain) {
			t.Errorf("Flock %s stored compressed in %d bytes, not less than its %d bytes uncompressed", name, len(raw), len(plain))
		}
		if !compressed && !bytes.HasPrefix(raw, protobufPrefix) {
			t.Errorf("Flock %s stored neither compressed nor as protobuf: %q", name, raw[:16])
		}
		return raw, compressed
	}
	relabel := func(name, label string) { t.Helper(); relabelFlock(t, ctx, c, name, label) }
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

// storedValue returns the etcd value of the Flock name in ns.
func storedValue(t *testing.T, ctx context.Context, etcd *clientv3.Client, name string) []byte {
	t.Helper()
	resp, err := etcd.Get(ctx, "/registry/flock.dev/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "/flocks/"+ns+"/"+name) {
			return kv.Value
		}
	}
	t.Fatalf("no etcd key of Flock %s among %d", name, len(resp.Kvs))
	return nil
}

// relabelFlock updates the Flock name with the label step=label, which
// makes the server write it anew.
func relabelFlock(t *testing.T, ctx context.Context, c flockclient.FlockInterface, name, label string) {
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

// protobufPrefix starts every object kube-style storage writes as protobuf.
var protobufPrefix = []byte("k8s\x00")

// decodeStored decodes a Flock's etcd value (decompressed), in whatever
// encoding it was written.
func decodeStored(t *testing.T, plain []byte) *v1alpha1.Flock {
	t.Helper()
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(plain, nil, nil)
	f, ok := obj.(*v1alpha1.Flock)
	if err != nil || !ok {
		t.Fatalf("etcd value %q is not a Flock: %T, %v", plain, obj, err)
	}
	return f
}

// TestFlocksStoredAsProtobuf checks --storage-media-type: Flocks are stored
// as protobuf by default and as JSON with application/json, Flocks stored
// either way are served after a switch, and each is rewritten the new way
// on its next update.
func TestFlocksStoredAsProtobuf(t *testing.T) {
	s := startServer(t)
	s.args = []string{"--storage-compression=none"}
	s.restart()
	ctx := ctxT(t)
	c := s.client().FlockV1alpha1().Flocks(ns)
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:" + strconv.Itoa(s.ports[1])}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	// stored returns the encoding of the Flock's etcd value: "protobuf" or "json".
	stored := func(name string) string {
		t.Helper()
		raw := storedValue(t, ctx, etcd, name)
		if f := decodeStored(t, raw); f.Name != name || f.Spec.Replicas == nil || *f.Spec.Replicas != 2 {
			t.Fatalf("etcd value of Flock %s holds %s", name, f.Name)
		}
		switch {
		case bytes.HasPrefix(raw, protobufPrefix):
			return "protobuf"
		case bytes.HasPrefix(raw, []byte("{")):
			return "json"
		}
		t.Fatalf("etcd value of Flock %s is neither protobuf nor JSON: %q", name, raw[:16])
		return ""
	}
	update := func(name, label string) { t.Helper(); relabelFlock(t, ctx, c, name, label) }
	served := func(names ...string) {
		t.Helper()
		for _, name := range names {
			if f, err := c.Get(ctx, name, metav1.GetOptions{}); err != nil || f.Spec.Replicas == nil || *f.Spec.Replicas != 2 {
				t.Fatalf("Flock %s: %v, %v", name, f, err)
			}
		}
		if list, err := c.List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != len(names) {
			t.Fatalf("list: %v, want %d Flocks", err, len(names))
		}
	}

	if _, err := c.Create(ctx, newFlock("proto", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := stored("proto"); got != "protobuf" {
		t.Fatalf("by default a Flock is stored as %s", got)
	}

	s.args = []string{"--storage-compression=none", "--storage-media-type=application/json"}
	s.restart()
	served("proto")
	if _, err := c.Create(ctx, newFlock("json", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := stored("json"); got != "json" {
		t.Fatalf("with --storage-media-type=application/json a Flock is stored as %s", got)
	}
	update("proto", "to-json")
	if got := stored("proto"); got != "json" {
		t.Errorf("with --storage-media-type=application/json a Flock stored as protobuf stays %s after its update", got)
	}

	s.args = []string{"--storage-compression=none"}
	s.restart()
	served("json", "proto")
	update("json", "to-protobuf")
	if got := stored("json"); got != "protobuf" {
		t.Errorf("a Flock stored as JSON stays %s after its update by a server storing protobuf", got)
	}
}

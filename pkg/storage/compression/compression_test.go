package compression

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/value"
)

// flockJSON is a stored Flock's shape: mostly repeated names and managed fields.
var flockJSON = []byte(`{"kind":"Flock","apiVersion":"flock.dev/v1alpha1","metadata":{"name":"web","namespace":"default",` +
	`"managedFields":[{"manager":"kubectl","operation":"Apply","fieldsV1":{"f:spec":{"f:replicas":{},"f:selector":{},"f:template":{}}}},` +
	`{"manager":"flock-controller","operation":"Update","subresource":"status","fieldsV1":{"f:status":{"f:members":{},"f:readyReplicas":{}}}}]},` +
	`"status":{"members":[{"ordinal":0,"node":"node-1","pod":"web-0","hostname":"web-0.web.default.svc.cluster.local"},` +
	`{"ordinal":1,"node":"node-2","pod":"web-1","hostname":"web-1.web.default.svc.cluster.local"},` +
	`{"ordinal":2,"node":"node-3","pod":"web-2","hostname":"web-2.web.default.svc.cluster.local"}]}}`)

func TestRoundTripBothModes(t *testing.T) {
	ctx := context.Background()
	for _, compress := range []bool{true, false} {
		tr := Transformer(nil, compress)
		stored, err := tr.TransformToStorage(ctx, flockJSON, value.DefaultContext("k"))
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.HasPrefix(stored, []byte(Prefix)); got != compress {
			t.Errorf("compress=%v: stored with prefix %q: %v", compress, Prefix, got)
		}
		if compress && len(stored) >= len(flockJSON) {
			t.Errorf("compressed to %d bytes, not less than the %d of the JSON", len(stored), len(flockJSON))
		}
		if !compress && !bytes.Equal(stored, flockJSON) {
			t.Errorf("compress=false stored %q, want the JSON as it is", stored)
		}
		back, stale, err := tr.TransformFromStorage(ctx, stored, value.DefaultContext("k"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, flockJSON) || stale {
			t.Errorf("compress=%v: read back %q (stale %v), want the JSON, not stale", compress, back, stale)
		}
	}
}

// A value stored the other way (plain JSON from before compression, or
// compressed while compression is now off) is read, and reported stale so
// the next update rewrites it the way it is now written.
func TestOtherWayIsReadAndStale(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		stored   []byte
		compress bool
	}{
		"plain JSON, compressing":     {flockJSON, true},
		"compressed, not compressing": {Compress(flockJSON), false},
	} {
		t.Run(name, func(t *testing.T) {
			back, stale, err := Transformer(nil, tc.compress).TransformFromStorage(ctx, tc.stored, value.DefaultContext("k"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, flockJSON) || !stale {
				t.Errorf("read %q (stale %v), want the JSON, stale", back, stale)
			}
		})
	}
}

func TestDamagedValueIsAnError(t *testing.T) {
	stored := Compress(flockJSON)
	stored = stored[:len(stored)-8]
	_, _, err := Transformer(nil, true).TransformFromStorage(context.Background(), stored, value.DefaultContext("k"))
	if err == nil || !strings.Contains(err.Error(), Prefix) {
		t.Fatalf("a truncated value read with err %v, want an error naming %q", err, Prefix)
	}
}

// recording is an inner transformer (encryption at rest in production)
// that marks what it writes and sees the data handed to it.
type recording struct{ sawOnWrite, sawOnRead []byte }

func (r *recording) TransformToStorage(_ context.Context, data []byte, _ value.Context) ([]byte, error) {
	r.sawOnWrite = data
	return append([]byte("enc:"), data...), nil
}

func (r *recording) TransformFromStorage(_ context.Context, data []byte, _ value.Context) ([]byte, bool, error) {
	out, ok := bytes.CutPrefix(data, []byte("enc:"))
	if !ok {
		return nil, false, errors.New("not encrypted")
	}
	r.sawOnRead = out
	return out, false, nil
}

// Compression runs before the inner transformer on the way in (it compresses
// what is then encrypted), after it on the way out.
func TestInnerTransformerSeesCompressedData(t *testing.T) {
	ctx := context.Background()
	inner := &recording{}
	tr := Transformer(inner, true)
	stored, err := tr.TransformToStorage(ctx, flockJSON, value.DefaultContext("k"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(stored, []byte("enc:"+Prefix)) || !bytes.HasPrefix(inner.sawOnWrite, []byte(Prefix)) {
		t.Fatalf("stored %q; inner got %q: want the inner transformer to get the compressed value", stored[:20], inner.sawOnWrite[:10])
	}
	back, _, err := tr.TransformFromStorage(ctx, stored, value.DefaultContext("k"))
	if err != nil || !bytes.Equal(back, flockJSON) || !bytes.HasPrefix(inner.sawOnRead, []byte(Prefix)) {
		t.Fatalf("read back %q, %v (inner read %q)", back, err, inner.sawOnRead)
	}
	if _, _, err := tr.TransformFromStorage(ctx, flockJSON, value.DefaultContext("k")); err == nil {
		t.Fatal("a value the inner transformer refuses was read")
	}
}

type fixedGetter struct{ opts generic.RESTOptions }

func (g fixedGetter) GetRESTOptions(schema.GroupResource, runtime.Object) (generic.RESTOptions, error) {
	return g.opts, nil
}

func TestGetterWrapsACopyOfTheTransformer(t *testing.T) {
	inner := &recording{}
	shared := &storagebackend.ConfigForResource{Config: storagebackend.Config{Transformer: inner}}
	opts, err := Getter(fixedGetter{generic.RESTOptions{StorageConfig: shared}}, true).GetRESTOptions(schema.GroupResource{Resource: "flocks"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if shared.Transformer != value.Transformer(inner) {
		t.Fatal("the shared storage config was changed")
	}
	stored, err := opts.StorageConfig.Transformer.TransformToStorage(context.Background(), flockJSON, value.DefaultContext("k"))
	if err != nil || !bytes.HasPrefix(stored, []byte("enc:"+Prefix)) {
		t.Fatalf("the resource's transformer stored %q, %v: want compressed, then the inner transformer's", stored, err)
	}
}

// storedFlock is a Flock as flock-apiserver stored it in etcd on `make
// local-up` (artifacts/examples/flock.yaml, its 3 members Ready): 5.5 KiB
// of JSON, managed fields nearly half of it.
func storedFlock(tb testing.TB) []byte {
	data, err := os.ReadFile("testdata/flock.json")
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// A stored Flock takes at most 40 % of its JSON: under half of one of etcd's
// 4 KiB pages, where the JSON took two.
func TestStoredFlockCompresses(t *testing.T) {
	plain := storedFlock(t)
	stored := Compress(plain)
	if ratio := float64(len(stored)) / float64(len(plain)); ratio > 0.4 {
		t.Errorf("a stored Flock of %d bytes compressed to %d (%.0f %%), want at most 40 %%", len(plain), len(stored), 100*ratio)
	}
	if back, _, err := Decompress(stored); err != nil || !bytes.Equal(back, plain) {
		t.Fatalf("decompressed to %d bytes, %v", len(back), err)
	}
}

// BenchmarkCompress and BenchmarkDecompress are the cost per write and per
// read from etcd of a stored Flock, to set beside decoding it
// (BenchmarkDecodeStoredFlock in pkg/registry/flock).
func BenchmarkCompress(b *testing.B) {
	plain := storedFlock(b)
	b.SetBytes(int64(len(plain)))
	for range b.N {
		Compress(plain)
	}
}

func BenchmarkDecompress(b *testing.B) {
	plain := storedFlock(b)
	stored := Compress(plain)
	b.SetBytes(int64(len(plain)))
	for range b.N {
		if _, _, err := Decompress(stored); err != nil {
			b.Fatal(err)
		}
	}
}

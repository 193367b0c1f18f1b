// Package compression stores Flocks in etcd compressed (zstd, fastest
// level) under a prefix of their own, and reads them back whether they were
// stored compressed or, as before this package, plain (JSON or protobuf, as
// --storage-media-type says).
//
// A Flock stored as JSON is mostly names and its managed fields: about 5.5
// KiB that compresses 3.3 times. Stored compressed, each version takes one
// page of etcd's database file instead of two, the raft log and the write-ahead
// log hold a third of the bytes, and the database file that flock-apiserver's
// embedded etcd keeps mapped in memory is a third of the size (issue 17).
//
// The compression runs before any other storage transformer (encryption at
// rest, from --encryption-provider-config): it compresses what that one
// then encrypts, and decompresses what that one decrypted.
package compression

import (
	"bytes"
	"context"
	"fmt"

	"github.com/klauspost/compress/zstd"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
)

// Prefix starts every compressed value; what follows it is one zstd frame.
// A plain value is JSON, which starts with '{', or protobuf, which starts
// with "k8s" and a zero byte, and a value encrypted at
// rest starts with "k8s:enc:".
const Prefix = "flock:zstd:"

// Modes of --storage-compression.
const (
	// Zstd writes values compressed.
	Zstd = "zstd"
	// None writes values as they are. Values stored compressed are still read.
	None = "none"
)

// Modes lists the values --storage-compression takes.
var Modes = []string{Zstd, None}

// maxDecoded bounds what one stored value may decompress to: far above any
// Flock (kube-apiserver takes request bodies up to 3 MiB, and etcd values up
// to 1.5 MiB by default), so that a damaged value cannot make the server
// allocate without bound.
const maxDecoded = 64 << 20

var (
	encoder = mustEncoder()
	decoder = mustDecoder()
)

func mustEncoder() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithLowerEncoderMem(true))
	if err != nil {
		panic(err)
	}
	return e
}

func mustDecoder() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(maxDecoded))
	if err != nil {
		panic(err)
	}
	return d
}

// Compress returns data compressed, with Prefix.
func Compress(data []byte) []byte {
	return encoder.EncodeAll(data, append(make([]byte, 0, len(Prefix)+len(data)/2), Prefix...))
}

// Decompress returns data, a stored value, as it was before it was
// compressed, and whether it was compressed (false: data itself).
func Decompress(data []byte) ([]byte, bool, error) {
	frame, ok := bytes.CutPrefix(data, []byte(Prefix))
	if !ok {
		return data, false, nil
	}
	out, err := decoder.DecodeAll(frame, nil)
	if err != nil {
		return nil, true, fmt.Errorf("stored value with prefix %q does not decompress: %w", Prefix, err)
	}
	return out, true, nil
}

// Transformer returns the storage transformer that compresses (compress
// true) or leaves as they are the values it writes, before inner (nil:
// none) transforms them, and reads values of both kinds. A value read that
// is not stored as it would now be written is reported stale, so that
// kube-style storage rewrites it on its next update.
func Transformer(inner value.Transformer, compress bool) value.Transformer {
	if inner == nil {
		inner = identity.NewEncryptCheckTransformer()
	}
	return &transformer{inner: inner, compress: compress}
}

type transformer struct {
	inner    value.Transformer
	compress bool
}

func (t *transformer) TransformFromStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, bool, error) {
	out, stale, err := t.inner.TransformFromStorage(ctx, data, dataCtx)
	if err != nil {
		return nil, stale, err
	}
	plain, compressed, err := Decompress(out)
	if err != nil {
		return nil, stale, err
	}
	return plain, stale || compressed != t.compress, nil
}

func (t *transformer) TransformToStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, error) {
	if t.compress {
		data = Compress(data)
	}
	return t.inner.TransformToStorage(ctx, data, dataCtx)
}

// Getter returns getter with Transformer(compress) put in front of the
// storage transformer of every resource it configures.
func Getter(getter generic.RESTOptionsGetter, compress bool) generic.RESTOptionsGetter {
	return compressingGetter{RESTOptionsGetter: getter, compress: compress}
}

type compressingGetter struct {
	generic.RESTOptionsGetter
	compress bool
}

func (g compressingGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil || opts.StorageConfig == nil {
		return opts, err
	}
	// StorageConfig is shared with other resources: change a copy.
	config := *opts.StorageConfig
	config.Transformer = Transformer(config.Transformer, g.compress)
	opts.StorageConfig = &config
	return opts, nil
}

package ociimage

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

func testSpec(data string) Spec {
	return Spec{
		Entries: []Entry{
			{Path: "/bin/prog", Mode: 0o755, Data: []byte(data)},
			{Path: "/bin/sh", Symlink: "/bin/prog"},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
			{Path: "/etc", Dir: true, Mode: 0o755},
		},
		Entrypoint: []string{"/bin/prog"},
		Cmd:        []string{"sleep"},
		User:       "65532",
	}
}

func TestBuildIsReproducible(t *testing.T) {
	a, err := Build(testSpec("program"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(testSpec("program"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Build(testSpec("another program"))
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	dc, _ := c.Digest()
	if da != db {
		t.Errorf("same spec, different digests: %s and %s", da, db)
	}
	if da == dc {
		t.Errorf("different content, same digest %s", da)
	}
	cf, err := a.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || cf.Config.User != "65532" ||
		len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/bin/prog" || !cf.Created.Time.Equal(time.Unix(0, 0)) {
		t.Errorf("config = %+v", cf)
	}
}

func TestLayerEntries(t *testing.T) {
	img, err := Build(testSpec("program"))
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	type entry struct {
		typ  byte
		mode int64
		link string
		size int64
	}
	got := map[string]entry{}
	var order []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(time.Unix(0, 0)) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v uid %d gid %d; want the epoch and root", h.Name, h.ModTime, h.Uid, h.Gid)
		}
		got[h.Name] = entry{h.Typeflag, h.Mode, h.Linkname, h.Size}
		order = append(order, h.Name)
	}
	want := map[string]entry{
		"bin/":     {tar.TypeDir, 0o755, "", 0},
		"bin/prog": {tar.TypeReg, 0o755, "", 7},
		"bin/sh":   {tar.TypeSymlink, 0o777, "/bin/prog", 0},
		"etc/":     {tar.TypeDir, 0o755, "", 0},
		"tmp/":     {tar.TypeDir, 0o1777, "", 0},
	}
	if len(got) != len(want) {
		t.Errorf("entries %v, want %v", order, want)
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s = %+v, want %+v", n, got[n], w)
		}
	}
	if order[0] != "bin/" {
		t.Errorf("first entry %s; a parent directory must come before its files", order[0])
	}
}

func TestBuildRejectsBadPaths(t *testing.T) {
	for _, p := range []string{"relative", "/a/../b", "/"} {
		if _, err := Build(Spec{Entries: []Entry{{Path: p, Data: []byte("x")}}}); err == nil {
			t.Errorf("path %q: no error", p)
		}
	}
	if _, err := Build(Spec{Entries: []Entry{{Path: "/f", Data: []byte("x")}, {Path: "/f/g", Data: []byte("y")}}}); err == nil {
		t.Error("a file inside a file: no error")
	}
}

func TestWriteTarballRoundTrip(t *testing.T) {
	img, err := Build(testSpec("program"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := Build(Spec{Entries: []Entry{{Path: "/x", Mode: 0o644, Data: []byte("x")}}, Entrypoint: []string{"/x"}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "images.tar")
	if err := WriteTarball(file, map[string]v1.Image{"localhost/prog:v1": img, "localhost/other:v1": other}); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"localhost/prog:v1", "localhost/other:v1"} {
		ref, _ := name.NewTag(tag)
		back, err := tarball.ImageFromPath(file, &ref)
		if err != nil {
			t.Fatalf("%s: %v", tag, err)
		}
		want := img
		if tag == "localhost/other:v1" {
			want = other
		}
		// The tarball holds a Docker manifest of the same config and layers.
		cw, _ := want.ConfigName()
		cb, _ := back.ConfigName()
		if cw != cb {
			t.Errorf("%s: config digest after the round trip %s, want %s", tag, cb, cw)
		}
		lw, _ := want.Layers()
		lb, _ := back.Layers()
		if len(lw) != 1 || len(lb) != 1 {
			t.Fatalf("%s: layers %d and %d, want 1", tag, len(lw), len(lb))
		}
		dw, _ := lw[0].DiffID()
		db, _ := lb[0].DiffID()
		if dw != db {
			t.Errorf("%s: layer after the round trip %s, want %s", tag, db, dw)
		}
	}
	if err := WriteTarball(file, map[string]v1.Image{"Not A Tag!": img}); err == nil {
		t.Error("bad tag: no error")
	}
}

func TestWriteLayoutValidates(t *testing.T) {
	spec := testSpec("program")
	spec.Entries = append(spec.Entries, Entry{Path: "/var/lib/data", Dir: true, Mode: 0o700, UID: 65532, GID: 65532})
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	for _, dir := range dirs {
		if err := WriteLayout(dir, map[string]v1.Image{"localhost/prog:v1": img}); err != nil {
			t.Fatal(err)
		}
	}
	// Writing again over an existing layout replaces it, not appends to it.
	if err := WriteLayout(dirs[0], map[string]v1.Image{"localhost/prog:v1": img}); err != nil {
		t.Fatal(err)
	}
	var indexes [][]byte
	for _, dir := range dirs {
		idx, err := layout.ImageIndexFromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate.Index(idx); err != nil {
			t.Errorf("%s: layout does not validate: %v", dir, err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Manifests) != 1 || m.Manifests[0].Annotations[refNameAnnotation] != "localhost/prog:v1" {
			t.Fatalf("%s: index manifests %+v, want one named localhost/prog:v1", dir, m.Manifests)
		}
		want, _ := img.Digest()
		if m.Manifests[0].Digest != want {
			t.Errorf("%s: digest %s, want %s", dir, m.Manifests[0].Digest, want)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		indexes = append(indexes, raw)
		back, err := idx.Image(want)
		if err != nil {
			t.Fatal(err)
		}
		layers, _ := back.Layers()
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		found := false
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if h.Name == "var/lib/data/" {
				found = true
				if h.Uid != 65532 || h.Gid != 65532 || h.Mode != 0o700 {
					t.Errorf("var/lib/data: uid %d gid %d mode %o, want 65532 65532 700", h.Uid, h.Gid, h.Mode)
				}
			}
		}
		rc.Close()
		if !found {
			t.Error("var/lib/data missing from the layer")
		}
	}
	if string(indexes[0]) != string(indexes[1]) {
		t.Errorf("two layouts of one image differ:\n%s\n%s", indexes[0], indexes[1])
	}
	if err := WriteLayout(dirs[1], map[string]v1.Image{"Not A Tag!": img}); err == nil {
		t.Error("bad tag: no error")
	}
}

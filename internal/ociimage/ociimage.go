// Package ociimage packs files into a single-layer container image and writes
// images as a tarball that `ctr images import` (and `docker load`) read, or as
// an OCI image layout directory (what `make image` leaves under _output). It
// needs no registry and no daemon, and it is reproducible: the same files and
// config give the same layer, config and manifest digests (every timestamp is
// the Unix epoch, owners are root, entries are sorted).
//
// The real nodes of the local control plane run the test program packed here
// (test/cluster); `make image` packs flock-apiserver the same way (hack/image).
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Entry is one file system entry of the layer.
type Entry struct {
	// Path is absolute inside the image, e.g. "/flock-test".
	Path string
	// Mode holds the permission bits (e.g. 0o755, 0o1777).
	Mode int64
	// Data is the content of a regular file. Ignored for directories and
	// symbolic links.
	Data []byte
	// Dir makes the entry a directory.
	Dir bool
	// Symlink, when set, makes the entry a symbolic link to this target.
	Symlink string
	// UID and GID own the entry; zero (root) unless set.
	UID, GID int
}

// Spec describes an image: its one layer and its runtime config.
type Spec struct {
	// Entries are the layer's files, directories and links. Parent
	// directories are added (0755) when missing.
	Entries []Entry
	// Entrypoint, Cmd, Env, User and WorkingDir are the image's runtime
	// config, as in a Dockerfile.
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
	// Labels are the image config's labels.
	Labels map[string]string
	// OS and Architecture default to linux and amd64.
	OS           string
	Architecture string
}

// epoch is the timestamp of every entry and of the image config.
var epoch = time.Unix(0, 0).UTC()

// Build returns the image described by spec.
func Build(spec Spec) (v1.Image, error) {
	layerTar, err := layerBytes(spec.Entries)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "flock.dev/flock/internal/ociimage"},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = spec.OS, spec.Architecture
	if cf.OS == "" {
		cf.OS = "linux"
	}
	if cf.Architecture == "" {
		cf.Architecture = "amd64"
	}
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Cmd,
		Env:        spec.Env,
		User:       spec.User,
		WorkingDir: spec.WorkingDir,
		Labels:     spec.Labels,
	}
	return mutate.ConfigFile(img, cf)
}

// layerBytes renders entries as an uncompressed tar, parents first and
// sorted, with fixed owners and times.
func layerBytes(entries []Entry) ([]byte, error) {
	byPath := map[string]Entry{}
	for _, e := range entries {
		p := path.Clean(e.Path)
		if p == "/" || p != e.Path || !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("ociimage: entry path %q must be absolute and clean", e.Path)
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("ociimage: entry %q given twice", p)
		}
		e.Path = p
		byPath[p] = e
	}
	for p := range byPath {
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			if _, ok := byPath[dir]; !ok {
				byPath[dir] = Entry{Path: dir, Dir: true, Mode: 0o755}
			} else if !byPath[dir].Dir {
				return nil, fmt.Errorf("ociimage: %q is inside %q, which is not a directory", p, dir)
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	slices.Sort(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := byPath[p]
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    e.Mode,
			Uid:     e.UID,
			Gid:     e.GID,
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		switch {
		case e.Dir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case e.Symlink != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Symlink
			if hdr.Mode == 0 {
				hdr.Mode = 0o777
			}
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteTarball writes images, each under its tag (e.g.
// "localhost/flock-test:e2e"), to one tarball at path.
func WriteTarball(file string, images map[string]v1.Image) error {
	refs := make(map[name.Reference]v1.Image, len(images))
	for tag, img := range images {
		t, err := name.NewTag(tag)
		if err != nil {
			return fmt.Errorf("ociimage: image tag %q: %w", tag, err)
		}
		refs[t] = img
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := tarball.MultiRefWrite(refs, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// refNameAnnotation names an image in an OCI layout's index (the OCI image
// spec's org.opencontainers.image.ref.name).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes images as a fresh OCI image layout in dir (whatever dir
// held is removed first), each under its tag as the index's ref name. Tags
// are written in sorted order, so the same images give the same index.
func WriteLayout(dir string, images map[string]v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	tags := make([]string, 0, len(images))
	for tag := range images {
		if _, err := name.NewTag(tag); err != nil {
			return fmt.Errorf("ociimage: image tag %q: %w", tag, err)
		}
		tags = append(tags, tag)
	}
	slices.Sort(tags)
	for _, tag := range tags {
		if err := p.AppendImage(images[tag], layout.WithAnnotations(map[string]string{refNameAnnotation: tag})); err != nil {
			return err
		}
	}
	return nil
}

package cluster

// The offline test images of the real nodes: the static flock-test program
// (test/images/flock-test, built by `make build`) packed with
// internal/ociimage, once as the pod sandbox image and once as the image
// member pods run. No registry is reachable, so pods must use
// imagePullPolicy Never or IfNotPresent.

import (
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"flock.dev/flock/internal/ociimage"
)

const (
	// TestImage runs flock-test; its default command idles (`sleep`), and
	// /bin/sh is flock-test's small sh (enough for the Flock cleanup helper).
	TestImage = "localhost/flock-test:e2e"
	// PauseImage is the pod sandbox image (flock-test pause).
	PauseImage = "localhost/flock-pause:e2e"
	// testImageBinary is where the program sits in both images.
	testImageBinary = "/flock-test"
)

// TestImages packs the flock-test binary at binary into TestImage and
// PauseImage, keyed by their tags.
func TestImages(binary string) (map[string]v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("the test image program (`make build` builds it): %w", err)
	}
	entries := []ociimage.Entry{
		{Path: testImageBinary, Mode: 0o755, Data: data},
		{Path: "/bin/sh", Symlink: testImageBinary},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
		{Path: "/etc", Dir: true, Mode: 0o755},
	}
	labels := map[string]string{"org.opencontainers.image.source": "flock.dev/flock/test/images/flock-test"}
	test, err := ociimage.Build(ociimage.Spec{Entries: entries, Entrypoint: []string{testImageBinary}, Cmd: []string{"sleep"}, Labels: labels})
	if err != nil {
		return nil, err
	}
	pause, err := ociimage.Build(ociimage.Spec{Entries: entries, Entrypoint: []string{testImageBinary, "pause"}, Labels: labels})
	if err != nil {
		return nil, err
	}
	return map[string]v1.Image{TestImage: test, PauseImage: pause}, nil
}

// WriteTestImages writes TestImages(binary) to a tarball that
// `ctr images import` reads.
func WriteTestImages(binary, tarball string) error {
	imgs, err := TestImages(binary)
	if err != nil {
		return err
	}
	return ociimage.WriteTarball(tarball, imgs)
}

// `make image` (issue 19.4): the flock-apiserver image built without a
// container engine is reproducible, valid as an OCI layout, runs the binary
// as a non-root user, and is what the deployment's kustomize component pins.
package e2e

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	appsv1 "k8s.io/api/apps/v1"

	"flock.dev/flock/test/cluster"
)

func TestMakeImage(t *testing.T) {
	root := env.RepoRoot()
	outs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	var digests []string
	for _, out := range outs {
		if o, err := runTool(t, 20*time.Minute, root, []string{"IMAGE_OUT=" + out, "IMAGE_VERSION=v0.0.0-e2e"}, "make", "image"); err != nil {
			t.Fatalf("make image: %v\n%s", err, o)
		}
		d, err := os.ReadFile(filepath.Join(out, "digest"))
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, strings.TrimSpace(string(d)))
	}
	if !strings.HasPrefix(digests[0], "sha256:") || digests[0] != digests[1] {
		t.Fatalf("make image twice from one commit: digests %q and %q, want one sha256 digest", digests[0], digests[1])
	}
	for _, f := range []string{"oci/index.json", "flock-apiserver.tar", "kustomization.yaml", "oci-node-agent/index.json", "flock-node-agent.tar", "node-agent-digest"} {
		a, errA := os.ReadFile(filepath.Join(outs[0], f))
		b, errB := os.ReadFile(filepath.Join(outs[1], f))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs (%v, %v)", f, errA, errB)
		}
	}

	// The node agent's image beside it: its layout validates, it runs the
	// agent, and the component pins it by its digest.
	agentDigest, err := os.ReadFile(filepath.Join(outs[0], "node-agent-digest"))
	if err != nil {
		t.Fatal(err)
	}
	agentIdx, err := layout.ImageIndexFromPath(filepath.Join(outs[0], "oci-node-agent"))
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(agentIdx); err != nil {
		t.Fatalf("the node agent's OCI layout does not validate: %v", err)
	}
	if am, err := agentIdx.IndexManifest(); err != nil || len(am.Manifests) != 1 || am.Manifests[0].Digest.String() != strings.TrimSpace(string(agentDigest)) {
		t.Fatalf("node agent index %+v (%v), want one manifest %s", am, err, agentDigest)
	} else if img, err := agentIdx.Image(am.Manifests[0].Digest); err != nil {
		t.Fatal(err)
	} else if cf, err := img.ConfigFile(); err != nil || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/usr/local/bin/flock-node-agent" {
		t.Errorf("node agent image config %+v (%v), want the entrypoint /usr/local/bin/flock-node-agent", cf, err)
	}
	if kust, err := os.ReadFile(filepath.Join(outs[0], "kustomization.yaml")); err != nil ||
		!strings.Contains(string(kust), "- name: flock-node-agent\n  newName: localhost/flock-apiserver-node-agent\n  digest: "+strings.TrimSpace(string(agentDigest))) {
		t.Errorf("the component does not pin the node agent's image by its digest %s: %s (%v)", agentDigest, kust, err)
	}

	// The layout validates (every blob's digest and size, manifest, config).
	idx, err := layout.ImageIndexFromPath(filepath.Join(outs[0], "oci"))
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatalf("the OCI layout does not validate: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest.String() != digests[0] ||
		m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "localhost/flock-apiserver:v0.0.0-e2e" {
		t.Fatalf("index manifests %+v, want one, %s, named localhost/flock-apiserver:v0.0.0-e2e", m.Manifests, digests[0])
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("image user %q, want the non-root 65532:65532", cf.Config.User)
	}
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/usr/local/bin/flock-apiserver" {
		t.Errorf("entrypoint %q, want /usr/local/bin/flock-apiserver", cf.Config.Entrypoint)
	}
	rev, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  "v0.0.0-e2e",
		"org.opencontainers.image.revision": strings.TrimSpace(string(rev)),
		"org.opencontainers.image.source":   "https://flock.dev/flock",
	} {
		if cf.Config.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], want)
		}
	}

	// The image's one layer: the binary, and the data directory the non-root
	// user owns. The binary from the image starts.
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	bin := filepath.Join(t.TempDir(), "flock-apiserver")
	var dataOwner *tar.Header
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Name {
		case "var/lib/flock-apiserver/":
			dataOwner = h
		case "usr/local/bin/flock-apiserver":
			f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	if dataOwner == nil || dataOwner.Uid != 65532 || dataOwner.Gid != 65532 {
		t.Errorf("/var/lib/flock-apiserver in the image: %+v, want a directory owned by 65532:65532", dataOwner)
	}
	if o, err := runTool(t, time.Minute, t.TempDir(), nil, bin, "--help"); err != nil || !strings.Contains(o, "--secure-port") {
		t.Errorf("the image's flock-apiserver --help: %v\n%s", err, o)
	}

	// The deployment names the image by that digest through the component.
	dir := filepath.Join(root, "_output", "e2e-image-deploy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	component, err := filepath.Rel(dir, outs[0])
	if err != nil {
		t.Fatal(err)
	}
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../artifacts/deploy/base\ncomponents:\n- " + component + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		var d appsv1.Deployment
		renderKustomize(t, k, dir).into(t, deploymentKey, &d)
		if got, want := d.Spec.Template.Spec.Containers[0].Image, "localhost/flock-apiserver@"+digests[0]; got != want {
			t.Errorf("deployment image %q, want %q", got, want)
		}
	})
}

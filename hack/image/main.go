// Command image (`make image`) packs a static flock-apiserver binary into an
// OCI image without a container engine or a registry, using internal/ociimage:
// the binary on an empty base, run as the non-root user 65532, the embedded
// etcd's data directory owned by that user, and labels naming the version,
// revision and source. It writes, under -out:
//
//	oci/                 the image as an OCI image layout (index.json names it by -repo:-version)
//	flock-apiserver.tar  the same image as a tarball for `ctr images import` / `docker load`
//	digest               the image manifest's digest (sha256:...)
//	kustomization.yaml   a kustomize Component that sets the deployment's image
//	                     to -repo@digest (hack/gen-serving-cert.sh includes it),
//	                     and the node agent's to -repo-node-agent@its digest
//	oci-node-agent/, flock-node-agent.tar, node-agent-digest
//	                     the same for the node agent (cmd/flock-node-agent,
//	                     -node-agent-binary): the static binary on an empty
//	                     base, run as root (its DaemonSet gives it only
//	                     CAP_CHOWN and CAP_FOWNER)
//
// The same binary and flags give the same digest: every timestamp is the Unix
// epoch and the layer's entries are sorted (see internal/ociimage).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"flock.dev/flock/internal/ociimage"
)

// The image's paths and user; artifacts/deploy/base/deployment.yaml asks for
// the same user and mounts the data directory.
const (
	binaryPath      = "/usr/local/bin/flock-apiserver"
	agentBinaryPath = "/usr/local/bin/flock-node-agent"
	dataDir         = "/var/lib/flock-apiserver"
	nonRootID       = 65532
)

func main() {
	binary := flag.String("binary", "_output/image/flock-apiserver", "the static flock-apiserver binary to pack")
	agentBinary := flag.String("node-agent-binary", "_output/image/flock-node-agent", "the static flock-node-agent binary to pack")
	out := flag.String("out", "_output/image", "the directory to write the image and its kustomize component into")
	repo := flag.String("repo", "localhost/flock-apiserver", "the image's repository, as the deployment will name it")
	version := flag.String("version", "dev", "the image's version: its tag and its org.opencontainers.image.version label")
	revision := flag.String("revision", "", "the source revision (git commit) the binary was built from")
	source := flag.String("source", "https://flock.dev/flock", "the source repository's URL (org.opencontainers.image.source)")
	flag.Parse()
	digest, agentDigest, err := run(*binary, *agentBinary, *out, *repo, *version, *revision, *source)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("image: %s:%s %s and %s:%s %s in %s\n", *repo, *version, digest, agentRepo(*repo), *version, agentDigest, *out)
}

// imageSpec is the flock-apiserver image around the binary's bytes.
func imageSpec(bin []byte, version, revision, source string) ociimage.Spec {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRootID, nonRootID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRootID)
	return ociimage.Spec{
		Entries: []ociimage.Entry{
			{Path: binaryPath, Mode: 0o755, Data: bin},
			{Path: dataDir, Dir: true, Mode: 0o750, UID: nonRootID, GID: nonRootID},
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
			{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
			{Path: "/home/nonroot", Dir: true, Mode: 0o700, UID: nonRootID, GID: nonRootID},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
		},
		Entrypoint: []string{binaryPath},
		User:       fmt.Sprintf("%d:%d", nonRootID, nonRootID),
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin"},
		Labels:     imageLabels("flock-apiserver", version, revision, source),
	}
}

// imageLabels are the OCI labels of the image titled title.
func imageLabels(title, version, revision, source string) map[string]string {
	labels := map[string]string{
		"org.opencontainers.image.title":   title,
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  source,
	}
	if revision != "" {
		labels["org.opencontainers.image.revision"] = revision
	}
	return labels
}

// agentImageSpec is the node agent's image around its binary's bytes.
func agentImageSpec(bin []byte, version, revision, source string) ociimage.Spec {
	return ociimage.Spec{
		Entries: []ociimage.Entry{
			{Path: agentBinaryPath, Mode: 0o755, Data: bin},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
		},
		Entrypoint: []string{agentBinaryPath},
		WorkingDir: "/",
		Labels:     imageLabels("flock-node-agent", version, revision, source),
	}
}

// agentRepo is the node agent image's repository beside repo's.
func agentRepo(repo string) string { return repo + "-node-agent" }

// writeImage writes img as tag into an OCI layout under out/layout, a
// tarball out/tarball and its digest into out/digestFile.
func writeImage(out, layout, tarball, digestFile, tag string, img v1.Image) (v1.Hash, error) {
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	images := map[string]v1.Image{tag: img}
	if err := ociimage.WriteLayout(filepath.Join(out, layout), images); err != nil {
		return v1.Hash{}, err
	}
	if err := ociimage.WriteTarball(filepath.Join(out, tarball), images); err != nil {
		return v1.Hash{}, err
	}
	return digest, os.WriteFile(filepath.Join(out, digestFile), []byte(digest.String()+"\n"), 0o644)
}

// run builds both images and writes everything into out; it returns their
// digests.
func run(binary, agentBinary, out, repo, version, revision, source string) (digest, agentDigest v1.Hash, err error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return digest, agentDigest, err
	}
	agentBin, err := os.ReadFile(agentBinary)
	if err != nil {
		return digest, agentDigest, err
	}
	img, err := ociimage.Build(imageSpec(bin, version, revision, source))
	if err != nil {
		return digest, agentDigest, err
	}
	agentImg, err := ociimage.Build(agentImageSpec(agentBin, version, revision, source))
	if err != nil {
		return digest, agentDigest, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return digest, agentDigest, err
	}
	if digest, err = writeImage(out, "oci", "flock-apiserver.tar", "digest", repo+":"+version, img); err != nil {
		return digest, agentDigest, err
	}
	if agentDigest, err = writeImage(out, "oci-node-agent", "flock-node-agent.tar", "node-agent-digest", agentRepo(repo)+":"+version, agentImg); err != nil {
		return digest, agentDigest, err
	}
	return digest, agentDigest, os.WriteFile(filepath.Join(out, "kustomization.yaml"), []byte(component(repo, repo+":"+version, digest, agentDigest)), 0o644)
}

// component is a kustomize Component that points the deployment's
// flock-apiserver container at the image by digest, and the node agent's
// DaemonSet (artifacts/deploy/components/node-agent) at its own.
func component(repo, tag string, digest, agentDigest v1.Hash) string {
	return strings.Join([]string{
		"# Generated by `make image` (hack/image): the deployment runs " + tag + ",",
		"# pinned by digest, and the node agent its image of the same build.",
		"# Include it in an overlay under components:.",
		"apiVersion: kustomize.config.k8s.io/v1alpha1",
		"kind: Component",
		"images:",
		"- name: flock-apiserver",
		"  newName: " + repo,
		"  digest: " + digest.String(),
		"- name: flock-node-agent",
		"  newName: " + agentRepo(repo),
		"  digest: " + agentDigest.String(),
		"",
	}, "\n")
}

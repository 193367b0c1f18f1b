#!/usr/bin/env bash
# Regenerates every generated file of the project: deepcopy, defaulters and
# conversions next to the API types (zz_generated.*.go), their protobuf
# encoding (generated.proto, generated.pb.go and the protobuf tags of
# types.go), the OpenAPI definitions, and the clientset (preferring
# protobuf), listers, informers and apply configurations under pkg/generated.
# Generated code comes only from here.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# The generators come from k8s.io/code-generator at the version go.mod pins.
# `go list -m` only finds a module already in the module cache, so on a fresh
# machine (empty GOMODCACHE) it is downloaded first, from GOPROXY.
if [ -z "${CODEGEN_PKG:-}" ]; then
	if ! go mod download k8s.io/code-generator; then
		echo "update-codegen: cannot download k8s.io/code-generator (the version in go.mod) into" \
			"$(go env GOMODCACHE) from GOPROXY=$(go env GOPROXY); check the network or GOPROXY" >&2
		exit 1
	fi
	CODEGEN_PKG=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
fi
if [ ! -f "${CODEGEN_PKG}/kube_codegen.sh" ]; then
	echo "update-codegen: no kube_codegen.sh in '${CODEGEN_PKG}' (k8s.io/code-generator)" >&2
	exit 1
fi
# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

THIS_PKG=flock.dev/flock
BOILERPLATE=$ROOT/hack/boilerplate.go.txt

kube::codegen::gen_helpers --boilerplate "$BOILERPLATE" "$ROOT/pkg/apis"

# Protobuf, as the built-in kinds have it: go-to-protobuf writes
# generated.proto from the Go types, runs protoc with protoc-gen-gogo, trims
# the result to the marshalling code in generated.pb.go, and adds protobuf
# tags to types.go. protoc comes from Debian (protobuf-compiler; hack/doctor
# checks it); the rest is built from k8s.io/code-generator's module, and
# goimports at the golang.org/x/tools version that module pins.
if ! command -v protoc >/dev/null; then
	echo "update-codegen: protoc is missing (Debian: apt-get install protobuf-compiler)" >&2
	exit 1
fi
PROTO_TMP=$(mktemp -d)
trap 'rm -rf "$PROTO_TMP"' EXIT
(cd "$CODEGEN_PKG" && GOBIN="$PROTO_TMP/bin" go install ./cmd/go-to-protobuf ./cmd/go-to-protobuf/protoc-gen-gogo)
GOGO_DIR=$(cd "$CODEGEN_PKG" && go list -m -f '{{.Dir}}' github.com/gogo/protobuf)
TOOLS_VERSION=$(cd "$CODEGEN_PKG" && go list -m -f '{{.Version}}' golang.org/x/tools)
GOBIN="$PROTO_TMP/bin" go install "golang.org/x/tools/cmd/goimports@$TOOLS_VERSION"
# go-to-protobuf finds packages by import path under one source tree, so the
# tree is made of links: this module and the modules whose .proto files
# generated.proto imports.
mkdir -p "$PROTO_TMP/src/flock.dev" "$PROTO_TMP/src/k8s.io" "$PROTO_TMP/src/github.com/gogo"
ln -s "$ROOT" "$PROTO_TMP/src/$THIS_PKG"
ln -s "$(go list -m -f '{{.Dir}}' k8s.io/api)" "$PROTO_TMP/src/k8s.io/api"
ln -s "$(go list -m -f '{{.Dir}}' k8s.io/apimachinery)" "$PROTO_TMP/src/k8s.io/apimachinery"
ln -s "$GOGO_DIR" "$PROTO_TMP/src/github.com/gogo/protobuf"
PATH="$PROTO_TMP/bin:$PATH" go-to-protobuf \
	--go-header-file "$BOILERPLATE" \
	--output-dir "$PROTO_TMP/src" \
	--proto-import "$GOGO_DIR/protobuf" \
	--apimachinery-packages=-k8s.io/apimachinery/pkg/util/intstr,-k8s.io/apimachinery/pkg/api/resource,-k8s.io/apimachinery/pkg/runtime/schema,-k8s.io/apimachinery/pkg/runtime,-k8s.io/apimachinery/pkg/apis/meta/v1 \
	--packages=-k8s.io/api/core/v1,$THIS_PKG/pkg/apis/flock/v1alpha1

kube::codegen::gen_openapi \
	--output-dir "$ROOT/pkg/generated/openapi" \
	--output-pkg "$THIS_PKG/pkg/generated/openapi" \
	--output-model-name-file zz_generated.model_name.go \
	--report-filename "$ROOT/hack/api-rules-violations.list" \
	--update-report \
	--extra-pkgs k8s.io/api/core/v1 \
	--extra-pkgs k8s.io/api/autoscaling/v1 \
	--extra-pkgs k8s.io/apimachinery/pkg/api/resource \
	--extra-pkgs k8s.io/apimachinery/pkg/util/intstr \
	--boilerplate "$BOILERPLATE" \
	"$ROOT/pkg/apis"

kube::codegen::gen_client \
	--with-watch \
	--prefers-protobuf \
	--with-applyconfig \
	--applyconfig-externals k8s.io/api/core/v1.PodTemplateSpec:k8s.io/client-go/applyconfigurations/core/v1,k8s.io/api/core/v1.PersistentVolumeClaimTemplate:k8s.io/client-go/applyconfigurations/core/v1 \
	--applyconfig-openapi-schema <(go run "$THIS_PKG/hack/models-schema") \
	--output-dir "$ROOT/pkg/generated" \
	--output-pkg "$THIS_PKG/pkg/generated" \
	--boilerplate "$BOILERPLATE" \
	"$ROOT/pkg/apis"

#!/usr/bin/env bash
# Regenerates every generated file of the project: deepcopy, defaulters and
# conversions next to the API types (zz_generated.*.go), the OpenAPI
# definitions, and the clientset, listers, informers and apply configurations
# under pkg/generated. Generated code comes only from here.
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
	--with-applyconfig \
	--applyconfig-externals k8s.io/api/core/v1.PodTemplateSpec:k8s.io/client-go/applyconfigurations/core/v1,k8s.io/api/core/v1.PersistentVolumeClaimTemplate:k8s.io/client-go/applyconfigurations/core/v1 \
	--applyconfig-openapi-schema <(go run "$THIS_PKG/hack/models-schema") \
	--output-dir "$ROOT/pkg/generated" \
	--output-pkg "$THIS_PKG/pkg/generated" \
	--boilerplate "$BOILERPLATE" \
	"$ROOT/pkg/apis"

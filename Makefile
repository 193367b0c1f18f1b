# Flock — make targets. `make local-up` runs the product on a local control
# plane; `make test` runs every test (unit, integration, then end-to-end).
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/_output/bin
GOTEST_FLAGS ?=

.PHONY: all build tools doctor test test-unit test-integration test-e2e test-e2e-real test-faults bench bench-e2e \
	image verify verify-codegen verify-gofmt verify-vet verify-mod \
	update update-codegen update-gofmt update-mod local-up clean

all: build

## build: build flock-apiserver, the kubectl flock plugin, the static node
## agent (cmd/flock-node-agent) and the static test program of the real nodes'
## offline images (test/images/flock-test), into _output/bin
build:
	$(GO) build -o $(BIN)/flock-apiserver ./cmd/flock-apiserver
	$(GO) build -o $(BIN)/kubectl-flock ./cmd/kubectl-flock
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/flock-test ./test/images/flock-test
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/flock-node-agent ./cmd/flock-node-agent

## image: the flock-apiserver image, built without a container engine: a
## static binary on an empty base, non-root (hack/image); and the node agent's
## image beside it (IMAGE_REPO-node-agent). Writes an OCI layout,
## an import tarball, the digest and a kustomize component pinning the
## deployment's image to that digest, into _output/image. Reproducible: the
## same commit gives the same digest.
IMAGE_REPO ?= localhost/flock-apiserver
IMAGE_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
IMAGE_OUT ?= $(CURDIR)/_output/image
image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(IMAGE_OUT)/flock-apiserver ./cmd/flock-apiserver
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(IMAGE_OUT)/flock-node-agent ./cmd/flock-node-agent
	$(GO) run ./hack/image -binary $(IMAGE_OUT)/flock-apiserver -node-agent-binary $(IMAGE_OUT)/flock-node-agent -out $(IMAGE_OUT) \
		-repo $(IMAGE_REPO) -version $(IMAGE_VERSION) -revision $(IMAGE_REVISION)

## tools: build the control-plane binaries (kube-apiserver, etcd, kwok, ...)
## and the real nodes' kubelet, containerd and runc, once
tools:
	./hack/build-tools.sh

## doctor: check the prerequisites; print what is missing and its Debian package
doctor:
	$(GO) run ./hack/doctor

## test: the prerequisites, then unit, integration and end-to-end tests (kwok
## nodes, then the real-node lane), then the fault suite
test: doctor test-unit test-integration test-e2e test-e2e-real test-faults

test-unit:
	$(GO) test $(GOTEST_FLAGS) ./pkg/... ./cmd/... ./hack/... ./internal/... ./test/cluster/... ./test/images/... ./test/readme/...

test-integration:
	$(GO) test $(GOTEST_FLAGS) -count=1 -timeout 15m ./test/integration/...

test-e2e: tools build
	FLOCK_BIN=$(BIN) $(GO) test $(GOTEST_FLAGS) -count=1 -timeout 30m -skip '^TestRealNode' ./test/e2e/...

## test-e2e-real: the real-node lane (kubelet + containerd on this machine;
## root). It skips, saying why, when the machine cannot run a real node or
## another run holds it; FLOCK_E2E_REQUIRE_REAL_NODES=1 makes that a failure.
test-e2e-real: tools build
	FLOCK_BIN=$(BIN) $(GO) test $(GOTEST_FLAGS) -count=1 -timeout 20m -run '^TestRealNode' -v ./test/e2e/

## test-faults: the fault suite (test/faults): a workload of Flocks on a
## control plane of its own while components are killed, hung and restarted
## and nodes deleted and partitioned; invariants checked from watches. It
## prints per fault the operations done, the checks made and the time to
## converge. Then flock-apiserver's etcd is lost and its Flocks restored
## from a backup.
test-faults: tools build
	FLOCK_BIN=$(BIN) $(GO) test $(GOTEST_FLAGS) -count=1 -timeout 15m -v ./test/faults/

## bench: benchmarks, each reported next to an anchor from the same run
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

## bench-e2e: Flock against a CRD of its shape and StatefulSets on the local
## control plane; prints a table with ratios, raw JSON in _output/bench-e2e.json.
## Not part of `make test`. BENCH_FLAGS=-smoke for a tiny run, -scale=1000 for the full one,
## -real-nodes=2 for the readiness comparison on two real nodes instead (root).
BENCH_FLAGS ?=
bench-e2e: tools build
	$(GO) run ./test/bench $(BENCH_FLAGS)

## local-up: a real local control plane with flock-apiserver registered
local-up: tools build
	./hack/local-up.sh

verify: verify-codegen verify-gofmt verify-vet verify-mod

verify-codegen:
	./hack/verify-codegen.sh

verify-gofmt:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

verify-vet:
	$(GO) vet ./...

verify-mod:
	./hack/verify-mod.sh

update: update-codegen update-gofmt update-mod

update-codegen:
	./hack/update-codegen.sh

update-gofmt:
	gofmt -w $$(git ls-files -co --exclude-standard '*.go')

update-mod:
	$(GO) mod tidy
	cd hack/tools && $(GO) mod tidy
	cd hack/coredns && $(GO) mod tidy

clean:
	rm -rf _output/local-up _output/e2e

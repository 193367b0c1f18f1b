# Flock — make targets. `make local-up` runs the product on a local control
# plane; `make test` runs every test (unit, integration, then end-to-end).
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/_output/bin
GOTEST_FLAGS ?=

.PHONY: all build tools doctor test test-unit test-integration test-e2e bench \
	verify verify-codegen verify-gofmt verify-vet verify-mod \
	update update-codegen update-gofmt update-mod local-up clean

all: build

## build: build flock-apiserver into _output/bin
build:
	$(GO) build -o $(BIN)/flock-apiserver ./cmd/flock-apiserver

## tools: build the control-plane binaries (kube-apiserver, etcd, kwok, ...) once
tools:
	./hack/build-tools.sh

## doctor: check the prerequisites; print what is missing and its Debian package
doctor:
	$(GO) run ./hack/doctor

## test: the prerequisites, then unit, integration and end-to-end tests
test: doctor test-unit test-integration test-e2e

test-unit:
	$(GO) test $(GOTEST_FLAGS) ./pkg/... ./cmd/... ./hack/... ./internal/... ./test/cluster/... ./test/readme/...

test-integration:
	$(GO) test $(GOTEST_FLAGS) -count=1 -timeout 15m ./test/integration/...

test-e2e: tools build
	FLOCK_BIN=$(BIN) $(GO) test $(GOTEST_FLAGS) -count=1 -timeout 30m ./test/e2e/...

## bench: benchmarks, each reported next to an anchor from the same run
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

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

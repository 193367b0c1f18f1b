#!/usr/bin/env bash
# Builds the control-plane binaries that `make local-up` and the e2e suite run:
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kubelet
# from k8s.io/kubernetes, etcd from go.etcd.io/etcd, kwok, CoreDNS (the cluster
# DNS), and the container runtime of the real nodes: containerd v2 (with ctr
# and its runc shim) and runc. They come only from the Go module proxy
# (hack/tools/go.mod pins the versions; kwok, containerd and runc are
# `go install`ed at the versions below) and land in _output/bin. runc needs
# libseccomp (Debian libseccomp-dev, linked statically); the real nodes' CNI
# plugins are Debian's containernetworking-plugins (/usr/lib/cni). Missing
# Debian packages are installed when apt-get is there and we are root. Stamps keyed on what decides each group of binaries make a
# second run a no-op, and a new group (CoreDNS) builds without rebuilding the
# others; delete _output/bin to force a rebuild.
#
# FLOCK_SKEW_KUBECTL=1 also builds kubectl v1.32 as _output/bin/kubectl-1.32
# (hack/tools/kubectl-skew), for machines without a system kubectl: the e2e
# suite checks every kubectl interaction with a v1.37 and an older kubectl.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${FLOCK_TOOLS_BIN:-$ROOT/_output/bin}
TOOLS=$ROOT/hack/tools
KUBE_VERSION=v1.37.2
KWOK_VERSION=v0.8.0
COREDNS_VERSION=v1.15.0
CONTAINERD_VERSION=v2.4.2
RUNC_VERSION=v1.5.3

mkdir -p "$BIN"
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=37"
	ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=2026-01-01T00:00:00Z"
done
# The stamp covers what decides the binaries: the tools module, the etcd main,
# the versions and the link flags (not the rest of this script).
stamp_want=$( (cat "$TOOLS/go.sum" "$TOOLS/go.mod" "$TOOLS/etcd/main.go"; echo "$KWOK_VERSION $ldflags") | sha256sum | cut -c1-16)
stamp_file=$BIN/.tools-stamp
all=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kwok)
have_all=true
for b in "${all[@]}"; do [ -x "$BIN/$b" ] || have_all=false; done
tools_current=false
if $have_all && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp_want" ]; then
	tools_current=true
fi

step() {
	local name=$1; shift
	local start=$SECONDS
	echo "build-tools: building $name ..."
	# Print a heartbeat so nobody thinks a long cold build hangs.
	( while sleep 30; do echo "build-tools:   ... still building $name ($((SECONDS - start))s)"; done ) &
	local hb=$!
	if ! "$@"; then kill "$hb" 2>/dev/null; wait "$hb" 2>/dev/null || true; echo "build-tools: $name FAILED" >&2; exit 1; fi
	kill "$hb" 2>/dev/null; wait "$hb" 2>/dev/null || true
	echo "build-tools: $name done in $((SECONDS - start))s"
}

if [ "${FLOCK_SKEW_KUBECTL:-}" = 1 ]; then
	skew=$TOOLS/kubectl-skew
	skew_version=$(sed -n 's/^[[:space:]]*k8s.io\/kubectl v0\.\([0-9]*\.[0-9]*\)$/v1.\1/p' "$skew/go.mod")
	skew_stamp_want=$(cat "$skew/go.mod" "$skew/go.sum" "$skew/main.go" | sha256sum | cut -c1-16)
	skew_stamp=$BIN/.kubectl-skew-stamp
	if [ -x "$BIN/kubectl-1.32" ] && [ -f "$skew_stamp" ] && [ "$(cat "$skew_stamp")" = "$skew_stamp_want" ]; then
		echo "build-tools: kubectl-1.32 is current"
	else
		skew_ldflags=""
		for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			skew_ldflags+=" -X $pkg.gitVersion=$skew_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=32"
			skew_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=2026-01-01T00:00:00Z"
		done
		(cd "$skew" && step "kubectl $skew_version" go build -trimpath -ldflags "$skew_ldflags" -o "$BIN/kubectl-1.32" .)
		echo "$skew_stamp_want" > "$skew_stamp"
	fi
fi

# CoreDNS pins its own k8s client libraries, so like kwok it stays out of the
# tools module: hack/coredns is a module of its own with a main that links
# only the plugins the local Corefile uses (bind, errors, log, kubernetes),
# so it builds much faster than the stock CoreDNS with its ~50 plugins
# (each run prints its build time). Its stamp is keyed on that module, so
# changing it rebuilds only coredns.
build_coredns() {
	local want stamp=$BIN/.coredns-stamp
	want=$(cat "$ROOT/hack/coredns/go.mod" "$ROOT/hack/coredns/go.sum" "$ROOT/hack/coredns/main.go" | sha256sum | cut -c1-16)
	if [ -x "$BIN/coredns" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		echo "build-tools: coredns $COREDNS_VERSION is current"
		return
	fi
	step "coredns $COREDNS_VERSION" bash -c "cd '$ROOT/hack/coredns' && go build -trimpath -o '$BIN/coredns' ."
	echo "$want" > "$stamp"
}

# Debian packages the runtime build and the real nodes need: libseccomp-dev
# (runc's seccomp support, linked statically) and containernetworking-plugins
# (bridge, host-local and loopback in /usr/lib/cni).
debian_packages() {
	local need=()
	[ -f /usr/lib/x86_64-linux-gnu/libseccomp.a ] || [ -n "$(ls /usr/lib/*/libseccomp.a 2>/dev/null)" ] || need+=(libseccomp-dev)
	[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
	command -v pkg-config >/dev/null || need+=(pkg-config)
	command -v gcc >/dev/null || need+=(gcc libc6-dev)
	((${#need[@]})) || return 0
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
		echo "build-tools: missing Debian packages ${need[*]} (needs root and apt-get); real nodes will not be available" >&2
		return 1
	fi
	echo "build-tools: installing Debian packages: ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }
}

# containerd v2 (containerd, ctr, containerd-shim-runc-v2; no cgo, so without
# the btrfs, devmapper and zfs snapshotters) and runc (cgo with the seccomp
# tag: containerd v2 always gives the pause container a seccomp profile).
# Their stamp is keyed on the versions and flags, so they build once.
build_runtime() {
	local stamp=$BIN/.runtime-stamp want
	local cd_ldflags="-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION -X github.com/containerd/containerd/v2/version.Revision=release"
	local runc_ldflags="-X main.gitCommit=release -extldflags -static"
	want=$(echo "$CONTAINERD_VERSION $RUNC_VERSION $cd_ldflags $runc_ldflags" | sha256sum | cut -c1-16)
	local have=true
	for b in containerd containerd-shim-runc-v2 ctr runc; do [ -x "$BIN/$b" ] || have=false; done
	if $have && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		echo "build-tools: containerd $CONTAINERD_VERSION and runc $RUNC_VERSION are current"
		return
	fi
	if ! debian_packages; then
		echo "build-tools: skipping containerd and runc" >&2
		return
	fi
	step "containerd $CONTAINERD_VERSION" env GOBIN="$BIN" CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
		go install -trimpath -tags "no_btrfs no_devmapper no_zfs" -ldflags "$cd_ldflags" \
		"github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
		"github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION"
	step "runc $RUNC_VERSION" env GOBIN="$BIN" CGO_ENABLED=1 GOFLAGS=-buildvcs=false \
		go install -trimpath -tags "seccomp netgo osusergo" -ldflags "$runc_ldflags" \
		"github.com/opencontainers/runc@$RUNC_VERSION"
	echo "$want" > "$stamp"
}

if $tools_current; then
	echo "build-tools: control-plane binaries in $BIN are current"
	build_coredns
	build_runtime
	exit 0
fi

cd "$TOOLS"
step etcd go build -trimpath -o "$BIN/etcd" ./etcd
for c in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet; do
	step "$c" go build -trimpath -ldflags "$ldflags" -o "$BIN/$c" "k8s.io/kubernetes/cmd/$c"
done
# kwok pins an older k8s, so it stays out of the tools module.
step kwok env GOBIN="$BIN" GOFLAGS=-buildvcs=false go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
echo "$stamp_want" > "$stamp_file"
build_coredns
build_runtime
echo "build-tools: all binaries in $BIN"

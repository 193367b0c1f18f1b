#!/usr/bin/env bash
# make local-up: a real local control plane on 127.0.0.1 (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes) with
# flock-apiserver registered through the aggregation layer. It stays in the
# foreground; Ctrl-C stops everything it started.
#
# Needs `make tools build` (the Makefile target does that first).
# Environment: NODES (default 3), REAL_NODES (kubelet + containerd nodes on
# this machine; default 1 when it can run one, else 0 with the reason),
# KUBE_APISERVER_PORT (default 6443),
# FLOCK_APISERVER_PORT (default 9443), DNS_PORT (CoreDNS, UDP and TCP; default: a
# free port, printed), FLOCK_ARGS (extra flock-apiserver flags), FLOCK_REPLICAS
# (3: HA mode, three flock-apiservers whose embedded etcd members form one
# cluster, behind HAProxy on FLOCK_APISERVER_PORT).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${FLOCK_BIN:-$ROOT/_output/bin}
cd "$ROOT"
mkdir -p "$BIN"
go build -o "$BIN/local-up" ./test/cluster/local-up
exec "$BIN/local-up" --bin-dir="$BIN" --work-dir="$ROOT/_output/local-up" "$@"

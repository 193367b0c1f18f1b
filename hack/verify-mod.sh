#!/usr/bin/env bash
# Fails when `go mod tidy` would change go.mod or go.sum (of the product or the
# tools module).
set -o errexit -o nounset -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
status=0
for dir in "$ROOT" "$ROOT/hack/tools" "$ROOT/hack/coredns"; do
	tmp=$(mktemp -d)
	cp "$dir/go.mod" "$dir/go.sum" "$tmp/"
	(cd "$dir" && go mod tidy)
	if ! diff -u "$tmp/go.mod" "$dir/go.mod" || ! diff -u "$tmp/go.sum" "$dir/go.sum"; then
		echo "go mod tidy changes $dir: run make update-mod" >&2
		cp "$tmp/go.mod" "$tmp/go.sum" "$dir/"
		status=1
	fi
	rm -rf "$tmp"
done
exit $status

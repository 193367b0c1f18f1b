#!/usr/bin/env bash
# Fails when the generated code is not what hack/update-codegen.sh produces
# from the current sources: it regenerates into a temporary copy of the tree
# and diffs the generated files.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Copy the tracked and new files (not _output/ or other ignored folders).
(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$TMP")
(cd "$TMP" && ./hack/update-codegen.sh >/dev/null)
status=0
for d in pkg hack/api-rules-violations.list; do
	diff -Nur "$ROOT/$d" "$TMP/$d" || status=1
done
if [ $status -ne 0 ]; then
	echo "Generated code is out of date: run hack/update-codegen.sh" >&2
	exit 1
fi
echo "Generated code is up to date."

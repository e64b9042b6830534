#!/usr/bin/env bash
# Builds etcd's own load generator, `tools/benchmark` of the go.etcd.io/etcd/v3 module at
# the version workloads/specs/etcd-benchmark/go.mod pins (go.sum pins every module it is
# built from, fetched from the Go module proxy), into a cache outside the checkout:
#   ${COORDBENCH_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/coordbench}/tools/etcd-benchmark-<version>-<hash>/benchmark
# keyed by a hash of those sources, of the Go toolchain and of this script, as
# scripts/build-interop.sh caches its programs. A cached build returns at once; a cold one
# takes a minute or two. The build happens in a staging directory renamed into place whole.
# Prints the binary's path on stdout; progress goes to stderr.
# Usage: workloads/specs/build-etcd-benchmark.sh [--print]   (--print: the path, built or not)
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -x /usr/local/go/bin/go ]] && export PATH="$PATH:/usr/local/go/bin"
src=workloads/specs/etcd-benchmark
version=$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/v3" { print $3 }' "$src/go.mod")
[[ -n $version ]] || { echo "error: $src/go.mod pins no go.etcd.io/etcd/v3" >&2; exit 2; }
toolchain=$(command -v go >/dev/null && go version || echo "go missing")
hash=$({
  echo "$toolchain"
  sha256sum workloads/specs/build-etcd-benchmark.sh
  (cd "$src" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
} | sha256sum | cut -c1-16)
dir="${COORDBENCH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/coordbench}/tools/etcd-benchmark-$version-$hash"
if [[ ${1:-} == --print || -x $dir/benchmark ]]; then
  echo "$dir/benchmark"
  exit 0
fi
command -v go >/dev/null || { echo "error: go is not installed (scripts/install-deps.sh)" >&2; exit 2; }

stage="$dir.tmp.$$" log="$dir.log" start=$SECONDS
mkdir -p "$(dirname "$dir")"
rm -rf "$stage"
mkdir -p "$stage"
trap 'rm -rf "$stage"' EXIT
echo "building etcd's benchmark tool $version into $dir" >&2
# -mod=readonly: go.sum pins every module and may not change.
if ! (cd "$src" && GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 \
  GOFLAGS="-mod=readonly -buildvcs=false" \
  go build -trimpath -o "$stage/benchmark" go.etcd.io/etcd/v3/tools/benchmark) >"$log" 2>&1; then
  echo "error: building etcd's benchmark tool failed; its output ($log):" >&2
  tail -n 40 "$log" >&2
  exit 2
fi
rm -rf "$dir"
mv "$stage" "$dir"
echo "built etcd's benchmark tool in $((SECONDS - start)) s" >&2
echo "$dir/benchmark"

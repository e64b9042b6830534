#!/usr/bin/env bash
# Builds the reference programs tests/interop_clients.rs and tests/benchstat.rs run, each into a cache
# outside the checkout keyed by a hash of its sources and toolchain:
#   tests/interop/etcd-concurrency/  etcd's Go client (clientv3 and its concurrency package),
#                                    modules from the Go module proxy (go.sum pins them)
#   tests/interop/curator-recipes/   Apache Curator's recipes, jars from Maven Central (the
#                                    pom pins every version, plugins included)
#   tests/interop/benchstat/         Go's benchstat (golang.org/x/perf/cmd/benchstat), for
#                                    tests/benchstat.rs; modules from the Go module proxy
#                                    (go.mod pins the version, go.sum every module)
# into ${COORDBENCH_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/coordbench}/interop/<name>-<hash>/
# (the root `coordbench install` caches servers under). A cached build returns at once; a
# cold one takes about a minute (the clients; benchstat a few seconds). A build happens in a staging directory renamed into
# place whole, so nothing half-built is ever found.
# Prints one `export COORDBENCH_INTEROP_*=PATH` line per program on stdout (for eval);
# progress goes to stderr.
# Usage: scripts/build-interop.sh [--print]   (--print: the paths for these sources, built
# or not; builds nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
print_only=false
[[ ${1:-} == --print ]] && print_only=true

# Go may sit outside PATH on a fresh machine.
[[ -x /usr/local/go/bin/go ]] && export PATH="$PATH:/usr/local/go/bin"
cache_root=${COORDBENCH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/coordbench}
cache="$cache_root/interop"

# A hash of a program's source files (relative names and contents), of its toolchain and of
# this script (how it is built).
source_hash() {
  local dir=$1 toolchain=$2
  {
    echo "$toolchain"
    sha256sum scripts/build-interop.sh
    (cd "$dir" && find . -type f ! -path './target/*' -print0 | LC_ALL=C sort -z |
      xargs -0 sha256sum)
  } | sha256sum | cut -c1-16
}

toolchain_line() {
  case $1 in
    go) command -v go >/dev/null && go version || echo "go missing" ;;
    java) command -v java >/dev/null && java -version 2>&1 | head -1 || echo "java missing" ;;
  esac
}

go_src=tests/interop/etcd-concurrency
java_src=tests/interop/curator-recipes
benchstat_src=tests/interop/benchstat
go_dir="$cache/etcd-concurrency-$(source_hash "$go_src" "$(toolchain_line go)")"
java_dir="$cache/curator-recipes-$(source_hash "$java_src" "$(toolchain_line java)")"
benchstat_dir="$cache/benchstat-$(source_hash "$benchstat_src" "$(toolchain_line go)")"

emit() {
  echo "export COORDBENCH_INTEROP_ETCD_CONCURRENCY=$go_dir/etcd-concurrency"
  echo "export COORDBENCH_INTEROP_CURATOR_RECIPES=$java_dir/curator-recipes.jar"
  echo "export COORDBENCH_INTEROP_BENCHSTAT=$benchstat_dir/benchstat"
}
if $print_only; then
  emit
  exit 0
fi

# Runs "$@" in a fresh staging directory for $dir and renames it into place on success;
# the build's output is kept in $dir.log and shown when it fails.
build_into() {
  local dir=$1 what=$2
  shift 2
  local stage="$dir.tmp.$$" log="$dir.log" start=$SECONDS
  rm -rf "$stage"
  mkdir -p "$stage"
  echo "building $what into $dir" >&2
  if ! "$@" "$stage" >"$log" 2>&1; then
    rm -rf "$stage"
    echo "error: building $what failed; its output ($log):" >&2
    tail -n 40 "$log" >&2
    exit 2
  fi
  rm -rf "$dir"
  mv "$stage" "$dir"
  echo "built $what in $((SECONDS - start)) s" >&2
}

build_go() {
  local stage=$1
  # go.sum pins every module; -mod=readonly refuses to change it.
  (cd "$go_src" && GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
    go build -trimpath -o "$stage/etcd-concurrency" .)
}

build_benchstat() {
  local stage=$1
  # The tool directive of go.mod names it; go.sum pins every module.
  (cd "$benchstat_src" && GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
    go build -trimpath -o "$stage/benchstat" golang.org/x/perf/cmd/benchstat)
}

build_java() {
  local stage=$1
  # Maven writes target/ beside the pom: build a copy in the staging directory.
  mkdir -p "$stage/build"
  cp -r "$java_src/pom.xml" "$java_src/src" "$stage/build/"
  mvn -q -B -Dstyle.color=never -f "$stage/build/pom.xml" package
  mv "$stage/build/target/curator-recipes.jar" "$stage/build/target/lib" "$stage/"
  rm -rf "$stage/build"
}

mkdir -p "$cache"
if [[ ! -x $go_dir/etcd-concurrency ]]; then
  command -v go >/dev/null || { echo "error: go is not installed (Go 1.26)" >&2; exit 2; }
  build_into "$go_dir" "etcd's Go client checks" build_go
fi
if [[ ! -x $benchstat_dir/benchstat ]]; then
  command -v go >/dev/null || { echo "error: go is not installed (Go 1.26)" >&2; exit 2; }
  build_into "$benchstat_dir" "Go's benchstat" build_benchstat
fi
if [[ ! -f $java_dir/curator-recipes.jar ]]; then
  command -v mvn >/dev/null || { echo "error: mvn is not installed (scripts/install-deps.sh)" >&2; exit 2; }
  build_into "$java_dir" "Curator's recipe checks" build_java
fi
emit

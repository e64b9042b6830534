#!/usr/bin/env bash
# Performance gate of a change to coordbench's engines: builds coordbench at BASE_REV and at
# HEAD_REV (release), then runs HEAD's `coordbench gate` on the gate spec with the base
# build serving the baseline's members and the head build the candidate's (`engine_bin`),
# so only the engines differ; the load generator is the same binary on both sides.
#
#   scripts/perf-gate.sh BASE_REV HEAD_REV [coordbench gate options, e.g. --quick]
#
# Environment:
#   PERF_GATE_SPEC   the gate spec (default workloads/gate.toml)
#   PERF_GATE_OUT    the gate directory (default results/perf-gate-<base>-<head>)
#   PERF_GATE_CACHE  where builds are kept, one per commit (default target/perf-gate);
#                    a commit already built there is not built again
#
# Exit codes are the gate's: 0 passed, 3 a threshold breached, 1 a run failed,
# 2 bad input (also: a revision that does not exist, a build that fails), 130 interrupted.
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# < 2)); then
  echo "usage: scripts/perf-gate.sh BASE_REV HEAD_REV [coordbench gate options]" >&2
  exit 2
fi
base_rev=$1 head_rev=$2
shift 2
spec=${PERF_GATE_SPEC:-workloads/gate.toml}
cache=${PERF_GATE_CACHE:-target/perf-gate}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

commit_of() {
  git rev-parse --verify --quiet "$1^{commit}" || {
    echo "error: $1 is not a commit in $(pwd); fetch it first (actions/checkout: fetch-depth: 0)" >&2
    exit 2
  }
}

# Prints the path of coordbench built at commit $1, building it if the cache lacks it.
build() {
  local sha=$1 bin="$cache/$1/coordbench" src="$cache/src-$1"
  if [[ -x $bin ]]; then
    echo "$bin"
    return
  fi
  echo "building coordbench at $sha" >&2
  rm -rf "$src"
  git worktree prune
  git worktree add --detach --quiet "$src" "$sha" >&2
  # One target directory for every build: dependencies compile once.
  if ! (cd "$src" && CARGO_TARGET_DIR="$cache/target" cargo build --release --quiet --bin coordbench >&2); then
    git worktree remove --force "$src" >/dev/null 2>&1 || true
    echo "error: coordbench at $sha does not build" >&2
    exit 2
  fi
  mkdir -p "$cache/$sha"
  cp "$cache/target/release/coordbench" "$bin"
  git worktree remove --force "$src" >&2
  echo "$bin"
}

base_sha=$(commit_of "$base_rev")
head_sha=$(commit_of "$head_rev")
base_bin=$(build "$base_sha")
head_bin=$(build "$head_sha")
out=${PERF_GATE_OUT:-results/perf-gate-${base_sha:0:10}-${head_sha:0:10}}

echo "gate: baseline $base_sha, candidate $head_sha, spec $spec, out $out" >&2
set +e
"$head_bin" gate "$spec" --out "$out" \
  --baseline "engine_bin=$base_bin" --candidate "engine_bin=$head_bin" "$@"
status=$?
set -e
exit "$status"

#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test of the workspace,
# then executes every notebook on results/reference/ (scripts/test-notebooks.sh).
# Integration tests start (and stop) their own clusters on 127.0.0.1, so nothing else needs
# to be running: etcd 3.6.16 and ZooKeeper 3.9.5 (installed by scripts/install-servers.sh
# through `coordbench install`, cached under ~/.cache/coordbench/servers) unless a test names
# another release; tests/server_versions.rs also runs etcd 3.7.3 and Debian's etcd 3.4.23
# and ZooKeeper 3.8.0. tests/interop_clients.rs runs etcd's Go client and Curator's recipes,
# which scripts/build-interop.sh builds (cached under ~/.cache/coordbench/interop).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's wall time goes to stderr, so that a CI log shows where a cold run spends it.
phase_start=$SECONDS
phase_done() {
  echo "test.sh: $1 took $((SECONDS - phase_start)) s (total $SECONDS s)" >&2
  phase_start=$SECONDS
}
# What cargo needs first (protoc and its headers); the rest of the Debian packages and the
# Python venvs install while cargo builds coordbench, and the servers build with Go and Maven
# while cargo builds the test binaries: on two cores each pair overlaps its waits.
scripts/install-deps.sh compile
# A one-shot build gains nothing from incremental caches, which would double target/ on disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
logs=target/test-logs
mkdir -p "$logs"
# Runs "$@" in the background with its output in $logs/$1.log; `finish NAME` waits for it,
# prints that output and fails the command if it failed.
declare -A background=()
# A failure leaves no installer running behind it.
trap 'kill "${background[@]}" 2>/dev/null || true' EXIT
start_background() {
  local name=$1
  shift
  "$@" >"$logs/$name.log" 2>&1 &
  background[$name]=$!
}
finish() {
  local status=0
  wait "${background[$1]}" || status=$?
  cat "$logs/$1.log" >&2
  if ((status != 0)); then
    echo "error: $1 failed (exit $status); its output is above" >&2
    exit 2
  fi
}
start_background install-deps scripts/install-deps.sh
cargo build -q --bin coordbench
phase_done "building coordbench"
finish install-deps
phase_done "installing the Debian packages and venvs that remained"
# The servers and interop clients build while cargo builds the test binaries; the tests
# wait for them (run_tests.py --after) and start as cargo finishes each binary.
servers_ready=$logs/servers-ready
rm -f "$servers_ready"
start_background install-servers bash -c \
  'if scripts/install-servers.sh "$1" && scripts/build-interop.sh >/dev/null; then echo ok >"$2"
   else echo failed >"$2"; exit 2; fi' _ "${CARGO_TARGET_DIR:-target}/debug/coordbench" "$servers_ready"
# etcd's Go client and Curator's recipe checks (tests/interop_clients.rs): their paths.
eval "$(scripts/build-interop.sh --print)"
# The releases a run starts when it names none (coordbench run --server-version).
export COORDBENCH_ETCD_VERSION="${COORDBENCH_ETCD_VERSION:-3.6.16}"
export COORDBENCH_ZOOKEEPER_VERSION="${COORDBENCH_ZOOKEEPER_VERSION:-3.9.5}"
# The notebooks need neither cargo nor the servers: they run beside the build and tests.
start_background notebooks scripts/test-notebooks.sh
# Every test binary of `cargo test --workspace --all-targets`, two at a time once built
# and a third while the CPUs are mostly idle (most wait on servers they start); TEST_JOBS=1
# runs them one after another.
scripts/run_tests.py --after "$servers_ready" "$@" || tests_status=$?
finish install-servers
phase_done "building and running the test binaries"
finish notebooks
phase_done "executing the notebooks (what remained)"
((${tests_status:-0} == 0)) || exit "$tests_status"
# No function over 110 lines outside tests (prints the longest).
scripts/function-lengths.py --top 5

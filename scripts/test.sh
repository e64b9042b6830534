#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test of the workspace,
# then executes every notebook on results/reference/ (scripts/test-notebooks.sh).
# Integration tests start (and stop) their own etcd clusters on 127.0.0.1 from Debian's
# etcd-server package, so nothing else needs to be running.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# A one-shot build gains nothing from incremental caches, which would double target/ on disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# Every test binary of `cargo test --workspace --all-targets`, two at a time (most wait on
# servers they start); TEST_JOBS=1 runs them one after another.
scripts/run_tests.py "$@"
scripts/test-notebooks.sh

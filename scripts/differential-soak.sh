#!/usr/bin/env bash
# Runs the random sequences of both differential tests over many seeds, each test on one
# pair of servers: raft against etcd (tests/etcd_differential.rs, etcd 3.6.16 when
# installed: scripts/install-servers.sh) and zab against ZooKeeper 3.8.0
# (tests/zk_differential.rs). A difference stops that test with its seed, the replay
# command and a shrunk sequence that shows it; the other test still runs. Exit 1 if either
# found one.
# Usage: scripts/differential-soak.sh [SEEDS]   (A..B, B excluded; default 1..200)
# An etcd seed of 250 steps takes about 40 s on 2 cores, a ZooKeeper one about 2 s.
# ETCD_DIFF_RAFT_MEMBERS=3 / ZK_DIFF_ZAB_MEMBERS=3 compare against a 3-member engine.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-1..200}
if [[ ! $seeds =~ ^[0-9]+\.\.[0-9]+$ ]]; then
  echo "differential-soak.sh: SEEDS is A..B (B excluded), not '$seeds'" >&2
  exit 2
fi
# Ports 32000-32099, which neither the test suite nor the provisioner's free-port range
# uses, so that a soak can run beside scripts/test.sh.
export ETCD_DIFF_BASE_PORT=${ETCD_DIFF_BASE_PORT:-32030}
export ZK_DIFF_BASE_PORT=${ZK_DIFF_BASE_PORT:-32040}
status=0
# --nocapture: a line per seed as it passes.
ETCD_DIFF_SEED=$seeds cargo test --test etcd_differential -- --exact random_sequences_match --nocapture || status=1
ZK_DIFF_SEED=$seeds cargo test --test zk_differential -- --exact random_sequences_match --nocapture || status=1
exit $status

#!/usr/bin/env bash
# Current etcd and ZooKeeper releases beside Debian's old ones and the built-in engines, in
# one sitting on one machine, every comparison interleaved (each repeat visits every
# release before the next repeat starts):
#  1. kv-put, 64 clients, 3 members, synced disk: throughput, p99, server CPU per op, peak
#     RSS (workloads/server-versions.toml);
#  2. lock, 16 clients on one lock, hold 0: acquisitions/s, handover p50/p99
#     (workloads/server-versions-lock.toml);
#  3. failover: kill-leader on 3 and 5 members, time to a new leader and to the first write.
# Every release must be installed first (coordbench install --list).
# Usage: workloads/specs/server-versions.sh [OUT]   (QUICK=1 for the specs' [quick] windows;
#   FAILOVER_DURATION=20s, RELEASES="etcd@3.4.23 ..." for step 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-results/server-versions-$(date -u +%Y%m%dT%H%M%SZ)}
FAILOVER_DURATION=${FAILOVER_DURATION:-20s}
RELEASES=${RELEASES:-etcd@3.4.23 etcd@3.5.21 etcd@3.6.16 etcd@3.7.3 zookeeper@3.8.0 zookeeper@3.8.6 zookeeper@3.9.5 raft zab}
quick=()
[[ ${QUICK:-} == 1 ]] && quick=(--quick)
cargo build --release --quiet
bin=./target/release/coordbench
mkdir -p "$OUT"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/machine.txt"

"$bin" sweep workloads/server-versions.toml "${quick[@]}" --out "$OUT/kv-put"
"$bin" sweep workloads/server-versions-lock.toml "${quick[@]}" --out "$OUT/lock"

# Failover: releases alternate within each cluster size.
for size in 3 5; do
  for release in $RELEASES; do
    target=${release%@*} version=()
    [[ $release == *@* ]] && version=(--server-version "${release#*@}")
    "$bin" run --quiet --target "$target" "${version[@]}" --cluster-size "$size" --disk disk \
      --workload kv-put --clients 4 --fault kill-leader --fault-every 5s \
      --duration "$FAILOVER_DURATION" --out "$OUT/failover/$release-m$size"
  done
done
echo "machine after: load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"

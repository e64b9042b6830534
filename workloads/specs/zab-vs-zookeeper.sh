#!/usr/bin/env bash
# The built-in Zab engine beside real ZooKeeper in one session, 3 members on the local disk,
# 64 clients: kv-put throughput and p99, and lock throughput (zk-recipe, 8 locks). Targets
# alternate and each point repeats REPEATS times; both are measured through the same
# ZooKeeper driver (its own client).
# Usage: workloads/specs/zab-vs-zookeeper.sh [OUT]   (DURATION=10s REPEATS=2 to change;
#   PIN_CLIENT=0 PIN_SERVERS=1 puts the load generator and the members on separate cores)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-results/zab-vs-zookeeper-$(date -u +%Y%m%dT%H%M%SZ)}
DURATION=${DURATION:-10s}
REPEATS=${REPEATS:-2}
cargo build --release --quiet
bin=./target/release/coordbench
pin=()
[[ -n "${PIN_CLIENT:-}" ]] && pin+=(--pin-client "$PIN_CLIENT")
[[ -n "${PIN_SERVERS:-}" ]] && pin+=(--pin-servers "$PIN_SERVERS")
run() { local name=$1; shift; "$bin" run --quiet --duration "$DURATION" --cluster-size 3 --disk disk --clients 64 "${pin[@]}" --out "$OUT/$name" "$@"; }

for r in $(seq 1 "$REPEATS"); do
  for target in zab zookeeper; do
    run "$target-kvput-r$r" --target "$target" --workload kv-put
    run "$target-lock-r$r" --target "$target" --workload lock --hold 0s --locks 8
  done
done

first=$(ls "$OUT"/*/summary.csv | head -n 1)
{ head -n 1 "$first"; for f in "$OUT"/*/summary.csv; do tail -n +2 "$f"; done; } > "$OUT/summary.csv"
echo "merged: $OUT/summary.csv"

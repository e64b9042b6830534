#!/usr/bin/env bash
# Reproduces the foundation's performance figures side by side in one session:
#  1. the null target's highest sustained open-loop rate (the generator's own ceiling);
#  2. etcd kv-put throughput and p99 at 1, 16, 64 clients, 1 and 3 members, disk and tmpfs;
#  3. etcd lock throughput, etcd-mutex vs naive, 16 clients on one lock.
# Every run's directory lands under $OUT; all summary rows are merged into $OUT/summary.csv.
# Usage: workloads/specs/foundation-perf.sh [OUT] (DURATION=10s to change the window)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-results/foundation-perf-$(date -u +%Y%m%dT%H%M%SZ)}
DURATION=${DURATION:-10s}
cargo build --release --quiet
bin=./target/release/coordbench
run() { local name=$1; shift; "$bin" run --quiet --duration "$DURATION" --out "$OUT/$name" "$@"; }

for rate in 200000 400000 800000 1600000; do
  run "null-open-$rate" --target null --workload kv-put --rate "$rate" --clients 64
done
for disk in disk tmpfs; do
  for size in 1 3; do
    for clients in 1 16 64; do
      run "etcd-kvput-$disk-n$size-c$clients" --target etcd --workload kv-put \
        --cluster-size "$size" --disk "$disk" --clients "$clients"
    done
  done
done
for recipe in etcd-mutex naive; do
  run "etcd-lock-$recipe" --target etcd --workload lock --hold 0s --recipe "$recipe" --clients 16 --cluster-size 3
done

first=$(ls "$OUT"/*/summary.csv | head -n 1)
{ head -n 1 "$first"; for f in "$OUT"/*/summary.csv; do tail -n +2 "$f"; done; } > "$OUT/summary.csv"
echo "merged: $OUT/summary.csv"

#!/usr/bin/env bash
# etcd and ZooKeeper side by side in one session, 3 members on the local disk:
#  1. kv-put throughput and p99 at 1, 16 and 64 clients;
#  2. lock throughput and handover p99, herd-free and naive recipes, 16 clients on one lock.
# Targets alternate point by point so drift on a shared machine hits both alike.
# Usage: workloads/specs/etcd-vs-zookeeper.sh [OUT]   (DURATION=10s to change the window)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-results/etcd-vs-zookeeper-$(date -u +%Y%m%dT%H%M%SZ)}
DURATION=${DURATION:-10s}
cargo build --release --quiet
bin=./target/release/coordbench
run() { local name=$1; shift; "$bin" run --quiet --duration "$DURATION" --cluster-size 3 --disk disk --out "$OUT/$name" "$@"; }

for clients in 1 16 64; do
  for target in etcd zookeeper; do
    run "$target-kvput-c$clients" --target "$target" --workload kv-put --clients "$clients"
  done
done
for recipe in herd-free naive; do
  for target in etcd zookeeper; do
    name=$recipe
    [[ $recipe == herd-free && $target == etcd ]] && name=etcd-mutex
    [[ $recipe == herd-free && $target == zookeeper ]] && name=zk-recipe
    run "$target-lock-$recipe" --target "$target" --workload lock --hold 0s --recipe "$name" --clients 16
  done
done

first=$(ls "$OUT"/*/summary.csv | head -n 1)
{ head -n 1 "$first"; for f in "$OUT"/*/summary.csv; do tail -n +2 "$f"; done; } > "$OUT/summary.csv"
echo "merged: $OUT/summary.csv"

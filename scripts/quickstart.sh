#!/usr/bin/env bash
# One command from a fresh Debian machine to a first comparison: installs prerequisites,
# builds coordbench, and compares lock recipes (herd-free vs naive) on a local 3-member etcd
# cluster and a local 3-server ZooKeeper ensemble that coordbench starts and tears down.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo build --release --quiet
out=results/quickstart-$(date -u +%Y%m%dT%H%M%SZ)
for pair in etcd:etcd-mutex etcd:naive zookeeper:zk-recipe zookeeper:naive; do
  target=${pair%%:*} recipe=${pair##*:}
  ./target/release/coordbench run --target "$target" --cluster-size 3 --workload lock \
    --recipe "$recipe" --clients 16 --duration 10s --out "$out/$target-$recipe"
done
echo
echo "side by side:"
{ head -n 1 "$out/etcd-etcd-mutex/summary.csv"; tail -q -n +2 "$out"/*/summary.csv; } |
  cut -d, -f1-5,14-16,18,23-26 | { command -v column >/dev/null && column -s, -t || cat; }

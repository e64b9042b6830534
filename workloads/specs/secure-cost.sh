#!/usr/bin/env bash
# What --secure (TLS with client certificates, and auth) costs on the etcd API: real etcd
# beside the Raft engine, kv-put and lock, plain and secure. Each (target, workload) point
# runs in adjacent plain/secure pairs whose order alternates (plain first in odd rounds),
# and the targets alternate within a round, so drift on a shared machine hits every side
# alike; the ratio is taken within each pair. Beside each pair's figures: the machine's
# state during the runs, as the load generator's run-queue wait (the share of the window
# its threads waited for a core, run.json generator.runqueue_wait_s) and the members' disk
# sync latency (summary.csv sync_p50_us).
# Usage: workloads/specs/secure-cost.sh [OUT]
#   ETCD_VERSION=3.6.16 DURATION=10s ROUNDS=3 CLIENTS=16 to change;
#   BIN=path/to/coordbench to use a build other than this checkout's release build.
#   workloads/specs/secure-cost.sh --summary OUT prints an earlier OUT's table again.
set -euo pipefail
cd "$(dirname "$0")/../.."

summary() {
  python3 - "$1" <<'EOF'
"""Per pair: secure / plain throughput, p99 and member CPU per op, with the machine's
state; then the medians of the ratios."""
import csv, json, statistics, sys
from pathlib import Path

out = Path(sys.argv[1])
runs = {}
for run_dir in sorted(p for p in out.iterdir() if (p / "summary.csv").exists()):
    with open(run_dir / "summary.csv") as f:
        row = next(csv.DictReader(f))
    record = json.loads((run_dir / "run.json").read_text())
    window = float(row["duration_s"]) or 1.0
    row["runqueue_pct"] = 100 * record["generator"]["runqueue_wait_s"] / window
    runs[run_dir.name] = row

print("| target | workload | round | plain ops/s | secure ops/s | ratio | p99 plain / secure ms "
      "| member CPU µs/op plain / secure | generator run-queue wait % | sync p50 µs |")
print("|---|---|---|---|---|---|---|---|---|---|")
ratios = {}
for name in sorted(runs):
    if "-secure-false-" not in name:
        continue
    plain, secure = runs[name], runs.get(name.replace("-secure-false-", "-secure-true-"))
    if secure is None or plain["complete"] != "true" or secure["complete"] != "true":
        continue
    key = (plain["target"], plain["workload"])
    num = lambda r, c: float(r[c] or 0)
    ratio = num(secure, "throughput_ops_s") / num(plain, "throughput_ops_s")
    cpu = num(secure, "server_cpu_us_per_op") / max(num(plain, "server_cpu_us_per_op"), 1e-9)
    ratios.setdefault(key, []).append((ratio, cpu))
    print(f"| {key[0]} | {key[1]} | {name.rsplit('-r', 1)[1]} "
          f"| {num(plain, 'throughput_ops_s'):,.0f} | {num(secure, 'throughput_ops_s'):,.0f} | {ratio:.2f} "
          f"| {num(plain, 'p99_us') / 1000:.1f} / {num(secure, 'p99_us') / 1000:.1f} "
          f"| {num(plain, 'server_cpu_us_per_op'):.0f} / {num(secure, 'server_cpu_us_per_op'):.0f} "
          f"| {plain['runqueue_pct']:.0f} / {secure['runqueue_pct']:.0f} "
          f"| {plain['sync_p50_us']} / {secure['sync_p50_us']} |")
print()
for (target, workload), rs in sorted(ratios.items()):
    print(f"{target} {workload}, medians of {len(rs)} pairs: secure/plain throughput "
          f"{statistics.median(r for r, _ in rs):.2f}, member CPU per op {statistics.median(c for _, c in rs):.2f}")
EOF
}

if [[ ${1:-} == --summary ]]; then summary "$2"; exit; fi
OUT=${1:-results/secure-cost-$(date -u +%Y%m%dT%H%M%SZ)}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-16}
if [[ -z "${BIN:-}" ]]; then
  cargo build --release --quiet
  BIN=${CARGO_TARGET_DIR:-target}/release/coordbench
fi
"$BIN" install etcd "$ETCD_VERSION" >/dev/null
mkdir -p "$OUT"
run() {
  local name=$1; shift
  "$BIN" run --quiet --duration "$DURATION" --cluster-size 3 --disk disk --clients "$CLIENTS" \
    --out "$OUT/$name" "$@"
}

for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then order=(false true); else order=(true false); fi
  for workload in kv-put lock; do
    for target in etcd raft; do
      version=(); [[ $target == etcd ]] && version=(--server-version "$ETCD_VERSION")
      extra=(); [[ $workload == lock ]] && extra=(--hold 0s)
      for secure in "${order[@]}"; do
        run "$target-$workload-secure-$secure-r$r" --target "$target" "${version[@]}" \
          --workload "$workload" --secure "$secure" "${extra[@]}"
      done
    done
  done
done

first=$(ls "$OUT"/*/summary.csv | head -n 1)
{ head -n 1 "$first"; for f in "$OUT"/*/summary.csv; do tail -n +2 "$f"; done; } > "$OUT/summary.csv"
summary "$OUT"

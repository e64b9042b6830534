#!/usr/bin/env bash
# What --secure (TLS with client certificates, and auth) costs on the etcd API: real etcd
# beside the Raft engine, kv-put and lock, plain and secure. Each (target, workload) point
# runs in adjacent plain/secure pairs whose order alternates (plain first in odd rounds),
# and the targets alternate within a round, so drift on a shared machine hits every side
# alike; the ratio is taken within each pair. Every run records the machine's CPU pressure
# (the share of wall time some task waited on a run queue, /proc/pressure/cpu) beside its
# figures, and its sync latency is in summary.csv (sync_p50_us).
# Usage: workloads/specs/secure-cost.sh [OUT]
#   ETCD_VERSION=3.6.16 DURATION=10s ROUNDS=3 CLIENTS=16 to change;
#   BIN=path/to/coordbench to use a build other than this checkout's release build.
set -euo pipefail
cd "$(dirname "$0")/../.."
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
pressure() { awk '/^some/ { sub("total=", "", $5); print $5 }' /proc/pressure/cpu 2>/dev/null || echo 0; }

run() {
  local name=$1; shift
  local before after start end
  before=$(pressure); start=$(date +%s%N)
  "$BIN" run --quiet --duration "$DURATION" --cluster-size 3 --disk disk --clients "$CLIENTS" \
    --out "$OUT/$name" "$@"
  after=$(pressure); end=$(date +%s%N)
  # total= is in microseconds, the wall clock in nanoseconds.
  echo "$name $(( (after - before) * 1000 * 100 / (end - start) ))" >> "$OUT/cpu-pressure.txt"
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
python3 - "$OUT" <<'EOF'
"""Per pair: secure / plain throughput, p99 and server CPU per op; then the medians."""
import csv, statistics, sys
from pathlib import Path

out = Path(sys.argv[1])
pressure = dict(line.split() for line in (out / "cpu-pressure.txt").read_text().splitlines())
rows = {}
for run_dir in sorted(p for p in out.iterdir() if (p / "summary.csv").exists()):
    with open(run_dir / "summary.csv") as f:
        row = next(csv.DictReader(f))
    rows[run_dir.name] = row

print("| target | workload | round | plain ops/s | secure ops/s | ratio | p99 plain / secure ms "
      "| server CPU µs/op plain / secure | CPU pressure % | sync p50 µs |")
print("|---|---|---|---|---|---|---|---|---|---|")
ratios = {}
for name in sorted(rows):
    if "-secure-false-" not in name:
        continue
    plain, secure = rows[name], rows.get(name.replace("-secure-false-", "-secure-true-"))
    if secure is None or plain["complete"] != "true" or secure["complete"] != "true":
        continue
    target, workload, rnd = plain["target"], plain["workload"], name.rsplit("-r", 1)[1]
    ratio = float(secure["throughput_ops_s"]) / float(plain["throughput_ops_s"])
    ratios.setdefault((target, workload), []).append(ratio)
    ms = lambda r: float(r["p99_us"]) / 1000
    press = f'{pressure.get(name, "?")} / {pressure.get(name.replace("-false-", "-true-"), "?")}'
    print(f'| {target} | {workload} | {rnd} | {float(plain["throughput_ops_s"]):,.0f} '
          f'| {float(secure["throughput_ops_s"]):,.0f} | {ratio:.2f} | {ms(plain):.1f} / {ms(secure):.1f} '
          f'| {float(plain["server_cpu_us_per_op"] or 0):.0f} / {float(secure["server_cpu_us_per_op"] or 0):.0f} '
          f'| {press} | {plain["sync_p50_us"]} / {secure["sync_p50_us"]} |')
print()
for (target, workload), rs in sorted(ratios.items()):
    print(f"{target} {workload}: secure/plain throughput, median of {len(rs)} pairs: "
          f"{statistics.median(rs):.2f}")
EOF

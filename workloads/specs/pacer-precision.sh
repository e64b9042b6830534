#!/usr/bin/env bash
# Open-loop pacing precision on a shared machine: the null target (no server, so every
# microsecond of latency is the generator's own) at RATES operations per second, with a CPU
# hog (a busy shell loop) on the generator's own core, with and without --realtime. The
# generator is pinned to CPU 0 and the hog too: the worst case of a shared runner, where
# another tenant's thread lands on the generator's core. Rates and modes alternate, each
# point REPEATS times. Prints per point the median over repeats of p50, p99, p99.9 and the
# start lag p99 (schedule_lag_p99_us: how late operations were sent), and the generator's
# run-queue wait (run.json generator.runqueue_wait_s) beside them.
# Usage: workloads/specs/pacer-precision.sh [BIN] [OUT]
#   (RATES="10000 100000 1000000" DURATION=5s REPEATS=3 HOG_CPU=0 to change; HOG_CPU=none
#    runs without a hog)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-}
if [[ -z $BIN ]]; then
  cargo build --release --quiet
  BIN=${CARGO_TARGET_DIR:-target}/release/coordbench
fi
OUT=${2:-/tmp/pacer-precision-$(date -u +%Y%m%dT%H%M%SZ)}
RATES=${RATES:-10000 100000 1000000}
DURATION=${DURATION:-5s}
REPEATS=${REPEATS:-3}
HOG_CPU=${HOG_CPU:-0}
mkdir -p "$OUT"

hog=""
stop_hog() { [[ -n $hog ]] && kill "$hog" 2>/dev/null; wait 2>/dev/null || true; hog=""; }
trap stop_hog EXIT
if [[ $HOG_CPU != none ]]; then
  taskset -c "$HOG_CPU" bash -c 'while :; do :; done' &
  hog=$!
fi

for r in $(seq 1 "$REPEATS"); do
  for rate in $RATES; do
    for mode in normal realtime; do
      flags=()
      [[ $mode == realtime ]] && flags+=(--realtime)
      "$BIN" run --quiet --target null --workload kv-put --rate "$rate" --duration "$DURATION" \
        --warmup 1s --pin-client 0 "${flags[@]}" --out "$OUT/$mode-$rate-r$r" >/dev/null
    done
  done
done
stop_hog

python3 - "$OUT" <<'PY'
import csv, json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
points = {}
for run in sorted(out.iterdir()):
    if not (run / "summary.csv").exists():
        continue
    mode, rate, _ = run.name.split("-")
    row = next(csv.DictReader(open(run / "summary.csv")))
    gen = json.load(open(run / "run.json"))["generator"]
    points.setdefault((int(rate), mode), []).append((row, gen))
print(f"{'rate/s':>9} {'mode':>9} {'n':>2} {'p50 us':>8} {'p99 us':>8} {'p99.9 us':>9} "
      f"{'lag p99 us':>10} {'rq wait s':>9} {'realtime':>8}")
for (rate, mode), runs in sorted(points.items()):
    med = lambda key: statistics.median(float(r[key] or "nan") for r, _ in runs)
    wait = statistics.median(g["runqueue_wait_s"] for _, g in runs)
    rt = all(g.get("realtime") for _, g in runs)
    print(f"{rate:>9} {mode:>9} {len(runs):>2} {med('p50_us'):>8.0f} {med('p99_us'):>8.0f} "
          f"{med('p999_us'):>9.0f} {med('schedule_lag_p99_us'):>10.0f} {wait:>9.3f} {str(rt):>8}")
PY
echo "runs: $OUT"

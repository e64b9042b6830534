#!/usr/bin/env bash
# How often the default gate (workloads/gate.toml) fails with no change (false alarms) and
# how often it catches known slowdowns (power), measured on this machine. Reproduces the
# figures in RESULTS.md ("Gates: power and false alarms").
#
#   workloads/specs/gate-calibration.sh OUT_DIR     runs everything, then the analysis
#   workloads/specs/gate-power.sh OUT_DIR [N]        the analysis alone (gates of N repeats)
#
# 1. A/A: one gate session of AA_REPEATS (default 50) repeats per side, both sides the same
#    build and options. Every block of 10 consecutive repeats is exactly what a default gate
#    runs (the same points, interleaved the same way, back to back), so 50 repeats are 5
#    A/A gates of the default size (10 of 5 repeats); the analysis also draws random sets
#    of pairs.
# 2. A/B: the candidate's emulated-ssd sync delay raised by 10%, 20% and 50% (baseline: the
#    ssd profile's 750us), AB_REPEATS (default 10) repeats per side each, and the candidate
#    on an emulated ssd against the tmpfs baseline.
# 3. Known drops on real noise: copies of the A/A candidate's runs with throughput scaled by
#    0.9, 0.8 and 0.7 (summary.csv only), judged like the rest: how often the defaults catch
#    a 10%, 20% and 30% drop given this machine's run-to-run noise and its pairing.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: workloads/specs/gate-calibration.sh OUT_DIR}
bin=${COORDBENCH:-target/release/coordbench}
spec=workloads/gate.toml
mkdir -p "$out"

"$bin" gate "$spec" --repeats "${AA_REPEATS:-50}" --out "$out/aa" >"$out/aa.log" 2>&1 || true
for raise in 10 20 50; do
  delay=$((750 * (100 + raise) / 100))us
  "$bin" gate "$spec" --repeats "${AB_REPEATS:-10}" --out "$out/ab-$raise" \
    --baseline disk=ssd --candidate disk=ssd --candidate "sync_delay=$delay" >"$out/ab-$raise.log" 2>&1 || true
done
"$bin" gate "$spec" --repeats "${AB_REPEATS:-10}" --out "$out/ab-ssd" --candidate disk=ssd >"$out/ab-ssd.log" 2>&1 || true

for drop in 10 20 30; do
  workloads/specs/scale-candidate.py "$out/aa" "$out/drop-$drop" throughput_ops_s "0.$((100 - drop))"
done
exec "$(dirname "$0")/gate-power.sh" "$out"

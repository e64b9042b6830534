#!/usr/bin/env bash
# How often the default gate (workloads/gate.toml) fails with no change (false alarms) and
# how often it catches known slowdowns (power), measured on this machine. Reproduces the
# figures in RESULTS.md ("Gates: power and false alarms").
#
#   workloads/specs/gate-calibration.sh OUT_DIR     runs everything, then the analysis
#   workloads/specs/gate-power.sh OUT_DIR [N]        the analysis alone (gates of N repeats)
#
# 1. A/A: one gate session of AA_REPEATS (default 50) repeats per side, both sides the same
#    build and options. Every block of 5 consecutive repeats is exactly what a default gate
#    runs (the same points, interleaved the same way, back to back), so 50 repeats are 10
#    A/A gates.
# 2. A/B: the candidate's emulated-ssd sync delay raised by 10%, 20% and 50% (baseline: the
#    ssd profile's 750us), AB_REPEATS (default 10) repeats per side each, so 2 gates each;
#    the analysis also draws every 5 of the 10 pairs to estimate how often each is caught.
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
exec "$(dirname "$0")/gate-power.sh" "$out"

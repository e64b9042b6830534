#!/usr/bin/env bash
# Does the default gate (workloads/gate.toml) catch a real slowdown in the engines, and stay
# quiet without one? GATES (default 5) A/A gates and GATES A/B gates, alternating, on one
# build with the `test-slowdown` feature: the baseline's members run it as it is, the
# candidate's through a wrapper that sets COORDBENCH_TEST_COMMIT_SPIN=SPIN (iterations spun
# per committed command, in the engines' apply path and in the cost simulation alike).
# Prints per gate its verdict, the checks it breached, the test that decided each, and its
# wall time; first the spin's size as the deterministic cost sees it (raft and zab).
#
#   cargo build --release --features test-slowdown
#   workloads/specs/gate-slowdown.sh BIN OUT [SPIN]
#     (GATES=5 SPEC=workloads/gate.toml GATE_FLAGS="--quick" to change)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$(realpath "${1:?usage: gate-slowdown.sh BIN OUT [SPIN]}")
OUT=${2:?usage: gate-slowdown.sh BIN OUT [SPIN]}
SPIN=${3:-25}
GATES=${GATES:-5}
SPEC=${SPEC:-workloads/gate.toml}
read -r -a gate_flags <<<"${GATE_FLAGS:-}"
mkdir -p "$OUT"
OUT=$(realpath "$OUT")

slow="$OUT/coordbench-spin-$SPIN"
printf '#!/bin/sh\nCOORDBENCH_TEST_COMMIT_SPIN=%s exec %q "$@"\n' "$SPIN" "$BIN" >"$slow"
chmod +x "$slow"

{
  echo "engine,spin,instructions_per_op"
  for engine in raft zab; do
    for bin in "$BIN" "$slow"; do
      per_op=$("$bin" simulate cost --engine "$engine" --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["instructions_per_op"])')
      echo "$engine,$([[ $bin == "$slow" ]] && echo "$SPIN" || echo 0),$per_op"
    done
  done
} | tee "$OUT/cost.csv"

echo "gate,kind,exit,seconds" >"$OUT/gates.csv"
for i in $(seq 1 "$GATES"); do
  for kind in aa ab; do
    cand=()
    [[ $kind == ab ]] && cand=(--candidate "engine_bin=$slow")
    dir="$OUT/$kind-$i"
    start=$(date +%s)
    code=0
    "$BIN" gate "$SPEC" "${gate_flags[@]}" --out "$dir" "${cand[@]}" >"$dir.log" 2>&1 || code=$?
    echo "$i,$kind,$code,$(($(date +%s) - start))" | tee -a "$OUT/gates.csv"
  done
done

python3 - "$OUT" <<'PY'
import csv, json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print("\n| gate | verdict | breached (test) | minutes |\n|---|---|---|---|")
for row in csv.DictReader(open(out / "gates.csv")):
    doc = json.loads((out / f"{row['kind']}-{row['gate']}" / "gate.json").read_text())
    breached = [f"{c['threshold']} @ {c['point']} ({c['test']})"
                for c in doc.get("checks", []) if c.get("outcome") == "breached"]
    verdict = {"0": "pass", "3": "fail"}.get(row["exit"], f"exit {row['exit']}")
    label = f"{row['kind'].upper()} {row['gate']}"
    print(f"| {label} | {verdict} | {'; '.join(breached) or '-'} | {int(row['seconds']) / 60:.1f} |")
PY

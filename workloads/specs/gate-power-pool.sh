#!/usr/bin/env bash
# The power table of the default gate from the gates workloads/specs/gate-slowdown.sh ran:
# pools their A/A gates into one session of every pair (aa), their A/B gates likewise
# (ab-spin: the real slowdown), and makes known regressions on real noise from the A/A
# pairs, the candidate's figure scaled (summary.csv only): throughput down 5, 10 and 20%
# (thr-5, thr-10, thr-20) and the members' CPU per operation up as much (cpu-5, cpu-10,
# cpu-20). Then workloads/specs/gate-power.sh judges gates of N pairs drawn from each
# (A/A: false alarms; the rest: how often caught), once with the default gate's thresholds
# and once with workloads/specs/gate-cpu-thresholds.toml's (CPU per operation gated instead
# of throughput).
#
#   workloads/specs/gate-power-pool.sh GATES_DIR [N]   (GATE_SPECS="a.toml b.toml" to change)
# Writes GATES_DIR/pool/ and GATES_DIR/pool/power-nN-SPEC.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
gates=$(realpath "${1:?usage: gate-power-pool.sh GATES_DIR [N]}")
python3 - "$gates" <<'PY'
import json, os, re, shutil, subprocess, sys

gates = sys.argv[1]
pool = os.path.join(gates, "pool")
shutil.rmtree(pool, ignore_errors=True)

def merge(kind, name):
    """Every run of the `kind`-G gates as one session, repeat r of gate G renumbered."""
    dirs = sorted((d for d in os.listdir(gates) if re.fullmatch(rf"{kind}-\d+", d)),
                  key=lambda d: int(d.split("-")[1]))
    for side in ("baseline", "candidate"):
        os.makedirs(f"{pool}/{name}/{side}")
        points = []
        for g, gate in enumerate(dirs):
            for run in os.listdir(f"{gates}/{gate}/{side}"):
                m = re.fullmatch(r"(.*)-r(\d+)", run)
                if m and os.path.isfile(f"{gates}/{gate}/{side}/{run}/summary.csv"):
                    repeat = g * 1000 + int(m.group(2))
                    pooled = f"{m.group(1)}-r{repeat}"
                    os.symlink(f"{gates}/{gate}/{side}/{run}", f"{pool}/{name}/{side}/{pooled}")
                    points.append({"name": pooled, "repeat": repeat})
        # The side's record, as a gate writes it: `compare --paired` pairs runs by its repeats.
        with open(f"{pool}/{name}/{side}/run.json", "w") as f:
            json.dump({"schema": "coordbench.sweep/1", "complete": True, "points": points}, f)

def scaled(name, column, factor):
    """The A/A pairs with the candidate's `column` multiplied by `factor`."""
    subprocess.run(["workloads/specs/scale-candidate.py", f"{pool}/aa", f"{pool}/{name}",
                    column, str(factor)], check=True)

merge("aa", "aa")
merge("ab", "ab-spin")
for pct in (5, 10, 20):
    scaled(f"thr-{pct}", "throughput_ops_s", 1 - pct / 100)
    scaled(f"cpu-{pct}", "server_cpu_us_per_op", 1 + pct / 100)
PY
n=${2:-10}
for spec in ${GATE_SPECS:-workloads/gate.toml workloads/specs/gate-cpu-thresholds.toml}; do
  GATE_SPEC=$spec workloads/specs/gate-power.sh "$gates/pool" "$n" >/dev/null
  mv "$gates/pool/power-n$n.md" "$gates/pool/power-n$n-$(basename "$spec" .toml).md"
  echo "$gates/pool/power-n$n-$(basename "$spec" .toml).md"
done

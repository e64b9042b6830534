#!/usr/bin/env bash
# The analysis half of gate-calibration.sh: for every gate session under OUT_DIR (aa,
# ab-10, ab-20, ab-50, ab-ssd, drop-10/20/30), judges gates of N (default 10) repeats per side with the thresholds
# of workloads/gate.toml, through `coordbench compare --thresholds --paired`, exactly as
# `coordbench gate` judges its own runs (PAIRED=0: unpaired, as gates did before they
# judged their pairs):
#   - disjoint blocks of N consecutive repeats: each is one gate as it would have run;
#   - random draws of N of the session's repeat pairs (SUBSETS, default 100), to estimate
#     how often such a gate fails (A/A: false alarms; A/B: the slowdown caught);
# and the whole session's change in throughput and p99 per point (all repeats).
#   workloads/specs/gate-power.sh OUT_DIR [N]
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 - "$@" <<'PY'
import json, os, random, re, subprocess, sys

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
binary = os.environ.get("COORDBENCH", "target/release/coordbench")
spec = os.environ.get("GATE_SPEC", "workloads/gate.toml")
paired = ["--paired"] if os.environ.get("PAIRED", "1") != "0" else []
report = []

def runs(side_dir, repeats):
    names = [d for d in os.listdir(side_dir) if os.path.isfile(os.path.join(side_dir, d, "run.json"))]
    return ",".join(os.path.join(side_dir, d) for d in sorted(names)
                    if int(re.search(r"-r(\d+)$", d).group(1)) in repeats)

def gate(session, repeats):
    """Exit code of compare --thresholds on these repeats, and the breached checks."""
    cmd = [binary, "compare", runs(f"{session}/baseline", repeats), runs(f"{session}/candidate", repeats),
           "--thresholds", spec, "--format", "json", *paired]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 3):
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    doc = json.loads(p.stdout)
    breached = [f"{c['threshold']} @ {c['point']}" for c in doc["thresholds"] if c["outcome"] == "breached"]
    return p.returncode, breached, doc

def changes(doc):
    rows = []
    for point in doc["comparison"]["points"]:
        figs = {f["figure"]: f for f in point["figures"]}
        def pct(name):
            f = figs.get(name)
            return "-" if not f or not f["base_median"] else f"{(f['cand_median'] / f['base_median'] - 1) * 100:+.1f}%"
        rows.append(f"| {point['label']} | {len(point['base_dirs'])} | {pct('throughput_ops_s')} | {pct('server_cpu_us_per_op')} | {pct('p99_us')} |")
    return rows

for session in sorted(d for d in os.listdir(out) if os.path.isdir(os.path.join(out, d, "baseline"))):
    path = os.path.join(out, session)
    reps = sorted({int(m.group(1)) for d in os.listdir(f"{path}/baseline") if (m := re.search(r"-r(\d+)$", d))})
    _, _, whole = gate(path, set(reps))
    report.append(f"\n## {session}: {len(reps)} repeats per side\n")
    report.append("| point | repeats | throughput change (medians) | CPU/op change (medians) | p99 change (medians) |\n|---|---|---|---|---|")
    report.extend(changes(whole))
    blocks = [reps[i:i + n] for i in range(0, len(reps) - n + 1, n)]
    failed = 0
    lines = []
    for block in blocks:
        code, breached, _ = gate(path, set(block))
        failed += code == 3
        lines.append(f"- repeats {block[0]}-{block[-1]}: {'FAILED: ' + '; '.join(breached) if code == 3 else 'passed'}")
    report.append(f"\nGates of {n} consecutive repeats: {failed} of {len(blocks)} failed\n")
    report.extend(lines)
    if len(reps) > n:  # every draw keeps pairs together, as the gate ran them
        rng = random.Random(1)
        draws = [rng.sample(reps, n) for _ in range(int(os.environ.get("SUBSETS", "100")))]
        failed = sum(gate(path, set(d))[0] == 3 for d in draws)
        what = "false alarms" if session.startswith("aa") else "caught"  # A/B and known drops
        report.append(f"\nRandom draws of {n} of the {len(reps)} pairs: {what} in {failed} of {len(draws)} ({failed / len(draws):.0%})")

text = "# Gate calibration: " + out + f" (gates of {n} repeats, thresholds of {spec})\n" + "\n".join(report) + "\n"
open(os.path.join(out, f"power-n{n}.md"), "w").write(text)
print(text)
PY

#!/usr/bin/env python3
"""A known regression on real noise: SESSION's pairs with the candidate's COLUMN multiplied by
FACTOR (summary.csv only), written as a new gate session DEST (baseline linked, candidate
copied), for workloads/specs/gate-power.sh to judge. Used by gate-calibration.sh and
gate-power-pool.sh.

    scale-candidate.py SESSION DEST COLUMN FACTOR
"""
import csv, os, shutil, sys

src, dst, column, factor = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
shutil.rmtree(dst, ignore_errors=True)
os.makedirs(f"{dst}/candidate")
os.symlink(os.path.abspath(f"{src}/baseline"), f"{dst}/baseline")
# The side's record, which `compare --paired` pairs runs by.
shutil.copy(f"{src}/candidate/run.json", f"{dst}/candidate/run.json")
for point in os.listdir(f"{src}/candidate"):
    run = os.path.realpath(f"{src}/candidate/{point}")
    if not os.path.isfile(f"{run}/summary.csv"):
        continue
    os.makedirs(f"{dst}/candidate/{point}")
    shutil.copy(f"{run}/run.json", f"{dst}/candidate/{point}/run.json")
    rows = list(csv.DictReader(open(f"{run}/summary.csv")))
    for row in rows:
        if row[column]:
            row[column] = str(float(row[column]) * factor)
    with open(f"{dst}/candidate/{point}/summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)

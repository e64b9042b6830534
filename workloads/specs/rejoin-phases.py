#!/usr/bin/env python3
"""Where a killed member's rejoin went: one row per kill of a raft or zab fault run, then the
first 10 kills against the last 10 and the correlation of rejoin with each start-up phase.

    rejoin-phases.py RUN_DIR [LOGS_DIR]

RUN_DIR is the output directory (--out) of a run such as

    COORDBENCH_LOG=info coordbench run --target zab --workload kv-put --duration 300s \\
        --disk tmpfs --fault kill-random --out RUN_DIR

It reads RUN_DIR/failover.csv and the member logs, RUN_DIR/logs/<engine>-m<N>.log unless
LOGS_DIR names another directory. Members log at info level only with COORDBENCH_LOG=info
(or debug, trace). Each restart of a member appends to its log: `starting`, (raft) `opened
value log`, `recovered` and `serving clients`, carrying `since_exec_ms` (time since the
process's exec, to one clock tick: 10 ms), the phases of the node's start (`wal_open_ms`,
`restore_ms`, `core_ms`) and what the WAL directory held (`segments`, `snapshots`,
`other_files`, `data_bytes`). The k-th kill of a member (kill-leader, kill-random,
restart-all) is matched to the member's (k+1)-th start: its first start is the cluster's.
The match is checked against the clock: a start's exec (its log time less since_exec_ms)
less the kill's restart (at_s + healed_us) is the window's start in wall-clock time, the
same for every kill; a spread over 0.5 s is reported as a likely mismatch.

Columns: at_s and member (failover.csv), rejoin_s (rejoined_us), exec_s (healed_us: the
restart, from the kill), start_ms, rec_ms and serve_ms (since_exec_ms at `starting`,
`recovered` and `serving clients`), wal_ms, rst_ms, core_ms, entries, segs, snaps, bytes,
vlog_ms (raft's value log open, when logged) and after_s: the rejoin left after the member
served, rejoin_s - exec_s - serve_ms (syncing with the leader, and the harness's next poll).
Python 3 standard library only.
"""
import csv
import datetime
import glob
import os
import re
import statistics
import sys

RESTARTS = {"kill-leader", "kill-random", "restart-all"}
NEEDED = ("fault", "at_s", "victims", "healed_us", "rejoined_us")
LINE = re.compile(
    r"^(\S+)\s+\w+\s+\S+: (starting|opened value log|recovered|serving clients)((?:\s+\w+=\S+)*)\s*$"
)
FIELD = re.compile(r"(\w+)=(\S+)")
# (column, width, format, where it comes from in a start: (message, field)), in print order.
PHASES = [
    ("start_ms", 8, ".0f", ("starting", "since_exec_ms")),
    ("vlog_ms", 8, ".2f", ("opened value log", "value_log_ms")),
    ("rec_ms", 8, ".0f", ("recovered", "since_exec_ms")),
    ("wal_ms", 9, ".2f", ("recovered", "wal_open_ms")),
    ("rst_ms", 8, ".2f", ("recovered", "restore_ms")),
    ("core_ms", 8, ".2f", ("recovered", "core_ms")),
    ("entries", 8, ".0f", ("recovered", "entries")),
    ("segs", 5, ".0f", ("recovered", "segments")),
    ("snaps", 5, ".0f", ("recovered", "snapshots")),
    ("bytes", 11, ".0f", ("recovered", "data_bytes")),
    ("serve_ms", 8, ".0f", ("serving clients", "since_exec_ms")),
]


def fail(why):
    sys.exit(f"rejoin-phases.py: {why}")


def read_faults(path):
    """failover.csv's rows, its columns found by name (docs/reference.md)."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in NEEDED if c not in (reader.fieldnames or [])]
            if missing:
                fail(f"{path} has no column {', '.join(missing)} (header: {reader.fieldnames})")
            return list(reader)
    except OSError as e:
        fail(f"cannot read {path}: {e}")


def parse_time(stamp):
    """A log line's RFC 3339 UTC time, in seconds since the epoch (None if unreadable)."""
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def read_starts(path):
    """A member's starts, in order: each a dict message -> (time, {field: value}). A start
    begins with `starting` (or, in logs without it, with a second `recovered`)."""
    starts = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if not m:
                continue
            stamp, message, rest = m.groups()
            fields = dict(FIELD.findall(rest))
            opens = message == "starting" or (
                message in ("opened value log", "recovered")
                and (not starts or "recovered" in starts[-1])
            )
            if opens:
                starts.append({})
            if starts:
                starts[-1][message] = (parse_time(stamp), fields)
    return starts


def member_logs(logs_dir):
    """member name (m1, ...) -> its starts, from <engine>-<member>.log files."""
    found = {}
    for path in sorted(glob.glob(os.path.join(logs_dir, "*-m*.log"))):
        name = re.search(r"-(m\d+)\.log$", path)
        if name:
            found[name.group(1)] = read_starts(path)
    if not found:
        fail(f"no member logs (<engine>-m<N>.log) in {logs_dir}")
    return found


def kills(faults, logs):
    """One row per member killed and restarted, matched to its start."""
    rows, seen = [], {}
    for f in faults:
        if f["fault"] not in RESTARTS:
            continue
        for member in filter(None, f["victims"].split("+")):
            seen[member] = seen.get(member, 0) + 1
            starts = logs.get(member, [])
            start = starts[seen[member]] if seen[member] < len(starts) else {}
            rows.append(row(f, member, start))
    return rows


def row(fault, member, start):
    r = {
        "at_s": number(fault["at_s"]),
        "member": member,
        "rejoin_s": micros(fault["rejoined_us"]),
        "exec_s": micros(fault["healed_us"]),
        "matched": bool(start),
    }
    for column, _, _, (message, field) in PHASES:
        r[column] = number(start.get(message, (None, {}))[1].get(field))
    if None not in (r["rejoin_s"], r["exec_s"], r["serve_ms"]):
        r["after_s"] = r["rejoin_s"] - r["exec_s"] - r["serve_ms"] / 1000
    # The window's start in wall-clock time as this match has it (see the docstring).
    first = next((start[m] for m in ("starting", "recovered") if m in start), None)
    if first and first[0] is not None and None not in (r["at_s"], r["exec_s"]):
        since = number(first[1].get("since_exec_ms"))
        if since is not None:
            r["window0"] = first[0] - since / 1000 - r["at_s"] - r["exec_s"]
    return r


def micros(text):
    v = number(text)
    return None if v is None else v / 1e6


COLUMNS = [("at_s", 8, ".3f"), ("member", 6, "s"), ("rejoin_s", 8, ".3f"), ("exec_s", 6, ".3f")] + [
    (c, w, f) for c, w, f, _ in PHASES
] + [("after_s", 7, ".3f")]


def cell(v, width, fmt):
    return ("-" if v is None else format(v, fmt)).rjust(width)


def shown(rows):
    """The columns to print: vlog_ms only where some start logged it (raft)."""
    return [col for col in COLUMNS if col[0] != "vlog_ms" or any(r.get("vlog_ms") is not None for r in rows)]


def print_rows(rows, columns):
    print(" ".join(c.rjust(w) for c, w, _ in columns))
    for r in rows:
        print(" ".join(cell(r.get(c), w, f) for c, w, f in columns))


def pearson(xs, ys):
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / (sxx * syy) ** 0.5


def median(rows, column):
    vs = [r[column] for r in rows if r.get(column) is not None]
    return statistics.median(vs) if vs else None


def summary(rows, columns):
    done = [r for r in rows if r["rejoin_s"] is not None]
    k = min(10, len(done) // 2)
    print()
    if k == 0:
        print("summary: fewer than 2 kills with a rejoin time")
        return
    first, last = done[:k], done[-k:]
    print(f"summary over {len(done)} kills with a rejoin time "
          f"(first {k} against last {k}; medians; r: Pearson's with rejoin_s over all {len(done)})")
    print(f"{'column':>9} {'first':>11} {'last':>11} {'last/first':>10} {'r':>6}")
    for c, _, fmt in columns:
        if c in ("at_s", "member"):
            continue
        a, b = median(first, c), median(last, c)
        pairs = [(r[c], r["rejoin_s"]) for r in done if r.get(c) is not None]
        corr = pearson([p[0] for p in pairs], [p[1] for p in pairs]) if c != "rejoin_s" else None
        ratio = b / a if a and b is not None else None
        # A median of whole numbers may fall halfway between two.
        fmt = ".1f" if fmt == ".0f" else fmt
        print(f"{c:>9} {cell(a, 11, fmt)} {cell(b, 11, fmt)} {cell(ratio, 10, '.2f')} "
              f"{'-' if corr is None else f'{corr:.2f}':>6}")


def check_matching(rows):
    """Warns when the matched starts do not agree on when the window began."""
    w0 = [r["window0"] for r in rows if r.get("window0") is not None]
    unmatched = sum(1 for r in rows if not r["matched"])
    print()
    if unmatched:
        print(f"note: {unmatched} kill(s) without a logged start (the run ended first, or the "
              f"logs are not at info level)")
    if len(w0) < 2:
        return
    mid = statistics.median(w0)
    spread = max(abs(v - mid) for v in w0)
    stamp = datetime.datetime.fromtimestamp(mid, datetime.timezone.utc).isoformat(timespec="milliseconds")
    print(f"matching check: the starts put the window's beginning at {stamp}, "
          f"each within {spread * 1000:.0f} ms of it")
    if spread > 0.5:
        print("warning: over 0.5 s apart: some kills may be matched to the wrong start")


def main(argv):
    if len(argv) not in (2, 3) or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    run_dir = argv[1]
    logs_dir = argv[2] if len(argv) == 3 else os.path.join(run_dir, "logs")
    rows = kills(read_faults(os.path.join(run_dir, "failover.csv")), member_logs(logs_dir))
    if not rows:
        fail("failover.csv has no kill (kill-leader, kill-random, restart-all)")
    columns = shown(rows)
    print_rows(rows, columns)
    summary(rows, columns)
    check_matching(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

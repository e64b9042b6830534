"""Reading coordbench result directories as they are, for the notebooks.

A directory is either one run (`coordbench run --out DIR`: summary.csv with one row, the run's
files beside it) or a sweep (`coordbench sweep --out DIR`: summary.csv with one row per point
and repeat, a `point` column naming each point's run directory). Every file is read with plain
`pandas.read_csv` / `json.load`: docs/reference.md documents the columns.
"""

import json
from pathlib import Path

import pandas as pd

# The report's colours (crates/analysis/src/report/chart.rs, target_color): each target
# keeps its colour on every chart. tests/in_step.rs holds this table to the tool's.
TARGET_COLOURS = {
    "etcd": "#1f77b4",
    "zookeeper": "#ff7f0e",
    "raft": "#2ca02c",
    "zab": "#d62728",
    "null": "#7f7f7f",
    "redis": "#8c564b",
    "postgres": "#9467bd",
}

# Every sweep axis, in the order a sweep's summary.csv and the report use (Axis::ALL in
# crates/results/src/axis.rs; tests/in_step.rs holds the two equal): the first that varies
# goes on the x axis (quantities before names), the others split lines. A sweep's own
# run.json names the axes it swept; this list serves directories without one.
AXES = [
    "workload", "cluster_size", "ttl", "clients", "locks", "state", "disk", "net_delay",
    "election_timeout", "heartbeat", "value_size", "rate", "read_ratio", "recipe", "secure",
    "server_version", "etcd_bin", "zk_classpath", "engine_bin",
]
# Where a run's own summary.csv holds an axis under another name.
RUN_COLUMNS = {"ttl": "ttl_ms", "net_delay": "net_delay_us"}


def resolve(path):
    """`path` as a directory holding summary.csv, or a one-line error."""
    directory = Path(path).expanduser()
    if not (directory / "summary.csv").is_file():
        raise FileNotFoundError(
            f"{directory} is not a coordbench run or sweep directory (no summary.csv)"
        )
    return directory


def run_json(directory):
    """The directory's run.json (a run's or a sweep's), or {} when it has none."""
    path = Path(directory) / "run.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def is_sweep(directory):
    return str(run_json(directory).get("schema", "")).startswith("coordbench.sweep")


def summary(directory, complete_only=True):
    """summary.csv as it is, plus `point` ("." for a single run) and `repeat` when missing,
    and `dir`, the run directory of each row. Incomplete rows are left out unless asked."""
    directory = resolve(directory)
    table = pd.read_csv(directory / "summary.csv")
    if "point" not in table.columns:
        table.insert(0, "point", ".")
    if "repeat" not in table.columns:
        table.insert(1, "repeat", 1)
    # One new column on a defragmented copy (pandas warns on a frame built column by column).
    table = pd.concat([table, pd.DataFrame({"dir": [directory / p for p in table["point"]]},
                                           index=table.index)], axis=1)
    if complete_only and "complete" in table.columns:
        table = table[table["complete"].astype(str).str.lower() == "true"]
    return table.reset_index(drop=True)


def swept_axes(directory, table):
    """The axes the sweep swept, as its run.json `axes` names them (so an axis this file
    does not know still counts), in summary.csv's column order; without a sweep's run.json,
    every known axis with a column."""
    axes = run_json(directory).get("axes")
    if isinstance(axes, dict):
        names = list(axes)
    elif isinstance(axes, list):
        names = [a[0] if isinstance(a, (list, tuple)) else a.get("axis") for a in axes]
    else:
        names = AXES
    present = [a for a in names if axis_column(table, a)]
    return sorted(present, key=lambda a: list(table.columns).index(axis_column(table, a)))


def axis_column(table, axis):
    """The column holding `axis`: the sweep's own, else the run's, else None."""
    for column in (axis, RUN_COLUMNS.get(axis)):
        if column and column in table.columns:
            return column
    return None


def varying(table, axes):
    """The axes among `axes` whose values differ between rows, numeric ones first."""
    differ = [a for a in axes if table[axis_column(table, a)].nunique(dropna=False) > 1]
    numeric = [a for a in differ if pd.api.types.is_numeric_dtype(table[axis_column(table, a)])]
    return numeric + [a for a in differ if a not in numeric]


def target_order(targets):
    """Targets in the report's order (etcd, zookeeper, raft, zab), others after."""
    known = [t for t in TARGET_COLOURS if t in set(targets)]
    return known + sorted(set(targets) - set(known))


def colour(target):
    return TARGET_COLOURS.get(target, "#9467bd")


def style_key(columns, values):
    """What a line's dash follows: the split axes' values, with every target's herd-free
    recipe (`etcd-mutex`, `zk-recipe`) as one, so naive lines are dashed on every target."""
    return tuple("naive" if v == "naive" else "herd-free" if c == "recipe" else str(v)
                 for c, v in zip(columns, values))

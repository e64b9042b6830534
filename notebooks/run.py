"""Runs a notebook headless with nbclient, papermill-style: `-p NAME VALUE` sets a parameter
by adding a cell tagged `injected-parameters` after the cell tagged `parameters`.

    target/notebooks-venv/bin/python notebooks/run.py notebooks/latency.ipynb \
        -p results results/my-sweep -o /tmp/latency.ipynb

Values are strings. A value naming an existing file or directory relative to the current
directory is passed as its absolute path, since the kernel runs in the notebook's directory
(as under Jupyter, where the notebooks' default paths are relative to notebooks/). Exits 1
when a cell fails (naming the cell and the error), 2 on bad arguments.

    target/notebooks-venv/bin/python notebooks/run.py --clear notebooks/*.ipynb

clears outputs and execution counts in place (notebooks are committed without them);
`--check-clear` only says which notebooks have any, exiting 1 if one does.
"""

import argparse
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path, nargs="+")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                        metavar=("NAME", "VALUE"), help="set a parameter (repeatable)")
    parser.add_argument("-o", "--output", type=Path,
                        help="write the executed notebook, outputs included, here")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per cell")
    parser.add_argument("--clear", action="store_true",
                        help="clear the notebooks' outputs in place instead of running them")
    parser.add_argument("--check-clear", action="store_true",
                        help="fail if a notebook has outputs or execution counts")
    args = parser.parse_args(argv)
    if len(args.notebook) > 1 and not (args.clear or args.check_clear):
        parser.error("runs one notebook at a time (several only with --clear or --check-clear)")
    return args


def has_outputs(notebook):
    return any(c.get("outputs") or c.get("execution_count") for c in notebook.cells
               if c.cell_type == "code")


def clear(paths, check_only):
    """Clears (or, check_only, reports) outputs; returns the exit status."""
    dirty = 0
    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        if not has_outputs(notebook):
            continue
        dirty += 1
        if check_only:
            print(f"error: {path} has outputs: clear them (run.py --clear {path})", file=sys.stderr)
            continue
        for cell in notebook.cells:
            if cell.cell_type == "code":
                cell.outputs = []
                cell.execution_count = None
        nbformat.write(notebook, path)
    return 1 if check_only and dirty else 0


def inject(notebook, parameters):
    """Adds the parameter cell after the `parameters` cell; refuses unknown names."""
    cells = notebook.cells
    index = next((i for i, c in enumerate(cells)
                  if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if index is None:
        raise ValueError("the notebook has no cell tagged `parameters`")
    declared = cells[index].source
    lines = ["# Parameters (run.py -p)"]
    for name, value in parameters:
        if not any(line.split("=")[0].strip() == name for line in declared.splitlines()):
            raise ValueError(f"the notebook has no parameter {name!r}")
        if Path(value).exists():
            value = str(Path(value).resolve())
        lines.append(f"{name} = {value!r}")
    cell = nbformat.v4.new_code_cell("\n".join(lines))
    cell.metadata["tags"] = ["injected-parameters"]
    cells.insert(index + 1, cell)


def main(argv):
    args = parse_args(argv)
    if args.clear or args.check_clear:
        try:
            return clear(args.notebook, args.check_clear)
        except (OSError, nbformat.reader.NotJSONError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    args.notebook = args.notebook[0]
    try:
        notebook = nbformat.read(args.notebook, as_version=4)
        inject(notebook, args.parameter)
    except (OSError, ValueError, nbformat.reader.NotJSONError) as e:
        print(f"error: {args.notebook}: {e}", file=sys.stderr)
        return 2
    # The kernel listens on 127.0.0.1 only; its warning about unencrypted TCP is noise here.
    client = NotebookClient(notebook, timeout=args.timeout, kernel_name="python3",
                            extra_arguments=["--IPKernelApp.log_level=ERROR"],
                            resources={"metadata": {"path": str(args.notebook.parent.resolve())}})
    failed = None
    try:
        client.execute()
    except CellExecutionError as e:
        failed = e
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, args.output)
    if failed is not None:
        last = re.sub(r"\x1b\[[0-9;]*m", "", str(failed).strip().splitlines()[-1])
        print(f"error: {args.notebook}: a cell failed: {last}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

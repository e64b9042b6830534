#!/usr/bin/env python3
"""Builds every test binary of the workspace, then runs them several at a time.

`cargo test` runs its test binaries one after another. Most of ours spend their time
waiting on servers they start (elections, session expiry, fault windows), so running two
binaries at once roughly halves the wall time on two cores. Each binary runs in its
package's directory with its output kept in target/test-logs/; a failing binary's output
is printed whole at the end. Durations are kept in target/test-times.json so that the next
run starts the longest binaries first; on a fresh clone, which has none, the committed
scripts/test-times.json (a full run's durations) orders them instead.

Usage: scripts/run_tests.py [--build-only] [cargo test options...] [-- test binary options...]
  --build-only   build the test binaries and stop (scripts/test.sh builds them while the
                 servers install)
Environment: TEST_JOBS (binaries at once, default 2).
"""

import concurrent.futures
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "target" / "test-logs"
TIMES = ROOT / "target" / "test-times.json"
FALLBACK_TIMES = ROOT / "scripts" / "test-times.json"


def package_name(package_id):
    """The package's name in a cargo package id, whichever form cargo writes it in:
    `path+file:///dir/kv#coordbench-kv@0.1.0`, or `path+file:///dir/kv#0.1.0` when the
    name is the directory's."""
    location, _, fragment = package_id.partition("#")
    if "@" in fragment:
        return fragment.split("@")[0]
    return location.rsplit("/", 1)[-1]


def build(cargo_args):
    """Builds the test binaries; returns (name, executable, package dir) for each."""
    command = ["cargo", "test", "--workspace", "--all-targets", "--no-run",
               "--message-format=json-render-diagnostics", *cargo_args]
    result = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.exit(result.returncode)
    binaries = []
    for line in result.stdout.splitlines():
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message.get("profile", {}).get("test"):
            continue
        target = message["target"]
        package = package_name(message["package_id"])
        name = f"{package}::{'/'.join(target['kind'])}::{target['name']}"
        binaries.append((name, message["executable"], str(Path(message["manifest_path"]).parent)))
    return binaries


def run_one(name, executable, package_dir, test_args):
    log = LOGS / (name.replace("::", ".").replace("/", "-") + ".log")
    env = dict(os.environ, CARGO_MANIFEST_DIR=package_dir)
    start = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.run([executable, *test_args], cwd=package_dir, env=env,
                              stdout=out, stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - start
    summary = [l for l in log.read_text(errors="replace").splitlines() if l.startswith("test result:")]
    status = "ok" if code == 0 else f"FAILED (exit {code})"
    print(f"{name} ... {status} in {seconds:.1f} s {' | '.join(summary)}", flush=True)
    return name, code, seconds, log


def main():
    args = sys.argv[1:]
    build_only = args[:1] == ["--build-only"]
    if build_only:
        args = args[1:]
    split = args.index("--") if "--" in args else len(args)
    cargo_args, test_args = args[:split], args[split + 1:]
    build_start = time.monotonic()
    binaries = build(cargo_args)
    print(f"built {len(binaries)} test binaries in {time.monotonic() - build_start:.0f} s", flush=True)
    if build_only:
        return
    LOGS.mkdir(parents=True, exist_ok=True)
    times = TIMES if TIMES.exists() else FALLBACK_TIMES
    previous = json.loads(times.read_text()) if times.exists() else {}
    # Longest first, unknown ones at the front: the tail of the run stays short.
    binaries.sort(key=lambda b: -previous.get(b[0], float("inf")))
    jobs = int(os.environ.get("TEST_JOBS", "2"))
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda b: run_one(*b, test_args), binaries))
    TIMES.write_text(json.dumps({name: seconds for name, _, seconds, _ in results}, indent=1))
    failed = [(name, log) for name, code, _, log in results if code != 0]
    for name, log in failed:
        print(f"\n==== {name} ({log}) ====\n{log.read_text(errors='replace')}", file=sys.stderr)
    print(f"\n{len(results)} test binaries, {len(failed)} failed, {time.monotonic() - start:.0f} s"
          f" with {jobs} at a time")
    if failed:
        print("failed: " + ", ".join(name for name, _ in failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

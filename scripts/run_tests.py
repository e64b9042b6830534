#!/usr/bin/env python3
"""Builds every test binary of the workspace and runs them several at a time, each as soon
as cargo has built it.

`cargo test` runs its test binaries one after another. Most of ours spend their time
waiting on servers they start (elections, session expiry, fault windows), so running two
binaries at once roughly halves the wall time on two cores. While cargo is still building,
one binary runs at a time and cargo runs at a lower priority, so that a test's timing
waits on the build as little as it would on a second test; once the build is done,
TEST_JOBS run at once. Each binary runs in its package's directory with its output kept in
target/test-logs/; a failing binary's output is printed whole at the end. The longest
binaries mostly wait on their servers, one cluster at a time: two of them together left the
CPUs three quarters idle for minutes. So once the build is done, one binary more than
TEST_JOBS starts while the CPUs were less than half busy over the last 10 s (TEST_JOBS_IDLE:
3 by default, TEST_JOBS when that is set). Durations are kept
in target/test-times.json, and of the binaries built and waiting the longest runs first; on
a fresh clone, which has none, the committed scripts/test-times.json (a full run's
durations) orders them instead.

Usage: scripts/run_tests.py [--after FILE] [cargo test options...] [-- test binary options...]
  --after FILE   build at once, but run no test until FILE exists; it must then hold "ok"
                 (scripts/test.sh writes it once etcd and ZooKeeper are installed)
Environment: TEST_JOBS (binaries at once after the build, default 2), TEST_JOBS_IDLE (at
most this many while the CPUs are mostly idle; default 3, or TEST_JOBS when that is set).
"""

import collections
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
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


# A binary beyond TEST_JOBS starts only while the CPUs were less busy than this over the
# last METER_WINDOW seconds, and no binary started in that window (its load would not show).
IDLE_BELOW = 0.5
METER_WINDOW = 10.0


def cpu_times():
    """(busy, total) jiffies of all CPUs so far, from /proc/stat's first line."""
    with open("/proc/stat") as stat:
        fields = [int(f) for f in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


class CpuMeter:
    """How busy the CPUs were over about the last METER_WINDOW seconds (None until it has
    watched that long); sampled whenever asked."""

    def __init__(self):
        self.samples = collections.deque()

    def busy(self):
        now = time.monotonic()
        self.samples.append((now, *cpu_times()))
        while len(self.samples) > 2 and now - self.samples[1][0] >= METER_WINDOW:
            self.samples.popleft()
        first_at, first_busy, first_total = self.samples[0]
        _, busy, total = self.samples[-1]
        if now - first_at < METER_WINDOW or total == first_total:
            return None
        return (busy - first_busy) / (total - first_total)


class Queue:
    """The binaries built and not yet started, longest (by earlier durations) first; the
    number allowed to run at once: 1 until the build is done, then `jobs`, or `idle_jobs`
    while the CPUs are mostly idle."""

    def __init__(self, previous, jobs, idle_jobs):
        self.previous = previous
        self.jobs = jobs
        self.idle_jobs = max(jobs, idle_jobs)
        self.meter = CpuMeter()
        self.last_start = float("-inf")
        self.peak = 0
        self.waiting = []
        self.building = True
        self.running = 0
        self.cond = threading.Condition()

    def add(self, binary):
        with self.cond:
            self.waiting.append(binary)
            self.cond.notify_all()

    def build_done(self, succeeded):
        """No more binaries will come; a failed build runs none of those still waiting."""
        with self.cond:
            self.building = False
            if not succeeded:
                self.waiting.clear()
            self.cond.notify_all()

    def allowed(self):
        """How many binaries may run now."""
        if self.building:
            return 1
        if self.running < self.jobs:
            return self.jobs
        busy = self.meter.busy()
        settled = time.monotonic() - self.last_start >= METER_WINDOW
        return self.idle_jobs if settled and busy is not None and busy < IDLE_BELOW else self.jobs

    def take(self):
        """The next binary to run, or None once the build is done and none is left."""
        with self.cond:
            while True:
                if self.waiting and self.running < self.allowed():
                    self.waiting.sort(key=lambda b: self.previous.get(b[0], float("inf")))
                    self.running += 1
                    self.peak = max(self.peak, self.running)
                    self.last_start = time.monotonic()
                    return self.waiting.pop()  # the longest: unknown ones count as longest
                if not self.waiting and not self.building:
                    return None
                # Woken by a change, or after a second to look at the CPUs again.
                self.cond.wait(timeout=1.0)

    def finished(self):
        with self.cond:
            self.running -= 1
            self.cond.notify_all()


def artifact_of(line):
    """cargo's JSON message if the line announces a built artifact."""
    try:
        message = json.loads(line)
    except json.JSONDecodeError:
        return None
    return message if message.get("reason") == "compiler-artifact" else None


def binary_of(message):
    """(name, executable, package dir) if the artifact is a test binary."""
    if not message.get("executable") or not message.get("profile", {}).get("test"):
        return None
    target = message["target"]
    name = f"{package_name(message['package_id'])}::{'/'.join(target['kind'])}::{target['name']}"
    return name, message["executable"], str(Path(message["manifest_path"]).parent)


def program_of(message):
    """The name of the artifact if it is a package's program (a bin target, not its tests):
    what an integration test runs through CARGO_BIN_EXE_<name>."""
    if "bin" not in message["target"]["kind"] or message.get("profile", {}).get("test"):
        return None
    return message["target"]["name"]


def programs_by_package():
    """Each workspace package's bin targets, from cargo metadata."""
    metadata = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1"],
                              cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout
    return {p["name"]: {t["name"] for t in p["targets"] if "bin" in t["kind"]}
            for p in json.loads(metadata)["packages"]}


def build(cargo_args, queue):
    """Builds the test binaries at a lower priority, adding each to `queue` as cargo
    finishes it; returns cargo's exit code.

    cargo links a package's programs before its integration tests' binaries run under
    `cargo test`, but not necessarily before they are built: an integration test or bench
    announced before the programs it runs (CARGO_BIN_EXE_<name>) waits here until they are,
    or it would run whatever an earlier build left at that path, or find none while cargo
    replaces it."""
    command = ["nice", "-n", "10", "cargo", "test", "--workspace", "--all-targets", "--no-run",
               "--message-format=json-render-diagnostics", *cargo_args]
    programs = programs_by_package()
    held = []  # (package, binary): waiting for the package's programs
    start = time.monotonic()
    built = 0
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True) as cargo:
        for line in cargo.stdout:
            message = artifact_of(line)
            if not message:
                continue
            package = package_name(message["package_id"])
            binary = binary_of(message)
            if binary:
                built += 1
                kind = message["target"]["kind"]
                if ("test" in kind or "bench" in kind) and programs.get(package):
                    held.append((package, binary))
                else:
                    queue.add(binary)
            program = program_of(message)
            if program and package in programs:
                programs[package].discard(program)
                if not programs[package]:
                    for binary in [b for p, b in held if p == package]:
                        queue.add(binary)
                    held = [(p, b) for p, b in held if p != package]
    for _, binary in held:
        queue.add(binary)
    print(f"built {built} test binaries in {time.monotonic() - start:.0f} s", flush=True)
    queue.build_done(cargo.returncode == 0)
    return cargo.returncode


def wait_for(path):
    """Waits (at most an hour) until `path` exists; exits if it does not say "ok"."""
    deadline = time.monotonic() + 3600
    while not path.exists():
        if time.monotonic() > deadline:
            sys.exit(f"error: {path} did not appear within an hour")
        time.sleep(1)
    if path.read_text().strip() != "ok":
        sys.exit(f"error: {path} says the servers did not install; see its log")


def run_one(name, executable, package_dir, test_args):
    log = LOGS / (name.replace("::", ".").replace("/", "-") + ".log")
    env = dict(os.environ, CARGO_MANIFEST_DIR=package_dir)
    start = time.monotonic()
    with open(log, "w") as out:
        child = subprocess.Popen([executable, *test_args], cwd=package_dir, env=env,
                                 stdout=out, stderr=subprocess.STDOUT)
        # wait4 rather than wait, for the binary's CPU time: with the servers it started and
        # reaped, it is what the test command's time budget pays for on two cores.
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = code = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - start
    cpu = usage.ru_utime + usage.ru_stime
    summary = [l for l in log.read_text(errors="replace").splitlines() if l.startswith("test result:")]
    status = "ok" if code == 0 else f"FAILED (exit {code})"
    print(f"{name} ... {status} in {seconds:.1f} s (CPU {cpu:.1f} s) {' | '.join(summary)}",
          flush=True)
    return name, code, seconds, log


def worker(queue, test_args, results, ready):
    ready()
    while (binary := queue.take()) is not None:
        try:
            results.append(run_one(*binary, test_args))
        finally:
            queue.finished()


def main():
    args = sys.argv[1:]
    after = None
    if args[:1] == ["--after"] and len(args) >= 2:
        after, args = Path(args[1]), args[2:]
    split = args.index("--") if "--" in args else len(args)
    cargo_args, test_args = args[:split], args[split + 1:]
    LOGS.mkdir(parents=True, exist_ok=True)
    times = TIMES if TIMES.exists() else FALLBACK_TIMES
    previous = json.loads(times.read_text()) if times.exists() else {}
    jobs = int(os.environ.get("TEST_JOBS", "2"))
    # A TEST_JOBS of one's own choosing (TEST_JOBS=1: one after another) gets no extra.
    default_idle = jobs if "TEST_JOBS" in os.environ else jobs + 1
    idle_jobs = int(os.environ.get("TEST_JOBS_IDLE", str(default_idle)))
    queue = Queue(previous, jobs, idle_jobs)
    results = []
    start = time.monotonic()
    ready = (lambda: wait_for(after)) if after else (lambda: None)
    with concurrent.futures.ThreadPoolExecutor(max_workers=queue.idle_jobs) as pool:
        workers = [pool.submit(worker, queue, test_args, results, ready)
                   for _ in range(queue.idle_jobs)]
        code = build(cargo_args, queue)
        for w in workers:
            w.result()
    if code != 0:
        sys.exit(code)
    TIMES.write_text(json.dumps({name: seconds for name, _, seconds, _ in results}, indent=1))
    failed = [(name, log) for name, code, _, log in results if code != 0]
    for name, log in failed:
        print(f"\n==== {name} ({log}) ====\n{log.read_text(errors='replace')}", file=sys.stderr)
    print(f"\n{len(results)} test binaries, {len(failed)} failed, {time.monotonic() - start:.0f} s"
          f" building and running, {jobs} at a time ({queue.idle_jobs} while the CPUs were"
          f" mostly idle; at most {queue.peak} at once)")
    if failed:
        print("failed: " + ", ".join(name for name, _ in failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

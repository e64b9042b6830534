#!/usr/bin/env bash
# One command to a first comparison (workloads/quickstart.toml): lock recipes, herd-free
# against naive, 16 clients on one lock, 3 members, 3 repeats of 4 s windows. First on the
# built-in Raft and Zab engines, which need nothing but this build; then on real etcd and
# ZooKeeper at current releases (etcd 3.6.16 built from the Go module proxy, ZooKeeper
# 3.9.5 from Maven Central, by `coordbench install`: about two minutes the first time,
# cached after), falling back to Debian's packages (etcd 3.4.23, ZooKeeper 3.8.0) where Go
# or Maven is missing; started on 127.0.0.1 and torn down by coordbench. Installs only what
# each part uses (scripts/install-deps.sh compile, then servers; sudo when not root). Ends
# with one report of every target that ran (report.md and report.html), where it is, and
# how long each step took.
# Usage: scripts/quickstart.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${CARGO_TARGET_DIR:-target}/release/coordbench
out=${1:-results/quickstart-$(date -u +%Y%m%dT%H%M%SZ)}
timings=()

# step NAME COMMAND...: runs the command and keeps how long it took.
step() {
  local name=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  timings+=("$name $((SECONDS - start))s")
  return $rc
}

# table SUMMARY: per target and recipe, the mean of the repeats and (for throughput and
# p99) the lowest and highest repeat; µs shown as ms.
table() {
  awk -F, '
    BEGIN { split("throughput_ops_s p99_us handover_p50_us notifications_per_release requests_per_release", fields, " ") }
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { key = $(col["target"]) "," $(col["recipe"])
      if (!(key in n)) order[++keys] = key
      n[key]++
      for (f = 1; f <= 5; f++) {
        v = $(col[fields[f]]) + 0
        sum[key, f] += v
        if (n[key] == 1 || v < lo[key, f]) lo[key, f] = v
        if (n[key] == 1 || v > hi[key, f]) hi[key, f] = v
      }
      bad[key] += $(col["violations"]) }
    END {
      print "target,recipe,repeats,ops/s (min-max),p99 ms (min-max),handover p50 ms,notifications/release,requests/release,violations"
      for (k = 1; k <= keys; k++) {
        key = order[k]; m = n[key]
        printf "%s,%d,%.0f (%.0f-%.0f),%.1f (%.1f-%.1f),%.1f,%.2f,%.2f,%d\n", key, m,
          sum[key, 1] / m, lo[key, 1], hi[key, 1],
          sum[key, 2] / m / 1000, lo[key, 2] / 1000, hi[key, 2] / 1000,
          sum[key, 3] / m / 1000, sum[key, 4] / m, sum[key, 5] / m, bad[key]
      } }' "$1" | { command -v column >/dev/null && column -s, -t || cat; }
}

echo "== building coordbench (release)" >&2
step "install (build tools)" scripts/install-deps.sh compile
step "build" cargo build --release --quiet

echo "== 1/2: the built-in engines (raft, zab): nothing to install" >&2
step "sweep (raft, zab)" "$bin" sweep workloads/quickstart.toml --quick --out "$out"
echo
table "$out/summary.csv"
echo

echo "== 2/2: real etcd and ZooKeeper beside them" >&2
if step "install (etcd, ZooKeeper packages)" scripts/install-deps.sh servers; then
  # Current releases when they can be built here; else Debian's, which install-deps brought.
  if ! step "install (etcd, ZooKeeper releases)" \
    env ETCD_VERSIONS=3.6.16 ZOOKEEPER_VERSIONS=3.9.5 scripts/install-servers.sh "$bin"; then
    echo "current releases could not be installed; running Debian's etcd and ZooKeeper" >&2
  fi
  "$bin" install --list >&2
  step "sweep (etcd, zookeeper)" "$bin" sweep workloads/quickstart.toml --out "$out"
  echo
  table "$out/summary.csv"
  echo
else
  echo "etcd and ZooKeeper could not be installed; the report has the built-in engines only" >&2
fi

echo "notifications/release and requests/release are the herd effect: about 1 per release"
echo "herd-free, about one per waiter (15 here) naive. Definitions: docs/reference.md."
echo "server releases that ran: the server_version column of $out/summary.csv"
echo "report: $out/report.html (one file, charts inline) and $out/report.md"
line=""
for t in "${timings[@]}"; do line+="${line:+; }$t"; done
echo "time: $line"

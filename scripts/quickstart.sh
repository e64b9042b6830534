#!/usr/bin/env bash
# One command to a first comparison (workloads/quickstart.toml): lock recipes, herd-free
# against naive, 16 clients on one lock, 3 members. First on the built-in Raft and Zab
# engines, which need nothing but this build; then on real etcd and ZooKeeper at current
# releases (etcd 3.6.16 built from the Go module proxy, ZooKeeper 3.9.5 from Maven Central,
# by `coordbench install`: about two minutes the first time, cached after), falling back to
# Debian's packages (etcd 3.4.23, ZooKeeper 3.8.0; installed when missing, sudo when not
# root) where Go or Maven is missing; started on 127.0.0.1 and torn down by coordbench. Ends with one report of every target that ran (report.md and
# report.html) and prints where it is.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=./target/release/coordbench
out=${1:-results/quickstart-$(date -u +%Y%m%dT%H%M%SZ)}

# table SUMMARY: the columns that matter when comparing recipes, picked by name; µs shown
# as ms, fractions to two decimals.
table() {
  awk -F, -v want="target,recipe,clients,throughput_ops_s,p99_us,handover_p50_us,handover_p99_us,notifications_per_release,requests_per_release,violations" '
    function shown(name, v) {
      if (NR == 1) return name ~ /_us$/ ? substr(name, 1, length(name) - 3) "_ms" : name
      if (v == "" || v !~ /^-?[0-9.]+$/) return v
      if (name ~ /_us$/) return sprintf("%.1f", v / 1000)
      return v ~ /\./ ? sprintf("%.2f", v) : v
    }
    NR == 1 { n = split(want, w, ","); for (i = 1; i <= NF; i++) col[$i] = i }
    { line = ""
      for (j = 1; j <= n; j++) line = line (j > 1 ? "," : "") shown(w[j], w[j] in col ? $(col[w[j]]) : "")
      print line }' "$1" | { command -v column >/dev/null && column -s, -t || cat; }
}

echo "== building coordbench (release)" >&2
scripts/install-deps.sh build
cargo build --release --quiet

echo "== 1/2: the built-in engines (raft, zab): nothing to install" >&2
"$bin" sweep workloads/quickstart.toml --quick --out "$out"
echo
table "$out/summary.csv"
echo

echo "== 2/2: real etcd and ZooKeeper beside them" >&2
if scripts/install-deps.sh; then
  # Current releases when they can be built here; else Debian's, which install-deps brought.
  if ! ETCD_VERSIONS=3.6.16 ZOOKEEPER_VERSIONS=3.9.5 scripts/install-servers.sh "$bin"; then
    echo "current releases could not be installed; running Debian's etcd and ZooKeeper" >&2
  fi
  "$bin" install --list >&2
  "$bin" sweep workloads/quickstart.toml --out "$out"
  echo
  table "$out/summary.csv"
  echo
else
  echo "etcd and ZooKeeper could not be installed; the report has the built-in engines only" >&2
fi

echo "notifications_per_release and requests_per_release are the herd effect: about 1 per"
echo "release herd-free, about one per waiter (15 here) naive. Definitions: docs/reference.md."
echo "server releases that ran: the server_version column of $out/summary.csv"
echo "report: $out/report.html (one file, charts inline) and $out/report.md"

#!/usr/bin/env bash
# Installs the real servers the tests and the quickstart run, through `coordbench install`:
# etcd from the Go module proxy (built with the machine's Go), ZooKeeper from Maven Central
# (resolved with Maven), each into ~/.cache/coordbench/servers/ (COORDBENCH_CACHE_DIR
# overrides) with its provenance.json. A cached release returns at once; a cold install
# takes about a minute and a half per etcd release on 2 idle cores and seconds for ZooKeeper.
# Usage: scripts/install-servers.sh [COORDBENCH_BINARY]   (default: a debug build of this
# checkout, built first)
# Releases: ETCD_VERSIONS and ZOOKEEPER_VERSIONS (space-separated) override the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
etcd_versions=${ETCD_VERSIONS:-3.6.16 3.7.3}
zookeeper_versions=${ZOOKEEPER_VERSIONS:-3.9.5}
coordbench=${1:-}
if [[ -z $coordbench ]]; then
  cargo build -q --bin coordbench
  coordbench="${CARGO_TARGET_DIR:-target}/debug/coordbench"
fi
# Go may sit outside PATH on a fresh machine.
[[ -x /usr/local/go/bin/go ]] && export PATH="$PATH:/usr/local/go/bin"
# shellcheck disable=SC2086
"$coordbench" install etcd $etcd_versions
# shellcheck disable=SC2086
"$coordbench" install zookeeper $zookeeper_versions

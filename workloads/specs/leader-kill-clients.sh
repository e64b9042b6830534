#!/usr/bin/env bash
# After a leader kill, how long do clients that were already writing wait? One 3-member
# etcd cluster on 127.0.0.1 (tmpfs), started by this script; in turn, etcd's own benchmark
# tool (`benchmark put`, Go's clientv3 and gRPC; workloads/specs/build-etcd-benchmark.sh)
# and coordbench (`run --endpoints`, kv-put) write with CLIENTS clients, and KILL_AT into
# each run the script kills the leader (SIGKILL; found with etcdctl) and restarts it a
# second later. Prints how many of the tool's puts etcd failed "request timed out" and how
# long after the kill, and coordbench's slowest request and timeouts: when both show puts
# held for seconds, the stall is etcd's
# (a put in flight through a follower is dropped with the leader and waits out the
# server's request timeout, 5 s plus two election timeouts), not coordbench's client.
# coordbench's failover.csv (`workload_gap_us`) measures the same on clusters it starts.
# Usage: workloads/specs/leader-kill-clients.sh [BIN] [OUT]
#   (CLIENTS=16 DURATION_S=12 KILL_AT=4 BASE_PORT=27100; ETCD_BIN=PATH picks etcd)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-}
if [[ -z $BIN ]]; then
  cargo build --release --quiet
  BIN=${CARGO_TARGET_DIR:-target}/release/coordbench
fi
BIN=$(readlink -f "$BIN")
OUT=$(readlink -f "${2:-/tmp/leader-kill-clients-$(date -u +%Y%m%dT%H%M%SZ)}")
CLIENTS=${CLIENTS:-16}
DURATION_S=${DURATION_S:-12}
KILL_AT=${KILL_AT:-4}
PORT=${BASE_PORT:-27100}
tool=$(workloads/specs/build-etcd-benchmark.sh)
etcd_bin=${ETCD_BIN:-$("$BIN" install --list |
  awk '$1 == "*" && $2 == "etcd" { print $4 "/bin/etcd" }' | head -n 1)}
[[ -x ${etcd_bin:-} ]] || etcd_bin=$(command -v etcd)
etcdctl=$(dirname "$etcd_bin")/etcdctl
[[ -x $etcdctl ]] || etcdctl=$(command -v etcdctl)
mkdir -p "$OUT"
data=/dev/shm/leader-kill-clients-$$
declare -A member_pid=()
stop() {
  for p in "${member_pid[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$data"
}
trap stop EXIT
eps="127.0.0.1:$((PORT + 1)),127.0.0.1:$((PORT + 2)),127.0.0.1:$((PORT + 3))"
cluster=""
for i in 1 2 3; do cluster+="${cluster:+,}m$i=http://127.0.0.1:$((PORT + 10 + i))"; done

# member I [new|existing]: starts member I in the background.
member() {
  local i=$1 state=${2:-new}
  mkdir -p "$data/m$i"
  "$etcd_bin" --name "m$i" --data-dir "$data/m$i" --initial-cluster "$cluster" \
    --initial-cluster-state "$state" \
    --listen-peer-urls "http://127.0.0.1:$((PORT + 10 + i))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((PORT + 10 + i))" \
    --listen-client-urls "http://127.0.0.1:$((PORT + i))" \
    --advertise-client-urls "http://127.0.0.1:$((PORT + i))" \
    --listen-metrics-urls "http://127.0.0.1:$((PORT + 20 + i))" \
    >> "$OUT/etcd-m$i.log" 2>&1 &
  member_pid[$i]=$!
}

# The member number of the current leader.
leader() {
  "$etcdctl" --endpoints "$eps" endpoint status -w json 2>/dev/null | python3 -c '
import json, sys
for s in json.load(sys.stdin):
    if s["Status"]["leader"] == s["Status"]["header"]["member_id"]:
        print(s["Endpoint"].rsplit(":", 1)[1]); break' | awk -v p="$PORT" '{ print $1 - p }'
}

# kill_leader: SIGKILL the leader; a second later, restart it (this shell keeps its pid).
kill_leader() {
  local l
  l=$(leader)
  kill -9 "${member_pid[$l]}"
  echo "killed leader m$l at $(date +%T.%N)" >> "$OUT/kills.log"
  sleep 1
  member "$l" existing
}

for i in 1 2 3; do member "$i"; done
for _ in $(seq 1 100); do [[ -n $(leader) ]] && break; sleep 0.2; done

for generator in benchmark coordbench; do
  if [[ $generator == benchmark ]]; then
    # A count that outlasts the run; interrupted, the tool prints what it measured.
    timeout -s INT "$DURATION_S" "$tool" put --endpoints "$eps" --clients "$CLIENTS" \
      --conns "$CLIENTS" --total 100000000 --key-space-size 1000 --val-size 256 --precise \
      > "$OUT/benchmark.txt" 2>&1 &
  else
    "$BIN" run --quiet --target etcd --endpoints "$eps" --workload kv-put --clients "$CLIENTS" \
      --duration "$((DURATION_S - 1))s" --warmup 1s --op-timeout 10s --out "$OUT/coordbench" \
      > "$OUT/coordbench.txt" 2>&1 &
  fi
  running=$!
  sleep "$KILL_AT"
  kill_leader
  wait "$running" || true
  sleep 2
done

python3 - "$OUT" <<'PY'
import datetime, json, pathlib, re, sys
out = pathlib.Path(sys.argv[1])
kills = [datetime.datetime.strptime(l.split(" at ")[1].strip()[:15], "%H:%M:%S.%f")
         for l in (out / "kills.log").read_text().splitlines()]
# clientv3 logs every request the server failed; etcd says "request timed out" for a put
# it dropped with the leader, after its request timeout.
timed_out = [datetime.datetime.strptime(ts[11:26], "%H:%M:%S.%f")
             for ts, msg in re.findall(r'"ts":"([^"]+)".*?"error":"([^"]+)"', (out / "benchmark.txt").read_text())
             if "request timed out" in msg]
if timed_out:
    waited = (min(timed_out) - kills[0]).total_seconds()
    print(f"benchmark (clientv3): {len(timed_out)} puts failed 'request timed out', "
          f"the first {waited:.2f} s after the kill")
else:
    print("benchmark (clientv3): no put failed 'request timed out'")
run = json.loads((out / "coordbench" / "run.json").read_text())
res = run["results"]
print(f"coordbench:           slowest {res['latency']['max_us'] / 1e6:.3f} s; "
      f"timeouts {res.get('timeouts', 0)}; errors {res.get('errors_by_kind', {})}")
PY
cat "$OUT/kills.log"
echo "runs: $OUT"

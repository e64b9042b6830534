#!/usr/bin/env bash
# The load generator's own CPU per operation, two builds side by side in one session:
# kv-put, 64 clients, closed loop, against 3-member clusters started once per target and
# attached to (--endpoints), so both builds' generators drive the very same servers. The
# servers are always BASE's (`BASE serve raft|zab`) or Debian's etcd; only the generator
# differs. Per run: user+sys CPU of the `coordbench run` process (/usr/bin/time) over the
# operations in its summary.csv (setup and warm-up included, a few % of a 30 s window).
# Builds alternate, each point REPEATS times, so drift on a shared machine hits both alike.
# Usage: workloads/specs/client-cpu.sh BASE_BIN CAND_BIN [OUT]
#   (DURATION=30s REPEATS=2 BASE_PORT=26000 TARGETS="raft-disk raft-tmpfs zab-tmpfs etcd-tmpfs";
#    EXTRA="--conns 4" adds run options to both sides)
set -euo pipefail
BASE=$(readlink -f "$1")
CAND=$(readlink -f "$2")
OUT=${3:-/tmp/client-cpu-$(date -u +%Y%m%dT%H%M%SZ)}
DURATION=${DURATION:-30s}
REPEATS=${REPEATS:-2}
PORT=${BASE_PORT:-26000}
TARGETS=${TARGETS:-raft-disk raft-tmpfs zab-tmpfs etcd-tmpfs}
read -r -a extra <<< "${EXTRA:-}"
mkdir -p "$OUT"
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap stop EXIT

# start ENGINE DISK: three members on PORT+1..3 (clients) and PORT+11..13 (peers).
start() {
  local engine=$1 disk=$2 data="$OUT/data-$1-$2"
  [[ $disk == tmpfs ]] && data=/dev/shm/client-cpu-$$-$engine
  rm -rf "$data"
  local peers="" clients="" i
  for i in 1 2 3; do
    peers+="${peers:+,}$i=127.0.0.1:$((PORT + 10 + i))"
    clients+="${clients:+,}$i=127.0.0.1:$((PORT + i))"
  done
  for i in 1 2 3; do
    mkdir -p "$data/m$i"
    if [[ $engine == etcd ]]; then
      local cluster="" j
      for j in 1 2 3; do cluster+="${cluster:+,}m$j=http://127.0.0.1:$((PORT + 10 + j))"; done
      etcd --name "m$i" --data-dir "$data/m$i" --initial-cluster "$cluster" \
        --listen-peer-urls "http://127.0.0.1:$((PORT + 10 + i))" \
        --initial-advertise-peer-urls "http://127.0.0.1:$((PORT + 10 + i))" \
        --listen-client-urls "http://127.0.0.1:$((PORT + i))" \
        --advertise-client-urls "http://127.0.0.1:$((PORT + i))" \
        --listen-metrics-urls "http://127.0.0.1:$((PORT + 20 + i))" \
        > "$OUT/$engine-m$i.log" 2>&1 &
    else
      "$BASE" serve "$engine" --id="$i" --peers="$peers" --clients="$clients" \
        --data-dir="$data/m$i" --disk="$disk" > "$OUT/$engine-m$i.log" 2>&1 &
    fi
    pids+=($!)
  done
  sleep 5
}

# measure SIDE BIN TARGET NAME: one generator run; prints and appends a CSV row.
measure() {
  local side=$1 bin=$2 target=$3 name=$4 dir="$OUT/$4-$1-r$r"
  local eps="127.0.0.1:$((PORT + 1)),127.0.0.1:$((PORT + 2)),127.0.0.1:$((PORT + 3))"
  /usr/bin/time -f '%U %S' -o "$dir.time" "$bin" run --quiet --target "$target" \
    --endpoints "$eps" --workload kv-put --clients 64 --duration "$DURATION" \
    --warmup 2s --out "$dir" "${extra[@]}" > "$dir.log" 2>&1 || true
  if ! python3 - "$name" "$side" "$r" "$dir" >> "$OUT/client-cpu.csv" 2> /dev/null <<'PY'
import csv, sys
name, side, r, d = sys.argv[1:]
user, sys_ = map(float, open(d + ".time").read().split()[-2:])
row = next(csv.DictReader(open(d + "/summary.csv")))
ops = int(row["ops"])
print(f"{name},{side},{r},{ops},{float(row['throughput_ops_s']):.0f},{user},{sys_},"
      f"{(user + sys_) * 1e6 / max(ops, 1):.1f}")
PY
  then
    echo "$name,$side,$r,failed (see $dir.log)" >> "$OUT/client-cpu.csv"
  fi
  tail -n 1 "$OUT/client-cpu.csv"
}

echo "point,side,repeat,ops,throughput_ops_s,user_s,sys_s,client_cpu_us_per_op" > "$OUT/client-cpu.csv"
for point in $TARGETS; do
  engine=${point%-*}
  disk=${point#*-}
  start "$engine" "$disk"
  for r in $(seq 1 "$REPEATS"); do
    # The side that goes first alternates.
    if (( r % 2 )); then order=(base cand); else order=(cand base); fi
    for side in "${order[@]}"; do
      bin=$BASE; [[ $side == cand ]] && bin=$CAND
      measure "$side" "$bin" "$engine" "$point"
    done
  done
  stop
done
echo "written: $OUT/client-cpu.csv"

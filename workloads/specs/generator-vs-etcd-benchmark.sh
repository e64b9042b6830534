#!/usr/bin/env bash
# coordbench's load generator beside etcd's own (tools/benchmark of go.etcd.io/etcd/v3,
# built by workloads/specs/build-etcd-benchmark.sh), both attached (--endpoints) to the same
# 3-member cluster on 127.0.0.1: real etcd (the installed release `coordbench install
# --list` marks, or ETCD_BIN) and coordbench's raft engine (`coordbench serve raft`). Per
# operation the two generators alternate (A B, B A, ...) REPEATS times with the same
# clients, connections, key size and value size:
#   benchmark op      coordbench                                        key
#   put               kv-put                                            23 B, KEYS keys
#   range (l)         kv-get --consistency linearizable                 23 B (one key / KEYS keys)
#   range (s)         kv-get --consistency serializable                 23 B (one key / KEYS keys)
#   txn-put           none: kv-put is a plain put, register's Txn has a compare
#   lease-keepalive   none: sessions refresh their lease in the background, no workload does
#   watch-latency     config-watch (closest): one writer at WATCH_RATE, WATCHERS watchers
#                     over STREAMS sessions; latency = put acknowledged -> watcher has it
#                     (benchmark: every watcher's event; coordbench: the last watcher's)
# The benchmark tool runs a fixed count (--total): each op's count is set once from a short
# calibration run of the benchmark tool (CALIBRATE_TOTAL ops) to last about DURATION, and
# coordbench runs the same count (--ops; --duration only bounds it). watch-latency runs
# WATCH_RATE x DURATION puts on both.
# Figures per run: throughput (ops/s; watch-latency: watch events/s delivered), p50/p99
# (ms), the generator's CPU per op (coordbench: run.json's generator.cpu_s, the measured
# window; benchmark: user+sys of its process, /usr/bin/time, whole run) and beside them the
# machine's state: the generator's run-queue wait (coordbench: window; benchmark: its
# threads' /proc schedstat, whole run), /proc/pressure/cpu's some avg10 and the load average
# when the run starts.
# Writes OUT/runs.csv and OUT/medians.csv, prints the medians with coordbench/benchmark ratios.
# Usage: workloads/specs/generator-vs-etcd-benchmark.sh [OUT]
#   (REPEATS=3 CLIENTS=64 CONNS=8 VALUE_SIZE=256 KEYS=1000 DURATION_S=10 WARMUP=1s
#    CALIBRATE_TOTAL=2000 WATCH_RATE=100 WATCHERS=100 STREAMS=10 DISK=tmpfs BASE_PORT=27000
#    TARGETS="etcd raft" OPS="put range-l range-s txn-put lease-keepalive watch-latency";
#    COORDBENCH_BIN=PATH skips the release build, ETCD_BIN=PATH picks the etcd binary)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$(readlink -f "${1:-results/generator-vs-etcd-benchmark-$(date -u +%Y%m%dT%H%M%SZ)}")
REPEATS=${REPEATS:-3}
CLIENTS=${CLIENTS:-64}
CONNS=${CONNS:-8}
VALUE_SIZE=${VALUE_SIZE:-256}
KEYS=${KEYS:-1000}
DURATION_S=${DURATION_S:-10}
WARMUP=${WARMUP:-1s}
CALIBRATE_TOTAL=${CALIBRATE_TOTAL:-2000}
WATCH_RATE=${WATCH_RATE:-100}
WATCHERS=${WATCHERS:-100}
STREAMS=${STREAMS:-10}
DISK=${DISK:-tmpfs}
PORT=${BASE_PORT:-27000}
TARGETS=${TARGETS:-etcd raft}
OPS=${OPS:-put range-l range-s txn-put lease-keepalive watch-latency}
# coordbench's kv keys (/coordbench/kv/%08d) and its config-watch key, in bytes.
KV_KEY_SIZE=23
CONFIG_KEY=/coordbench/config-watch/config
(( WATCHERS % STREAMS == 0 )) || { echo "error: WATCHERS must be a multiple of STREAMS" >&2; exit 2; }

if [[ -n ${COORDBENCH_BIN:-} ]]; then
  bin=$(readlink -f "$COORDBENCH_BIN")
else
  cargo build --release --quiet
  bin=$(readlink -f "${CARGO_TARGET_DIR:-target}/release/coordbench")
fi
tool=$(workloads/specs/build-etcd-benchmark.sh)
etcd_bin=${ETCD_BIN:-$("$bin" install --list |
  awk '$1 == "*" && $2 == "etcd" { print $4 "/bin/etcd" }' | head -n 1)}
[[ -x ${etcd_bin:-} ]] || etcd_bin=$(command -v etcd || true)

mkdir -p "$OUT"
pids=()
data=""
stop() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
  [[ -n $data ]] && rm -rf "$data"
  data=""
}
trap stop EXIT
eps="127.0.0.1:$((PORT + 1)),127.0.0.1:$((PORT + 2)),127.0.0.1:$((PORT + 3))"

# start TARGET: three members, clients on PORT+1..3, peers on PORT+11..13.
start() {
  local target=$1 i j peers="" clients="" cluster=""
  data=$OUT/data-$target
  [[ $DISK == tmpfs ]] && data=/dev/shm/generator-vs-etcd-benchmark-$$-$target
  rm -rf "$data"
  for i in 1 2 3; do
    peers+="${peers:+,}$i=127.0.0.1:$((PORT + 10 + i))"
    clients+="${clients:+,}$i=127.0.0.1:$((PORT + i))"
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$((PORT + 10 + i))"
  done
  for i in 1 2 3; do
    mkdir -p "$data/m$i"
    if [[ $target == etcd ]]; then
      [[ -x $etcd_bin ]] || { echo "error: no etcd installed (coordbench install etcd)" >&2; exit 2; }
      "$etcd_bin" --name "m$i" --data-dir "$data/m$i" --initial-cluster "$cluster" \
        --listen-peer-urls "http://127.0.0.1:$((PORT + 10 + i))" \
        --initial-advertise-peer-urls "http://127.0.0.1:$((PORT + 10 + i))" \
        --listen-client-urls "http://127.0.0.1:$((PORT + i))" \
        --advertise-client-urls "http://127.0.0.1:$((PORT + i))" \
        --listen-metrics-urls "http://127.0.0.1:$((PORT + 20 + i))" \
        > "$OUT/$target-m$i.log" 2>&1 &
    else
      "$bin" serve raft --id="$i" --peers="$peers" --clients="$clients" \
        --data-dir="$data/m$i" --disk="$DISK" > "$OUT/$target-m$i.log" 2>&1 &
    fi
    pids+=($!)
  done
  for i in 1 2 3; do
    local tries=0
    until (exec 3<>"/dev/tcp/127.0.0.1/$((PORT + i))") 2>/dev/null; do
      (( ++tries < 300 )) || { echo "error: $target member $i never listened" >&2; exit 2; }
      sleep 0.1
    done
  done
  sleep 2  # a leader
}

# The benchmark tool's arguments for OP running TOTAL operations.
tool_args() {
  local op=$1 total=$2
  local common=(--endpoints "$eps" --clients "$CLIENTS" --conns "$CONNS" --precise)
  case $op in
    put) echo put "${common[@]}" --key-size $KV_KEY_SIZE --key-space-size "$KEYS" \
      --val-size "$VALUE_SIZE" --total "$total" ;;
    range-l|range-s) echo range /coordbench/kv/00000000 "${common[@]}" \
      --consistency "${op#range-}" --total "$total" ;;
    txn-put) echo txn-put "${common[@]}" --key-size $KV_KEY_SIZE --key-space-size "$KEYS" \
      --val-size "$VALUE_SIZE" --total "$total" ;;
    lease-keepalive) echo lease-keepalive "${common[@]}" --total "$total" ;;
    watch-latency) echo watch-latency "${common[@]}" --put-rate "$WATCH_RATE" \
      --put-total "$total" --streams "$STREAMS" \
      --watchers-per-stream $((WATCHERS / STREAMS)) --key-size ${#CONFIG_KEY} \
      --val-size "$VALUE_SIZE" ;;
  esac
}

# coordbench's arguments for OP, or nothing where it has no equivalent.
coordbench_args() {
  local op=$1
  local kv=(--clients "$CLIENTS" --conns "$CONNS" --keys "$KEYS" --value-size "$VALUE_SIZE")
  case $op in
    put) echo --workload kv-put "${kv[@]}" ;;
    range-l) echo --workload kv-get --consistency linearizable "${kv[@]}" ;;
    range-s) echo --workload kv-get --consistency serializable "${kv[@]}" ;;
    watch-latency) echo --workload config-watch --rate "$WATCH_RATE" --watchers "$WATCHERS" \
      --conns "$STREAMS" --value-size "$VALUE_SIZE" ;;
  esac
}

# The machine's state now: "psi_cpu_some_avg10,loadavg1".
machine_state() {
  local psi
  psi=$(awk '$1 == "some" { sub("avg10=", "", $2); print $2 }' /proc/pressure/cpu 2>/dev/null)
  echo "${psi:-},$(cut -d' ' -f1 /proc/loadavg)"
}

# run_tool OP TOTAL DIR: one benchmark-tool run; its output in DIR.out, CPU in DIR.time,
# its threads' run-queue wait (last reading while it ran) in DIR.wait.
run_tool() {
  local op=$1 total=$2 dir=$3 timer bench waited=0 w args
  read -r -a args <<< "$(tool_args "$op" "$total")"
  /usr/bin/time -f '%U %S' -o "$dir.time" "$tool" "${args[@]}" > "$dir.out" 2> "$dir.err" &
  timer=$!
  while kill -0 "$timer" 2>/dev/null; do
    bench=$(pgrep -P "$timer" || true)
    if [[ -n $bench ]]; then
      # The tool may end between the two reads: then the last reading stands.
      w=$(cat /proc/"$bench"/task/*/schedstat 2>/dev/null || true)
      [[ -n $w ]] && waited=$(awk '{ s += $2 } END { print s / 1e9 }' <<< "$w")
    fi
    sleep 0.2
  done
  wait "$timer" || true
  echo "$waited" > "$dir.wait"
}

# calibrate OP: the count that lasts about DURATION_S, from a short benchmark-tool run.
calibrate() {
  local op=$1 dir="$OUT/$target-$op-calibrate"
  if [[ $op == watch-latency ]]; then
    echo $((WATCH_RATE * DURATION_S))
    return
  fi
  run_tool "$op" "$CALIBRATE_TOTAL" "$dir"
  python3 - "$dir.out" "$DURATION_S" "$CALIBRATE_TOTAL" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"Requests/sec:\s*([0-9.]+)", text)
rate = float(m.group(1)) if m else int(sys.argv[3]) / float(sys.argv[2])
print(max(100, round(rate * float(sys.argv[2]))))
PY
}

# measure SIDE OP TOTAL: one run of one generator; appends a row to runs.csv.
measure() {
  local side=$1 op=$2 total=$3 dir="$OUT/$target-$op-$1-r$r" state
  state=$(machine_state)
  if [[ $side == benchmark ]]; then
    run_tool "$op" "$total" "$dir"
  else
    local args
    read -r -a args <<< "$(coordbench_args "$op")"
    if (( ${#args[@]} == 0 )); then
      echo "coordbench,$target,$op,$r,,,,,,,,$state,no equivalent workload" >> "$OUT/runs.csv"
      tail -n 1 "$OUT/runs.csv"
      return
    fi
    # The same count as the benchmark tool; the window only bounds it (watch-latency: the
    # window at the same put rate).
    local budget=(--ops "$total" --duration "$((DURATION_S * 4))s")
    [[ $op == watch-latency ]] && budget=(--duration "${DURATION_S}s")
    /usr/bin/time -f '%U %S' -o "$dir.time" "$bin" run --quiet --target "$target" \
      --endpoints "$eps" "${args[@]}" "${budget[@]}" \
      --warmup "$WARMUP" --out "$dir" > "$dir.log" 2>&1 || true
  fi
  python3 - "$side" "$target" "$op" "$r" "$dir" "$state" "$WATCHERS" >> "$OUT/runs.csv" <<'PY'
import csv, json, re, sys
side, target, op, r, d, state, watchers = sys.argv[1:]
def fmt(v, digits=3):
    return "" if v is None else f"{v:.{digits}f}"
def cpu_s(path):
    try:
        return sum(map(float, open(path).read().split()[-2:]))
    except (OSError, ValueError):
        return None
note = ""
try:
    if side == "benchmark":
        text = open(d + ".out").read()
        if op == "watch-latency":  # the watchers' events, not the writer's puts
            text = text.split("Watch events summary:")[-1]
        num = r"([0-9.]+(?:[eE][-+]?[0-9]+)?)"  # --precise may print 6.7e-05
        sec = lambda p: float(re.search(p + r"% in " + num + " secs", text).group(1)) * 1e3
        thr = float(re.search(r"Requests/sec:\s*" + num, text).group(1))
        total = float(re.search(r"Total:\s*" + num + " secs", text).group(1))
        ops = round(thr * total)
        p50, p99, cpu = sec("50"), sec("99"), cpu_s(d + ".time")
        per_op = cpu * 1e6 / ops if cpu is not None and ops else None
        wait = float(open(d + ".wait").read())
        if op == "watch-latency":
            note = ("per watch event, over the tool's own Total (its limiter sends the first "
                    "second's puts at once); latency put acknowledged -> each watcher's event, 0 if it came first")
    else:
        row = next(csv.DictReader(open(d + "/summary.csv")))
        run = json.load(open(d + "/run.json"))
        gen = run.get("generator") or {}
        cpu, wait = cpu_s(d + ".time"), gen.get("runqueue_wait_s")
        num = lambda k: float(row[k]) if row.get(k) not in (None, "") else None
        if op == "watch-latency":
            delivered = num("updates_delivered_per_s") or 0.0
            thr = delivered * int(watchers)
            ops = round(thr * num("duration_s"))
            p50, p99 = num("notify_last_p50_us") / 1e3, num("notify_last_p99_us") / 1e3
            per_op = gen["cpu_s"] * 1e6 / ops if ops else None
            note = ("per watch event (updates delivered to all x watchers); "
                    "latency put acknowledged -> the last watcher has it")
        else:
            thr, ops = num("throughput_ops_s"), int(row["ops"])
            p50, p99 = num("p50_us") / 1e3, num("p99_us") / 1e3
            per_op = num("client_cpu_us_per_op")
    figures = [fmt(thr, 1), fmt(p50), fmt(p99), fmt(per_op, 1), ops, fmt(cpu, 2), fmt(wait, 2)]
except (OSError, AttributeError, StopIteration, KeyError, TypeError, ValueError) as e:
    figures, note = [""] * 7, f"failed ({type(e).__name__}; see {d}*)"
csv.writer(sys.stdout, lineterminator="\n").writerow(
    [side, target, op, r] + figures + state.split(",") + [note])
PY
  tail -n 1 "$OUT/runs.csv"
}

echo "tool,target,op,repeat,throughput_ops_s,p50_ms,p99_ms,generator_cpu_us_per_op,ops,process_cpu_s,runqueue_wait_s,psi_cpu_some_avg10,loadavg1,note" > "$OUT/runs.csv"
{
  echo "coordbench $("$bin" --version), $tool, etcd $etcd_bin"
  echo "clients=$CLIENTS conns=$CONNS value_size=$VALUE_SIZE keys=$KEYS duration_s=$DURATION_S repeats=$REPEATS disk=$DISK"
  echo "watch: rate=$WATCH_RATE watchers=$WATCHERS streams=$STREAMS; $(nproc) CPUs; $(uname -r)"
} > "$OUT/setup.txt"
for target in $TARGETS; do
  start "$target"
  for op in $OPS; do
    total=$(calibrate "$op")
    for r in $(seq 1 "$REPEATS"); do
      # The side that goes first alternates; coordbench's kv-get setup writes the keys the
      # benchmark tool's range reads, so it goes first in the first repeat.
      if (( r % 2 )); then order=(coordbench benchmark); else order=(benchmark coordbench); fi
      for side in "${order[@]}"; do measure "$side" "$op" "$total"; done
    done
  done
  stop
done

python3 - "$OUT" <<'PY'
import csv, statistics, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/runs.csv")))
cols = ["throughput_ops_s", "p50_ms", "p99_ms", "generator_cpu_us_per_op"]
def med(side, target, op, col):
    vals = [float(r[col]) for r in rows
            if (r["tool"], r["target"], r["op"]) == (side, target, op) and r[col]]
    return statistics.median(vals) if vals else None
keys = list(dict.fromkeys((r["target"], r["op"]) for r in rows))
f = lambda v: "-" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.3g}")
lines = []
for target, op in keys:
    notes = {r["note"] for r in rows if (r["target"], r["op"]) == (target, op) and r["note"]}
    for c in cols:
        b, k = med("benchmark", target, op, c), med("coordbench", target, op, c)
        ratio = f"{k / b:.2f}" if b and k is not None else "-"
        lines.append([target, op, c, f(b), f(k), ratio, "; ".join(sorted(notes))])
header = ["target", "op", "figure", "benchmark", "coordbench", "ratio"]
with open(f"{out}/medians.csv", "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(header + ["note"])
    w.writerows(lines)
print("medians over repeats (ratio = coordbench / benchmark)")
widths = [6, 15, 23, 10, 10, 6]
print("  ".join(h.ljust(n) for h, n in zip(header, widths)))
for cells in lines:
    print("  ".join(c.ljust(n) for c, n in zip(cells, widths)))
notes = dict.fromkeys(f"{cells[1]}: {cells[6]}" for cells in lines if cells[6])
for note in notes:
    print(f"  {note}")
PY
echo "written: $OUT/runs.csv $OUT/medians.csv $OUT/setup.txt"

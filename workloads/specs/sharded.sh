#!/usr/bin/env bash
# Sharded runs against one process, in one session, on one raft cluster: 3 `coordbench
# serve raft` members (data on tmpfs) that every run attaches to with --endpoints; for
# kv-put and lock, REPEATS rounds of one process with CLIENTS clients and then 3 shards
# (--shard I/3 --rendezvous) of the same options merged by `coordbench merge`.
# Prints per round the single process's and the merged throughput and p99, and each merge's
# measured start skew; the figures in RESULTS.md ("Sharded runs") come from this script.
#
#   workloads/specs/sharded.sh [OUT_DIR]     (env: BIN, CLIENTS=48, DURATION=10s, REPEATS=2)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${BIN:-target/release/coordbench}
out=${1:-results/$(date -u +%Y%m%dT%H%M%SZ)-sharded}
clients=${CLIENTS:-48}
duration=${DURATION:-10s}
repeats=${REPEATS:-2}
mkdir -p "$out"

# The cluster: free ports from the kernel, members stopped on exit.
ports=($(python3 -c 'import socket
s=[socket.socket() for _ in range(6)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))'))
data=$(mktemp -d /dev/shm/coordbench-sharded.XXXXXX)
peers="1=127.0.0.1:${ports[0]},2=127.0.0.1:${ports[1]},3=127.0.0.1:${ports[2]}"
client_urls="1=127.0.0.1:${ports[3]},2=127.0.0.1:${ports[4]},3=127.0.0.1:${ports[5]}"
endpoints="127.0.0.1:${ports[3]},127.0.0.1:${ports[4]},127.0.0.1:${ports[5]}"
members=()
stop_members() {
    for pid in "${members[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$data"
}
trap stop_members EXIT
for id in 1 2 3; do
    "$bin" serve raft --id "$id" --peers "$peers" --clients "$client_urls" \
        --data-dir "$data/m$id" --disk tmpfs 2>"$out/member-$id.log" &
    members+=($!)
done

common=(--target raft --endpoints "$endpoints" --clients "$clients" --duration "$duration" --quiet)
row() { # DIR: throughput and p99 from its summary.csv
    python3 - "$1" <<'EOF'
import csv, json, sys
row = next(csv.DictReader(open(sys.argv[1] + "/summary.csv")))
run = json.load(open(sys.argv[1] + "/run.json"))
skew = run.get("shards", {}).get("start_skew_ms")
extra = f"  start skew {skew:.2f} ms" if skew is not None else ""
print(f"{float(row['throughput_ops_s']):10.0f} ops/s  p99 {int(row['p99_us']) / 1000:8.2f} ms  violations {row['violations']}{extra}")
EOF
}
for workload in kv-put lock; do
    for round in $(seq 1 "$repeats"); do
        single="$out/$workload-single-$round"
        # The first run also waits for the members to elect a leader (bounded retries).
        for attempt in 1 2 3 4 5; do
            "$bin" run "${common[@]}" --workload "$workload" --out "$single" >"$single.log" 2>&1 && break
            sleep 1
        done
        run_id="$workload-$round-$$"
        for i in 0 1 2; do
            "$bin" run "${common[@]}" --workload "$workload" --shard "$i/3" --run-id "$run_id" \
                --rendezvous --out "$out/$workload-shards-$round/shard-$i" \
                >"$out/$workload-shards-$round-$i.log" 2>&1 &
        done
        wait_shards=0
        for job in $(jobs -p); do
            case " ${members[*]} " in *" $job "*) continue ;; esac
            wait "$job" || wait_shards=$?
        done
        [ "$wait_shards" -eq 0 ] || { echo "a shard failed" >&2; exit 1; }
        "$bin" merge "$out/$workload-shards-$round"/shard-* --out "$out/$workload-merged-$round" >/dev/null
        echo "$workload round $round, $clients clients"
        echo "  one process : $(row "$single")"
        echo "  3 shards    : $(row "$out/$workload-merged-$round")"
    done
done
echo "results in $out"

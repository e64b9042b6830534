#!/usr/bin/env bash
# A sharded coordbench run over ssh: one shard per host, then `coordbench merge` here.
#
#   scripts/sharded-run.sh [--bin PATH] [--remote-bin PATH] [--remote-dir DIR] [--out DIR]
#                          [--run-id ID] HOST... -- RUN-OPTIONS...
#
# Every HOST runs `coordbench run RUN-OPTIONS --shard I/N --run-id ID --out REMOTE-DIR/ID/shard-I`
# (I from 0 in the order the hosts are given; N the number of hosts) at once over ssh. The
# shards start together at the target when RUN-OPTIONS has --rendezvous, at the time given
# with --start-at, or else at --start-at now + START_DELAY seconds (default 15; the hosts'
# clocks must agree, e.g. by NTP). Each shard's directory is then copied back over ssh (tar)
# into OUT/shard-I, and this machine merges them into OUT/merged.
#
# RUN-OPTIONS must reach a target every host shares (--endpoints). Options:
#   --bin PATH         coordbench here, for the merge (default: coordbench on PATH)
#   --remote-bin PATH  coordbench on the hosts (default: coordbench)
#   --remote-dir DIR   where shards write on the hosts (default: /tmp/coordbench-shards)
#   --out DIR          where the shards and the merge land here (default: results/<ID>)
#   --run-id ID        the run id (default: sharded-<UTC time>)
# Exit: 0 merged; 2 bad usage; otherwise the first failing shard's or the merge's status.
set -euo pipefail

usage() {
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
}

bin=coordbench
remote_bin=coordbench
remote_dir=/tmp/coordbench-shards
out=
run_id=sharded-$(date -u +%Y%m%dT%H%M%SZ)
hosts=()
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin=$2; shift 2 ;;
        --remote-bin) remote_bin=$2; shift 2 ;;
        --remote-dir) remote_dir=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --run-id) run_id=$2; shift 2 ;;
        --) shift; break ;;
        -h|--help) usage ;;
        -*) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) hosts+=("$1"); shift ;;
    esac
done
run_options=("$@")
if [ ${#hosts[@]} -eq 0 ] || [ ${#run_options[@]} -eq 0 ]; then
    echo "error: give the hosts, then -- and the coordbench run options (see --help)" >&2
    exit 2
fi
out=${out:-results/$run_id}
count=${#hosts[@]}

# A common start: the run's own choice, else a wall-clock time shortly ahead.
case " ${run_options[*]} " in
    *" --rendezvous "*|*" --start-at "*) ;;
    *) run_options+=(--start-at "$(date -u -d "+${START_DELAY:-15} seconds" +%Y-%m-%dT%H:%M:%SZ)") ;;
esac

# The remote command line of shard $1, each word quoted for the remote shell.
shard_command() {
    local index=$1 dir="$remote_dir/$run_id/shard-$1"
    printf '%q ' mkdir -p "$remote_dir/$run_id"
    printf '&& '
    printf '%q ' "$remote_bin" run "${run_options[@]}" \
        --shard "$index/$count" --run-id "$run_id" --quiet --out "$dir"
}

mkdir -p "$out"
pids=()
for i in "${!hosts[@]}"; do
    ssh "${hosts[$i]}" "$(shard_command "$i")" >"$out/shard-$i.log" 2>&1 &
    pids+=($!)
done
status=0
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || {
        code=$?
        echo "error: shard $i on ${hosts[$i]} failed (exit $code): $(tail -n 1 "$out/shard-$i.log")" >&2
        [ "$status" -ne 0 ] || status=$code
    }
done
[ "$status" -eq 0 ] || exit "$status"

shard_dirs=()
for i in "${!hosts[@]}"; do
    ssh "${hosts[$i]}" "$(printf '%q ' tar -C "$remote_dir/$run_id" -cf - "shard-$i")" \
        | tar -C "$out" -xf -
    shard_dirs+=("$out/shard-$i")
done
"$bin" merge "${shard_dirs[@]}" --out "$out/merged"

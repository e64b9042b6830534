#!/usr/bin/env bash
# The generator holding many sessions: CLIENTS lock contenders on one lock, two builds
# alternating round by round on each target, so that a change to the drivers is measured
# against the build before it under the same machine state. Prints per run the generator's
# peak RSS and its KB per session, seconds saturated, CPU, the servers' peak RSS, the
# acquisitions, and the generator's run-queue wait (run.json generator.runqueue_wait_s).
# Usage: workloads/specs/sessions-at-scale.sh OLD_BIN NEW_BIN [OUT]
#   (TARGETS="raft etcd zab" CLIENTS=10000 ROUNDS=2 DURATION=10s EXTRA="--server-version 3.7.3"
#    to change)
set -euo pipefail
cd "$(dirname "$0")/../.."
if (($# < 2)); then
  echo "usage: $0 OLD_BIN NEW_BIN [OUT]" >&2
  exit 2
fi
for bin in "$1" "$2"; do
  [[ -x $bin ]] || { echo "error: $bin is not an executable coordbench build" >&2; exit 2; }
done
OLD=$1
NEW=$2
OUT=${3:-/tmp/sessions-at-scale-$(date -u +%Y%m%dT%H%M%SZ)}
TARGETS=${TARGETS:-raft etcd}
CLIENTS=${CLIENTS:-10000}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-10s}
read -r -a extra <<<"${EXTRA:-}"
mkdir -p "$OUT"

printf '%-6s %-5s %-5s %10s %8s %7s %6s %10s %6s %8s\n' target build round gen_rss_mb \
  kb_per_s sat_s cpu srv_rss_mb acq rq_wait_s
for round in $(seq 1 "$ROUNDS"); do
  for target in $TARGETS; do
    # Which build goes first alternates, so neither always runs on a warmer machine.
    builds=(old new)
    ((round % 2 == 0)) && builds=(new old)
    for build in "${builds[@]}"; do
      bin=$OLD
      [[ $build == new ]] && bin=$NEW
      dir=$OUT/$target-$build-$round
      "$bin" run --quiet --target "$target" --workload lock --clients "$CLIENTS" \
        --duration "$DURATION" --disk tmpfs --out "$dir" "${extra[@]}" >/dev/null 2>"$dir.err" ||
        echo "($target $build $round exited non-zero: $dir.err)" >&2
      python3 - "$dir" "$target" "$build" "$round" "$CLIENTS" <<'EOF'
import csv, json, sys, pathlib
d, target, build, rnd, clients = sys.argv[1:]
d = pathlib.Path(d)
if not (d / "summary.csv").exists():
    print(f"{target:<6} {build:<5} {rnd:<5} (no summary.csv in {d}: see {d}.err)")
    sys.exit(0)
rows = list(csv.DictReader(open(d / "summary.csv")))
row = rows[0]
run = json.loads((d / "run.json").read_text())
f = lambda k: float(row.get(k) or "nan")
rss = f("client_peak_rss_mb")
rq = run.get("generator", {}).get("runqueue_wait_s", float("nan"))
print(f"{target:<6} {build:<5} {rnd:<5} {rss:10.0f} {rss * 1024 / int(clients):8.1f} "
      f"{f('generator_saturated_s'):7.1f} {f('client_cpu_util'):6.0%} "
      f"{f('server_peak_rss_mb'):10.0f} {f('ops'):6.0f} {rq:8.1f}")
EOF
    done
  done
done
echo "runs in $OUT" >&2

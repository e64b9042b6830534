#!/usr/bin/env bash
# Makes results/reference/ (committed; the notebooks' default input): four short sweeps,
# workloads/reference-{kv,herd,failover,capacity}.toml, each into results/reference/<part>/, with a
# release build. Then it drops what is most of the size: server logs (nothing reads them),
# charts and reports (`coordbench report DIR` redraws them; results/reference/.gitignore
# keeps them out of git), and ZooKeeper points' run.json `server_counters`, every mntr value
# of every member (50-150 KB a point; set to null, as for the other targets; the figures
# summary.csv takes from them stay). Every directory stays an ordinary sweep directory.
#
#   scripts/reference-results.sh [--base-port N] [PART...]     (parts: kv herd failover capacity)
#
# --base-port puts every started member on fixed ports from N (spec option base_port).
# Rerunning skips the points already complete (as any sweep does), so an interrupted
# invocation resumes; delete results/reference/<part>/ to make a part anew.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${CARGO_TARGET_DIR:-target}/release/coordbench
base_port=
parts=()
while (($#)); do
  case $1 in
    --base-port) base_port=${2:?--base-port needs a port}; shift 2 ;;
    kv|herd|failover|capacity) parts+=("$1"); shift ;;
    *) echo "error: unknown argument $1 (use --base-port N, kv, herd, failover, capacity)" >&2; exit 2 ;;
  esac
done
((${#parts[@]})) || parts=(kv herd failover capacity)
if [[ ! -x $bin ]]; then
  echo "error: $bin missing: run cargo build --release first" >&2
  exit 2
fi
scripts/install-deps.sh
for part in "${parts[@]}"; do
  spec=workloads/reference-$part.toml
  if [[ -n $base_port ]]; then
    # The same spec with the base port set under [options].
    mkdir -p target/reference-specs
    sed "s/^\[options\]$/[options]\nbase_port = $base_port/" "$spec" >"target/reference-specs/reference-$part.toml"
    spec=target/reference-specs/reference-$part.toml
  fi
  "$bin" sweep "$spec" --out "results/reference/$part"
  # Server logs, also those of a capacity search's windows (a level deeper).
  find "results/reference/$part" -mindepth 2 -maxdepth 3 -type d -name logs -exec rm -rf {} +
  rm -rf "results/reference/$part/charts" "results/reference/$part/report.md" \
    "results/reference/$part/report.html"
  python3 - "results/reference/$part" <<'PY'
import json, pathlib, sys
for path in [*pathlib.Path(sys.argv[1]).glob("*/run.json"), *pathlib.Path(sys.argv[1]).glob("*/*/run.json")]:
    record = json.loads(path.read_text())
    if record.get("server_counters") is not None:
        record["server_counters"] = None
        path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
PY
done
du -sh --apparent-size results/reference

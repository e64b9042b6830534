#!/usr/bin/env bash
# Executes every notebook under notebooks/ headless (nbclient, through notebooks/run.py) on
# its default parameters, the results under results/reference/; fails if a cell fails or
# a notebook was committed with outputs.
# Needs the venv scripts/install-deps.sh makes (target/notebooks-venv). The executed copies,
# outputs included, land in target/notebooks-out/ for a look.
set -euo pipefail
cd "$(dirname "$0")/.."
python=target/notebooks-venv/bin/python
if [[ ! -x $python ]]; then
  echo "error: $python missing: run scripts/install-deps.sh first" >&2
  exit 2
fi
# Committed notebooks carry no outputs (small diffs).
"$python" notebooks/run.py --check-clear notebooks/*.ipynb
failed=0 ran=0
for notebook in notebooks/*.ipynb; do
  name=$(basename "$notebook" .ipynb)
  start=$SECONDS
  if "$python" notebooks/run.py "$notebook" -o "target/notebooks-out/$name.ipynb"; then
    echo "notebook $name ... ok ($((SECONDS - start)) s)"
  else
    echo "notebook $name ... FAILED" >&2
    failed=$((failed + 1))
  fi
  ran=$((ran + 1))
done
if ((ran == 0)); then
  echo "error: no notebook found under notebooks/" >&2
  exit 1
fi
echo "notebooks: $((ran - failed)) passed, $failed failed"
((failed == 0))

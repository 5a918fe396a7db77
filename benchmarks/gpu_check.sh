#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py): phases under their own budgets (6 minutes in all on
# one H200), progress lines as it goes, OUT/gpu_check.json rewritten after every phase.
#
#   bash benchmarks/gpu_check.sh                          # on a GPU machine
#   bash benchmarks/gpu_check.sh --cpu                    # the same phases at toy sizes (CI)
#   bash benchmarks/gpu_check.sh --build-wheelhouse .gpu/wheels   # here, with the package index
#   bash benchmarks/gpu_check.sh --wheelhouse .gpu/wheels         # there: install --no-deps, no download
#
# Python: $PYTHON, else .venv/bin/python, else python3 (the machine's own, with its torch stack).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
exec "$PY" -m benchmarks.gpu_check "$@"

#!/usr/bin/env bash
# The main job: set up, run the CPU quickstart (both harnesses), verify and audit the log.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
store=${EVO_STORE:-sqlite:///.evo/quickstart.sqlite}
evo run configs/quickstart.toml --store "$store" "$@"
evo runs --store "$store"
evo verify --store "$store"
for run in $(evo runs --store "$store" --json | .venv/bin/python -c 'import json,sys; print(" ".join(r["run_id"] for r in json.load(sys.stdin)[-2:]))'); do
  evo audit "$run" --store "$store" || true
done

#!/usr/bin/env bash
# The main job: set up, run the CPU quickstart (both harnesses), verify and audit the log.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh quickstart
export PATH="$PWD/.venv/bin:$PATH"
store=${EVO_STORE:-sqlite:///.evo/quickstart.sqlite}
evo run configs/quickstart.toml --store "$store" "$@"
evo runs --store "$store"
evo verify --store "$store"
# The evidence chain behind the evolving harness's promotions (every run: `evo audit RUN`).
evolving=$(evo runs --store "$store" --json | .venv/bin/python -c 'import json,sys; print(max((r for r in json.load(sys.stdin) if r.get("mode") == "evolving"), key=lambda r: r["started_at"])["run_id"])')
evo audit "$evolving" --store "$store"

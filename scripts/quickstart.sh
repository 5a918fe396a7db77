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
# The evidence chain behind the evolving harness's promotions (any run: `evo audit RUN`, where
# RUN is an id, a unique prefix of one, @last, or PREFIX@last for the newest run so named).
evo audit quickstart-evolving@last --store "$store"

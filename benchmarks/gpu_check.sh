#!/usr/bin/env bash
# GPU check: a few DeepSpeed training steps of a ~0.5B Qwen2-shaped model built from its
# config (no downloads), bf16, printing tokens/s and step time as one JSON line.
#
#   bash benchmarks/gpu_check.sh              # on a GPU machine (all visible GPUs)
#   bash benchmarks/gpu_check.sh --cpu        # toy size on DeepSpeed's CPU accelerator (gloo)
#   bash benchmarks/gpu_check.sh --zero-stage 3 --steps 20   # extra flags go to gpu_check.py
#
# Needs: the venv from scripts/setup.sh plus the deepspeed extra
# (.venv/bin/pip install -e '.[deepspeed]'). On a GPU box install a CUDA build of torch 2.13.0
# first if the venv holds the CPU build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
"$PY" -c "import deepspeed" 2>/dev/null || { echo "error: deepspeed is not installed: pip install -e '.[deepspeed]'" >&2; exit 2; }

cpu=0
for a in "$@"; do [ "$a" = "--cpu" ] && cpu=1; done
if [ "$cpu" = 0 ] && ! "$PY" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "error: torch sees no CUDA GPU here; use --cpu for the toy-size CPU run" >&2
  exit 2
fi

if [ "$cpu" = 1 ]; then
  export DS_ACCELERATOR=cpu OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
  args=(--toy "$@")
  # two ranks on one machine, as in the 2-rank test
  exec "$PY" -m torch.distributed.run --standalone --nproc_per_node=2 benchmarks/gpu_check.py "${args[@]}"
fi

export DS_ACCELERATOR=cuda
ngpu=$("$PY" -c "import torch; print(torch.cuda.device_count())")
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
exec "$PY" -m torch.distributed.run --standalone --nproc_per_node="$ngpu" benchmarks/gpu_check.py "$@"

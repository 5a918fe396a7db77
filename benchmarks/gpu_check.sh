#!/usr/bin/env bash
# Multi-GPU check, in one go (about 5-8 minutes on a GPU machine; each phase has its own time
# limit, 200 s + 360 s, so the whole stays under 10). Two phases:
#   1. train: DeepSpeed ZeRO-2 steps over ALL visible GPUs (benchmarks/gpu_check.py under
#      torchrun, one rank per GPU), bf16, of the >=0.5B model in --model-dir DIR when DIR holds
#      one (config.json), else of a Qwen2-0.5B-shaped model built from its config:
#      tokens/s, step time, peak memory;
#   2. rl: `evo run configs/recipes/math.toml` as one rank per GPU under torchrun (rank 0 logs,
#      the others follow, docs/scale.md), trained through DeepSpeed ZeRO-2 (`[distributed]
#      engine = "deepspeed"`, nccl; --rl-zero-stage 0 for the DDP-like engine, 1-3 for another
#      stage), against an `evo serve` rollout server on the last GPU (and `vllm serve` rollouts
#      timed too with --vllm), 3 RL steps with a weight sync after every update, the same model
#      as phase 1 (benchmarks/gpu_rl_check.py): per-step rollout/update tokens/s as the run
#      logged them.
# Not run yet: no GPU machine was available when it was written (docs/scale.md).
# Prints one JSON object; with $OUT set it also writes it to $OUT/gpu_check.json (and each
# phase's log to $OUT/).
#
#   bash benchmarks/gpu_check.sh                 # on a GPU machine
#   bash benchmarks/gpu_check.sh --model-dir /models/Qwen2.5-0.5B   # a local checkpoint, if present
#   bash benchmarks/gpu_check.sh --vllm          # also time rollouts on vLLM
#   bash benchmarks/gpu_check.sh --cpu           # toy sizes on the CPU (DeepSpeed's CPU accelerator, gloo)
#   bash benchmarks/gpu_check.sh --zero-stage 3  # other flags go to the training phase (gpu_check.py)
#   bash benchmarks/gpu_check.sh --rl-zero-stage 3   # the RL phase under ZeRO-3 (0: engine = "ddp")
#
# Needs: the venv from scripts/setup.sh (the deepspeed extra included). On a GPU box, install
# a CUDA build of torch first if the venv holds the CPU build (any torch the pyproject range
# allows; docs/scale.md lists the torch/vLLM pairs).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
"$PY" -c "import deepspeed" >/dev/null 2>&1 || { echo "error: deepspeed is not installed: pip install -e '.[deepspeed]'" >&2; exit 2; }

cpu=0 vllm=0 extra=() model_dir="" rl_zero=2
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) cpu=1 ;;
    --vllm) vllm=1 ;;
    --rl-zero-stage) rl_zero=${2:-2}; shift ;;
    --model-dir) model_dir=${2:-}; shift ;;
    *) extra+=("$1") ;;  # the training phase's own flags (benchmarks/gpu_check.py --help)
  esac
  shift
done
if [ -n "$model_dir" ] && [ ! -f "$model_dir/config.json" ]; then
  echo "note: no model in $model_dir (no config.json): using a config-built 0.5B model" >&2
  model_dir=""
fi
if [ "$cpu" = 0 ] && ! "$PY" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "error: torch sees no CUDA GPU here; use --cpu for the toy-size CPU run" >&2
  exit 2
fi
if [ "$vllm" = 1 ] && ! "$PY" -c "import vllm" 2>/dev/null; then
  echo "error: --vllm needs vLLM: pip install -e '.[vllm]'" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/evo-gpu-check.XXXXXX")
logs=${OUT:-$work}
mkdir -p "$logs"
trap 'rm -rf "$work"' EXIT
export EVO_NO_PLUGIN_COMMANDS=1

if [ "$cpu" = 1 ]; then
  export DS_ACCELERATOR=cpu OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  ranks=2 train_args=(--toy) rl_args=(--toy --device cpu --server-device cpu)
  gpus='"cpu"'
else
  export DS_ACCELERATOR=cuda
  ranks=$("$PY" -c "import torch; print(torch.cuda.device_count())")
  train_args=(--zero-stage 2 --steps 10)
  # the rollout server gets the last GPU, the trainer the first (the same one on a 1-GPU machine)
  rl_args=(--device cuda:0 --server-device "cuda:$((ranks - 1))")
  gpus=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null \
         | "$PY" -c "import json,sys; print(json.dumps([l.strip() for l in sys.stdin if l.strip()]))")
  [ -n "$gpus" ] || gpus='[]'
fi
[ "$vllm" = 1 ] && rl_args+=(--vllm)
rl_args+=(--ranks "$ranks" --zero-stage "$rl_zero")
if [ -n "$model_dir" ]; then train_args+=(--model-dir "$model_dir"); rl_args+=(--model-dir "$model_dir"); fi

# phase 1: DeepSpeed ZeRO-2 training steps on every GPU
t0=$(date +%s)
timeout 200 "$PY" -m torch.distributed.run --standalone --nproc_per_node="$ranks" -m benchmarks.gpu_check \
  "${train_args[@]}" ${extra[@]+"${extra[@]}"} >"$logs/train.log" 2>&1
train_rc=$?
train_json=$(grep -E '^\{' "$logs/train.log" | tail -n 1)
[ -n "$train_json" ] || train_json=null

# phase 2: rollouts from a server, then RL steps of the math recipe against it
t1=$(date +%s)
timeout 360 "$PY" -m benchmarks.gpu_rl_check --work "$work/rl" "${rl_args[@]}" >"$logs/rl.log" 2>&1
rl_rc=$?
rl_json=$(grep -E '^\{' "$logs/rl.log" | tail -n 1)
[ -n "$rl_json" ] || rl_json=null
t2=$(date +%s)

result=$("$PY" - "$train_rc" "$rl_rc" "$((t1 - t0))" "$((t2 - t1))" "$gpus" "$train_json" "$rl_json" <<'EOF'
import json, sys
train_rc, rl_rc, train_s, rl_s = (int(x) for x in sys.argv[1:5])
gpus, train, rl = (json.loads(x) for x in sys.argv[5:8])
print(json.dumps({"ok": train_rc == 0 and rl_rc == 0, "gpus": gpus,
                  "train": train, "train_rc": train_rc, "train_wall_s": train_s,
                  "rl": rl, "rl_rc": rl_rc, "rl_wall_s": rl_s}))
EOF
)
echo "$result"
if [ -n "${OUT:-}" ]; then
  echo "$result" >"$OUT/gpu_check.json"
fi
[ "$train_rc" = 0 ] && [ "$rl_rc" = 0 ]

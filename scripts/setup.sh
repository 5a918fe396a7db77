#!/usr/bin/env bash
# Create (or reuse) .venv and install EvoTrainer with its domains and test tools.
# torch==2.13.0 goes in first so that pip never pulls a CUDA build on a CPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
stamp=.venv/.evo-installed
want=$(cat pyproject.toml setup.py domains/*/pyproject.toml examples/*/pyproject.toml 2>/dev/null | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ "${EVO_REINSTALL:-0}" != "1" ]; then
  exit 0
fi
log=.venv/setup.log
echo "setup: installing torch==2.13.0 (CPU) and EvoTrainer into .venv (log: $log)"
pipi() { "$VPY" -m pip install -q "$@" >>"$log" 2>&1 || { tail -n 30 "$log" >&2; echo "setup: pip install $* failed" >&2; exit 1; }; }
pipi --upgrade pip
pipi "torch==2.13.0"
# deepspeed: the 2-rank ZeRO test (CPU accelerator + gloo, no op is compiled); lora: peft for adapter sync
extras="postgres,sinks,wandb,mlflow,parquet,test,deepspeed,lora"
pipi -e ".[${extras}]"
# The arithmetic domain once was its own distribution; evotrainer ships it now.
"$VPY" -m pip uninstall -y -q evo-plugin-arithmetic >>"$log" 2>&1 || true
for d in domains/*/ examples/*/; do
  if [ -f "$d/pyproject.toml" ]; then
    # a distribution's own test extra (e.g. the code domain's benchmark data) comes along
    if grep -q '^test = ' "$d/pyproject.toml"; then pipi -e "${d%/}[test]"; else pipi -e "$d"; fi
  fi
done
echo "$want" > "$stamp"

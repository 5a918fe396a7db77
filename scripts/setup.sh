#!/usr/bin/env bash
# Create (or reuse) .venv and install EvoTrainer with its domains.
#
#   bash scripts/setup.sh [quickstart|test]
#
#   quickstart (default)  the core and the domains: what `evo run` and the quickstart need
#   test                  also every extra the test suite exercises (postgres, deepspeed, wandb,
#                         mlflow, tensorboard, parquet, peft, pytest, ruff) and the domains' test data
#
# torch goes in first, and as the CPU build, asked for by name (torch==X+cpu) so that pip can
# never substitute a CUDA build:
#   1. from the PyTorch CPU wheel index (EVO_TORCH_INDEX) when it answers;
#   2. otherwise from the indexes pip is configured with (a mirror or a wheel directory that
#      holds the +cpu wheel);
#   3. otherwise setup stops and says so. It never falls back to the default build, which on
#      Linux is the CUDA one (a GPU machine installs its CUDA torch itself: docs/scale.md).
# EVO_REINSTALL=1 reinstalls even when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-quickstart}
case "$profile" in
  quickstart|test) ;;
  *) echo "setup: unknown profile '$profile' (use quickstart or test)" >&2; exit 2 ;;
esac
PY=${PYTHON:-python3}
TORCH_VERSION=${EVO_TORCH_VERSION:-2.13.0}
TORCH_INDEX=${EVO_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
stamp=.venv/.evo-installed
want=$(cat pyproject.toml setup.py domains/*/pyproject.toml examples/*/pyproject.toml 2>/dev/null | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "${EVO_REINSTALL:-0}" != "1" ]; then
  read -r have have_profile <"$stamp" || true
  # the test profile holds everything the quickstart profile does
  if [ "$have" = "$want" ] && { [ "${have_profile:-test}" = "$profile" ] || [ "${have_profile:-test}" = test ]; }; then
    exit 0
  fi
fi
log=.venv/setup.log
: >"$log"
pipi() { "$VPY" -m pip install -q "$@" >>"$log" 2>&1 || { tail -n 30 "$log" >&2; echo "setup: pip install $* failed" >&2; exit 1; }; }
pipi --upgrade pip

# The CPU build of torch. A venv that holds it already keeps it.
torch_cpu() { "$VPY" -c "import sys, torch; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' and torch.version.cuda is None else 1)" 2>/dev/null; }
if torch_cpu && [ "${EVO_REINSTALL:-0}" != "1" ]; then
  echo "setup: torch $TORCH_VERSION (CPU) is already in .venv"
elif "$VPY" - "$TORCH_INDEX" <<'EOF'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=10).close()
except Exception:
    sys.exit(1)
EOF
then
  echo "setup: torch==$TORCH_VERSION+cpu from $TORCH_INDEX (log: $log)"
  pipi "torch==$TORCH_VERSION+cpu" --extra-index-url "$TORCH_INDEX"
else
  echo "setup: $TORCH_INDEX does not answer; torch==$TORCH_VERSION+cpu from pip's configured indexes (log: $log)"
  if ! "$VPY" -m pip install -q "torch==$TORCH_VERSION+cpu" >>"$log" 2>&1; then
    tail -n 5 "$log" >&2
    cat >&2 <<EOF
setup: cannot install the CPU build of torch $TORCH_VERSION: the PyTorch CPU index
  ($TORCH_INDEX) is unreachable and no index pip is configured with has torch==$TORCH_VERSION+cpu.
  Setup stops rather than install the default build, which on Linux is the CUDA one. Either
  - point EVO_TORCH_INDEX at a mirror of the CPU index, or pip at a directory holding the wheel
    (PIP_FIND_LINKS=/path/to/wheels), and run this again; or
  - install a CPU build of torch $TORCH_VERSION into .venv yourself and run this again: it is kept.
EOF
    exit 1
  fi
fi
torch_cpu || { echo "setup: .venv's torch is not the CPU build of $TORCH_VERSION: $("$VPY" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)')" >&2; exit 1; }

if [ "$profile" = test ]; then
  # deepspeed: the 2-rank ZeRO test (CPU accelerator + gloo, no op is compiled); lora: peft for adapter sync
  pipi -e ".[postgres,sinks,wandb,mlflow,parquet,test,deepspeed,lora]"
else
  pipi -e .
fi
# The arithmetic domain once was its own distribution; evotrainer ships it now.
"$VPY" -m pip uninstall -y -q evo-plugin-arithmetic >>"$log" 2>&1 || true
for d in domains/*/ examples/*/; do
  if [ -f "$d/pyproject.toml" ]; then
    # with the test profile, a distribution's own test extra (e.g. the code domain's benchmark data) comes along
    if [ "$profile" = test ] && grep -q '^test = ' "$d/pyproject.toml"; then pipi -e "${d%/}[test]"; else pipi -e "$d"; fi
  fi
done
# Nothing above may have swapped torch for another build.
torch_cpu || { echo "setup: a dependency replaced torch $TORCH_VERSION (CPU): see $log" >&2; exit 1; }
echo "$want $profile" >"$stamp"
echo "setup: .venv ready ($profile profile, torch $("$VPY" -c 'import torch; print(torch.__version__)'))"

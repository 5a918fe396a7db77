"""Launching ``evo run`` as several CPU ranks (gloo) under torchrun or the deepspeed launcher,
and reading back what the run logged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from .export_testlib import ROOT, TINY_RUN

QUICKSTART = str(ROOT / "configs" / "quickstart.toml")

# The shrunken quickstart (1-layer 32-wide model, 5 SFT steps, 1-digit sums) with a global
# batch of 8 prompts x 8 samples, one thread per rank (the CI box has two cores).
def shrunk(workdir: Path, steps: int) -> list[str]:
    return ["--set", f"run.checkpoint_dir={json.dumps(str(workdir / 'ckpt'))}", *TINY_RUN,
            "--set", f"run.steps={steps}", "--set", "run.eval_every=2"]


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ, OMP_NUM_THREADS="1", EVO_NO_PLUGIN_COMMANDS="1", DS_ACCELERATOR="cpu")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        e.pop(k, None)
    e.update(extra)
    return e


def torchrun_args(nproc: int, store: str, workdir: Path, steps: int, *extra: str,
                  log_dir: Optional[Path] = None) -> list[str]:
    """``torchrun --nproc_per_node N -m evo_core.cli.app run configs/quickstart.toml ...``
    (the fixed harness; ``extra`` may override it)."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
                "--master_port", str(_port())]
    if log_dir is not None:
        launcher += ["--log_dir", str(log_dir), "--redirects", "3"]
    return [*launcher, "-m", "evo_core.cli.app", "run", QUICKSTART, "--store", store, "--no-progress", "--json",
            "--harness", "fixed", *shrunk(workdir, steps), *extra]


def _port() -> int:
    from evo_core.trainer.distributed import free_port

    return free_port()


def run(args: Sequence[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env(), cwd=cwd)


def outcome(proc: subprocess.CompletedProcess) -> dict[str, Any]:
    """The run's JSON row (only rank 0 prints one)."""
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-5000:])
    return outcome_from(proc.stdout)


def events(store: str, run_id: str) -> list[Any]:
    from evo_core.store import open_store, run_stream

    st = open_store(store)
    try:
        return list(st.events(run_stream(run_id)))
    finally:
        st.close()


def step_metrics(store: str, run_id: str) -> dict[int, dict[str, Any]]:
    from evo_events import StepCompleted

    return {e.step: dict(e.metrics) for e in events(store, run_id) if isinstance(e, StepCompleted)}


def verify(store: str, run_id: str) -> dict[str, Any]:
    from .export_testlib import evo

    proc = evo("verify", run_id, "--store", store, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def outcome_from(stdout: str) -> dict[str, Any]:
    rows = [line for line in stdout.splitlines() if line.startswith("[{")]
    assert len(rows) == 1, stdout[-3000:]
    [row] = json.loads(rows[0])
    return row


def wait_for_step(store: str, step: int, proc: subprocess.Popen, timeout: float) -> str:
    """Poll the store until a run has committed ``step``; returns its run id."""
    import time

    from evo_core.store import open_store

    deadline = time.monotonic() + timeout
    path = store.removeprefix("sqlite:///")
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the launch exited with {proc.returncode} before step {step}")
        if os.path.exists(path):
            st = open_store(store)
            try:
                for run_id in st.runs():
                    if step in step_metrics(store, run_id):
                        return run_id
            finally:
                st.close()
        time.sleep(0.2)
    raise AssertionError(f"no run reached step {step} in {timeout:.0f} s")

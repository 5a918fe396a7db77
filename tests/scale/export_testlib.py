"""Helpers for the export and recipe tests: the ``evo`` CLI in a fresh process, a real
``evo serve`` subprocess on a loopback port, and a tiny quickstart run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Optional

from evo_core.testing import evo_serve, run_evo  # noqa: F401  (evo_serve: re-exported for the scale tests)

ROOT = Path(__file__).resolve().parents[2]

# A 1-layer, 32-wide tiny model, a short SFT start and one-digit sums: a few seconds on one
# core, and rewards vary within groups, so every RL step moves the weights.
TINY_RUN = [
    "--set", "run.steps=3", "--set", "run.threads=1", "--set", "run.checkpoint_blobs=true",
    "--set", "sft.steps=5", "--set", "sft.batch_size=16", "--set", 'sft.cache_dir=""',
    "--set", "policy.tiny.hidden_size=32", "--set", "policy.tiny.num_layers=1", "--set", "policy.tiny.num_heads=2",
    "--set", "policy.tiny.num_kv_heads=2", "--set", "policy.tiny.intermediate_size=64",
    "--set", 'task.train="generate://addition?digits=1&validation=8&test=8&seed=0"',
    "--set", "rl.prompts_per_step=8", "--set", "rl.group_size=8", "--set", "rl.warmup_steps=0", "--set", "rl.lr=1e-2",
    "--set", "eval.samples=1",
]


def evo(*args: str, cwd: Optional[Path] = None, timeout: int = 300, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    return run_evo(*args, env=env, timeout=timeout, cwd=cwd or ROOT, threads=1)


def run_json(proc: subprocess.CompletedProcess) -> list[dict]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tiny_quickstart_run(workdir: Path, *extra: str) -> tuple[str, str]:
    """A real ``evo run configs/quickstart.toml`` (fixed harness) into a SQLite store in
    ``workdir``; returns (store url, run id)."""
    url = f"sqlite:///{workdir}/evo.sqlite"
    proc = evo("run", str(ROOT / "configs" / "quickstart.toml"), "--store", url, "--harness", "fixed", "--no-progress",
               "--json", "--set", f"run.checkpoint_dir={json.dumps(str(workdir / 'ckpt'))}", *TINY_RUN, *extra,
               cwd=workdir)
    [row] = run_json(proc)
    assert row["status"] == "completed"
    return url, row["run_id"]



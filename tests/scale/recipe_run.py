"""Running a paper-scale recipe on a CPU: the recipe file as shipped, with ``--set``
overrides that swap in the tiny model and the small task files, CPU sizes, and ``evo serve``
as the ``[rollout]`` server (``engine = "http"``, checkpoint weight sync)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from .export_testlib import ROOT, evo, run_json

RECIPES = ROOT / "configs" / "recipes"


def q(value: str) -> str:
    """A string as a TOML literal for ``--set``."""
    return json.dumps(value)


def cpu_overrides(*, model: Path, train: Path, test: Path, work: Path, server: str) -> list[str]:
    """What changes between the GPU cluster and this CPU box: the model and the data, the
    sizes (2 steps, a few prompts, short replies, 1-step backtests, a quarter of the small
    train file as validation), the device, and the rollout server."""
    rollout = (f'{{engine = "http", base_url = {q(server + "/v1")}, model = "policy", sync_mode = "checkpoint", '
               f'sync_dir = {q(str(work / "sync"))}}}')
    sets = {
        "policy.path": q(str(model)), "policy.dtype": q("float32"),
        "task.train": q(str(train)), "task.test": q(str(test)),
        "task.validation_fraction": "0.25",  # the recipes carve 2% of train; a few of 40 rows here
        "run.device": q("cpu"), "run.steps": "2", "run.eval_every": "2", "run.threads": "1",
        "run.checkpoint_dir": q(str(work / "ckpt")),
        "rl.prompts_per_step": "4", "rl.group_size": "4", "rl.max_new_tokens": "3", "rl.overlong_buffer": "1",
        "eval.samples": "1",
        "harness.backtest.k_steps": "1",  # an online A/B trains control and treatment this many steps each
        "distributed.accelerator": q("cpu"), "distributed.precision": q("fp32"),
        "rollout": rollout,
    }
    return [arg for k, v in sets.items() for arg in ("--set", f"{k}={v}")]


def run_recipe(name: str, work: Path, overrides: Sequence[str], *, timeout: int = 900) -> tuple[str, str]:
    """``evo run configs/recipes/<name>.toml`` (the evolving harness) into a SQLite store in
    ``work``; returns (store url, run id)."""
    url = f"sqlite:///{work}/evo.sqlite"
    proc = evo("run", str(RECIPES / f"{name}.toml"), "--store", url, "--harness", "evolving", "--no-progress", "--json",
               *overrides, cwd=work, timeout=timeout)
    [row] = run_json(proc)
    assert row["status"] == "completed" and row["steps"] == 2, row
    return url, row["run_id"]

"""Helpers for the export and recipe tests: the ``evo`` CLI in a fresh process, a real
``evo serve`` subprocess on a loopback port, and a tiny quickstart run."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from evo_core.testing import EVO_MAIN, run_evo
from typing import Iterator, Optional

import httpx

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def evo_serve(policy: str, *, name: Optional[str] = None, timeout: float = 180) -> Iterator[str]:
    """``evo serve POLICY`` as a subprocess on 127.0.0.1; yields the base URL (no /v1)."""
    port = free_port()
    args = [sys.executable, "-c", EVO_MAIN, "serve", policy, "--port", str(port)]
    if name:
        args += ["--served-model-name", name]
    env = dict(os.environ, OMP_NUM_THREADS="1", EVO_NO_PLUGIN_COMMANDS="1")
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"evo serve exited with {proc.returncode}:\n{proc.stdout.read()}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"evo serve did not become healthy in {timeout:.0f} s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

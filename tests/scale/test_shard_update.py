"""The sharded update: 2 gloo ranks each backpropagate their share of every minibatch and sum
gradients; the weights after the update equal one process's on the whole batch (KL term,
2 minibatches, micro-batching, and a minibatch whose share is empty on one rank)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from .dist_testlib import env
from evo_core.trainer.distributed import free_port

from .export_testlib import ROOT

WORKER = str(ROOT / "tests" / "scale" / "shard_worker.py")
pytestmark = pytest.mark.slow  # four launches with torch imports: about a minute on the shared box


def _run(tmp_path, ranks: int, *args: str) -> dict:
    out = tmp_path / f"out{ranks}.json"
    if ranks == 1:
        cmd = [sys.executable, WORKER, str(out), *args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks), "--master_port",
               str(free_port()), WORKER, str(out), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("updates, micro, n_valid", [(2, 2, 8), (2, 0, 3)])  # 3 valid over 2 minibatches: one holds 1
def test_two_ranks_update_like_one(tmp_path, updates, micro, n_valid):
    args = (str(updates), str(micro), str(n_valid))
    one, two = _run(tmp_path, 1, *args), _run(tmp_path, 2, *args)
    assert one["entropy_by_item"] == two["entropy_by_item"]
    for k in ("loss", "grad_norm", "entropy", "kl"):
        assert math.isclose(one[k], two[k], rel_tol=1e-4, abs_tol=1e-7), (k, one[k], two[k])
    moved = max(abs(a - b) for a, b in zip(one["weights"], two["weights"]))
    assert moved < 1e-5

"""The sharded update and the sharded training state, on 2 gloo ranks against 1 process.

- DDP: each rank backpropagates its share of every minibatch and gradients are summed; the
  weights after the update equal one process's on the whole batch (KL term, 2 minibatches,
  micro-batching, and a minibatch whose share is empty on one rank).
- DeepSpeed ZeRO through ``RLSession.enable_zero``: the same update, 2 steps (so Adam's moments
  matter), ZeRO-2 on the empty-share case (its padding backwards) and ZeRO-3; and the training
  state through a snapshot with the optimizer (rank 0 gathers the shards), a resume checkpoint
  (a shard file per rank), and a fork: each path leads to the weights one process reaches.

Tolerances: ZeRO-1/2 and DDP reduce in the order one process accumulates (measured: equal, or
within 1.2e-7); ZeRO-3 computes the clipping norm from partitions (measured: within 1.9e-6
after 2-4 AdamW steps at lr 1e-2). Checked at 1e-5 absolute on every weight.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from .dist_testlib import env
from evo_core.trainer.distributed import free_port

from .export_testlib import ROOT

pytestmark = pytest.mark.slow  # launches with torch (and DeepSpeed) imports: 10-20 s each on the shared box


def _run(tmp_path, ranks: int, mode: str, *args: str) -> dict:
    out = tmp_path / f"{mode}-{ranks}-{'-'.join(a for a in args if '/' not in a)}.json"
    worker = ["-m", "tests.scale.shard_worker", mode, str(out), *args]
    if ranks == 1:
        cmd = [sys.executable, *worker]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks), "--master_port",
               str(free_port()), *worker]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


def _assert_update_like(one: dict, two: dict, weight_tol: float) -> None:
    assert one["entropy_by_item"] == two["entropy_by_item"]
    for k in ("loss", "grad_norm", "entropy", "kl"):
        assert math.isclose(one[k], two[k], rel_tol=1e-4, abs_tol=1e-7), (k, one[k], two[k])
    assert max(abs(a - b) for a, b in zip(one["weights"], two["weights"])) < weight_tol


@pytest.mark.parametrize("updates, micro, n_valid", [(2, 2, 8), (2, 0, 3)])  # 3 valid over 2 minibatches: one holds 1
def test_two_ranks_update_like_one(tmp_path, updates, micro, n_valid):
    args = (str(updates), str(micro), str(n_valid))
    _assert_update_like(_run(tmp_path, 1, "update", *args), _run(tmp_path, 2, "update", *args), 1e-5)


@pytest.mark.deepspeed
@pytest.mark.parametrize("engine, updates, micro, n_valid", [
    ("zero2", 2, 0, 3),  # rank 1's share of one minibatch is empty: it pads with a zero-loss backward
    ("zero3", 2, 2, 8),
])
def test_zero_update_like_one_process(tmp_path, engine, updates, micro, n_valid):
    pytest.importorskip("deepspeed")
    args = (str(updates), str(micro), str(n_valid))
    one = _run(tmp_path, 1, "update", *args, "ddp", "2")
    two = _run(tmp_path, 2, "update", *args, engine, "2")
    _assert_update_like(one, two, 1e-5)


@pytest.mark.deepspeed
@pytest.mark.parametrize("engine", ["zero2", "zero3"])
def test_zero_state_through_snapshot_resume_and_fork(tmp_path, engine):
    pytest.importorskip("deepspeed")
    one = _run(tmp_path, 1, "state", "ddp", str(tmp_path / "ckpt1"))
    two = _run(tmp_path, 2, "state", engine, str(tmp_path / "ckpt2"))
    assert two["zero_layout"] == {"stage": int(engine[4:]), "world_size": 2}
    assert (tmp_path / "ckpt2" / "step-000001.zero" / "rank-00001-of-00002.pt").exists()  # rank 1 wrote its shard
    assert two["snapshot_digest_ok"] and two["resume_digest_ok"]  # the full weights, whatever the sharding
    for path in ("main", "fork", "after_snapshot", "after_resume"):
        assert max(abs(a - b) for a, b in zip(one[path], two[path])) < 1e-5, path
    # each path went somewhere else than the main line: the comparisons are not vacuous
    for path in ("after_snapshot", "after_resume"):
        assert max(abs(a - b) for a, b in zip(two[path], two["main"])) > 1e-3, path

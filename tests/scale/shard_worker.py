"""One rank of the sharded-update checks (tests/scale/test_shard_update.py), run as
``python -m tests.scale.shard_worker OUT MODE ...`` from the repository root, one process or
one per rank under torchrun. ``engine``: "ddp" (gradients summed over ranks) or "zero1" /
"zero2" / "zero3" (DeepSpeed ZeRO through ``RLSession.enable_zero``).

- ``update OUT UPDATES MICRO N_VALID ENGINE STEPS``: ``RLSession._update`` on this rank's share
  of a fixed batch, STEPS times; the weights and statistics to OUT (rank 0).
- ``state OUT ENGINE CKPT_DIR``: the training state through every path that copies it: a
  snapshot with the optimizer (``weights_bytes``, rank 0 gathers the shards), a resume
  checkpoint (``resume_state``, a shard file per rank), a fork; the weights each path leads
  to after one more update, to OUT (rank 0).
"""

from __future__ import annotations

import json
import pickle
import random
import sys
from typing import Any


def make_session(engine: str, updates_per_step: int, micro: int) -> Any:
    """An ``RLSession`` with only what the update and the state paths read, on this launch's ranks."""
    import attrs
    import torch

    from evo_core.config import RLSection
    from evo_core.trainer.dist_settings import DistributedSettings
    from evo_core.trainer.policy import HFPolicy
    from evo_core.trainer.ranks import detect, init_group
    from evo_core.trainer.session import DataCursor, RLSession
    from evo_core.trainer.tiny import TinyModelConfig

    torch.set_num_threads(1)
    info = detect()
    policy = HFPolicy.tiny(TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=2,
                                           intermediate_size=64), seed=0)
    s = object.__new__(RLSession)
    s.policy, s.rl = policy, attrs.evolve(RLSection(), updates_per_step=updates_per_step, micro_batch_size=micro,
                                          lr=1e-2, kl_coef=0.05)
    s.optimizer = s._make_optimizer()
    s.rng = random.Random("update")
    s.gen = torch.Generator().manual_seed(0)
    s.cursor = DataCursor(8, 0)
    s.step = s.policy_version = s.max_version = 0
    s.id_salt, s.checkpoint_dir = "w", None
    s.ref_state, s._ref_policy = policy.state_dict(), None
    s.dist = init_group(info, DistributedSettings(), "cpu") if info is not None else None
    s.zero = None
    if engine.startswith("zero"):
        from evo_core.trainer.distributed import DeepSpeedSettings, prepare_deepspeed

        prepare_deepspeed("cpu")
        s.enable_zero(DeepSpeedSettings(zero_stage=int(engine[4:]), accelerator="cpu", persistence_threshold=0))
    return s


def batch(vocab: int, n_valid: int) -> tuple[list[Any], list[Any]]:
    from evo_core.trainer.protocols import Sample

    g = random.Random(7)
    samples = [Sample(prompt="p", text="t", prompt_ids=tuple(g.randrange(3, vocab) for _ in range(g.randrange(2, 6))),
                      token_ids=tuple(g.randrange(3, vocab) for _ in range(g.randrange(1, 7)))) for _ in range(8)]
    adv = [g.uniform(-1, 1) if i < n_valid else None for i in range(8)]
    return samples, adv


def flat(session: Any) -> list[float]:
    import torch

    return torch.cat([p.detach().reshape(-1) for p in session.policy.model.parameters()]).tolist()


def update(out: str, updates_per_step: int, micro: int, n_valid: int, engine: str = "ddp", steps: int = 1) -> None:
    from evo_core.trainer.grpo import LossSettings

    s = make_session(engine, updates_per_step, micro)
    samples, adv = batch(s.policy.tokenizer.vocab_size, n_valid)
    for _ in range(steps):  # later steps move the Adam moments the first one left
        upd = s._update(samples, adv, LossSettings(kl_coef=0.05), lr=1e-2)
    if s.dist is None or s.dist.rank == 0:
        json.dump({"weights": flat(s), "loss": upd["loss"], "grad_norm": upd["grad_norm"], "entropy": upd["entropy"],
                   "kl": upd["kl"], "entropy_by_item": {str(k): v for k, v in upd["entropy_by_item"].items()}},
                  open(out, "w"))
    if s.dist is not None:
        s.dist.close()


def state(out: str, engine: str, ckpt_dir: str) -> None:
    from evo_core.trainer.grpo import LossSettings

    s = make_session(engine, 2, 2)
    samples, adv = batch(s.policy.tokenizer.vocab_size, 8)
    # what rank 0 wrote, to every rank, as a copy (as the run loop's files are: a state dict holds live tensors)
    shared = (lambda x: pickle.loads(pickle.dumps(x))) if s.dist is None else s.dist.broadcast

    def step(sess: Any) -> None:
        sess._update(samples, adv, LossSettings(kl_coef=0.05), lr=1e-2)
        sess.step += 1

    step(s)
    digest = s.policy.digest()
    snap = shared(s.weights_bytes(with_optimizer=True))
    s.checkpoint_dir = ckpt_dir
    ck = shared(s.resume_state())
    step(s)
    branch = s.fork()
    step(branch)
    step(s)
    got = {"main": flat(s), "fork": flat(branch)}
    branch.close()
    s.load_weights_bytes(snap)
    got["snapshot_digest_ok"] = s.policy.digest() == digest
    step(s)
    got["after_snapshot"] = flat(s)
    s.load_resume_state(ck)
    got["resume_digest_ok"] = s.policy.digest() == digest
    step(s)
    got["after_resume"] = flat(s)
    got["zero_layout"] = {k: v for k, v in (ck.get("zero_optimizer") or {}).items() if k in ("stage", "world_size")}
    if s.dist is None or s.dist.rank == 0:
        json.dump(got, open(out, "w"))
    if s.dist is not None:
        s.dist.close()


if __name__ == "__main__":
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "update":
        update(rest[0], int(rest[1]), int(rest[2]), int(rest[3]), *rest[4:5], *(int(a) for a in rest[5:6]))
    elif mode == "state":
        state(*rest)
    else:
        raise SystemExit(f"unknown mode {mode!r}")

"""One rank of the sharded-update check (tests/scale/test_shard_update.py): a fixed batch,
``RLSession._update`` on this rank's share, the resulting weights and statistics to a file.
``engine``: "ddp" (gradients summed over ranks) or "zero1" / "zero2" / "zero3" (DeepSpeed)."""

from __future__ import annotations

import json
import random
import sys


def main(out: str, updates_per_step: int, micro: int, n_valid: int, engine: str = "ddp", steps: int = 1) -> None:
    import attrs
    import torch

    from evo_core.config import RLSection
    from evo_core.trainer.grpo import LossSettings
    from evo_core.trainer.policy import HFPolicy
    from evo_core.trainer.protocols import Sample
    from evo_core.trainer.ranks import detect, init_group
    from evo_core.trainer.dist_settings import DistributedSettings
    from evo_core.trainer.session import RLSession
    from evo_core.trainer.tiny import TinyModelConfig

    torch.set_num_threads(1)
    info = detect()
    policy = HFPolicy.tiny(TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=2,
                                           intermediate_size=64), seed=0)
    s = object.__new__(RLSession)  # only what _update reads
    s.policy, s.rl = policy, attrs.evolve(RLSection(), updates_per_step=updates_per_step, micro_batch_size=micro,
                                          lr=1e-2, kl_coef=0.05)
    s.optimizer = s._make_optimizer()
    s.rng = random.Random("update")
    s.ref_state, s._ref_policy = policy.state_dict(), None
    s.dist = init_group(info, DistributedSettings(), "cpu") if info is not None else None
    s.zero = None
    if engine.startswith("zero"):
        from evo_core.trainer.distributed import DeepSpeedSettings, prepare_deepspeed

        prepare_deepspeed("cpu")
        s.enable_zero(DeepSpeedSettings(zero_stage=int(engine[4:]), accelerator="cpu", persistence_threshold=0))
    g = random.Random(7)
    samples = [Sample(prompt="p", text="t", prompt_ids=tuple(g.randrange(3, policy.tokenizer.vocab_size) for _ in range(g.randrange(2, 6))),
                      token_ids=tuple(g.randrange(3, policy.tokenizer.vocab_size) for _ in range(g.randrange(1, 7)))) for _ in range(8)]
    adv = [g.uniform(-1, 1) if i < n_valid else None for i in range(8)]
    for _ in range(steps):  # later steps move the Adam moments the first one left
        upd = s._update(samples, adv, LossSettings(kl_coef=0.05), lr=1e-2)
    if s.dist is None or s.dist.rank == 0:
        flat = torch.cat([p.detach().reshape(-1) for p in policy.model.parameters()]).tolist()
        json.dump({"weights": flat, "loss": upd["loss"], "grad_norm": upd["grad_norm"], "entropy": upd["entropy"],
                   "kl": upd["kl"], "entropy_by_item": {str(k): v for k, v in upd["entropy_by_item"].items()}},
                  open(out, "w"))
    if s.dist is not None:
        s.dist.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), *sys.argv[5:6],
         *(int(a) for a in sys.argv[6:7]))

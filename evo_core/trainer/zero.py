"""DeepSpeed ZeRO inside an RL session: ``[distributed] engine = "deepspeed"`` under ``evo run``.

One :class:`ZeroTrainer` per session (the main line and each forked backtest branch). It wraps
the policy and an AdamW built from ``[rl]`` (``rl.lr``, ``rl.weight_decay``, ``rl.grad_clip``,
the very optimizer a single process uses) in ``deepspeed.initialize``; the engine's
backward/step make the update. The batch is defined once, in ``[rl]``: ``rl.prompts_per_step``
prompts (the global batch) are split into ``rl.updates_per_step`` minibatches, one optimizer
step each; every rank backpropagates its share of a minibatch in micro-batches of
``rl.micro_batch_size`` sequences with the global normalisers (the loss of a share is its part
of the global loss), so a 2-rank ZeRO step and a 1-process step apply the same update:

- DeepSpeed averages gradients over ranks; the shares already sum to the global loss, so each
  rank's loss is multiplied by the world size first (exact for powers of two).
- The engine's accumulation boundary is set by hand: every backward of a minibatch but the last
  is not a boundary, and one ``step()`` follows the last. ZeRO-2/3 reduce gradients inside
  every backward, so every rank must run the same number of them: a rank whose share has fewer
  micro-batches pads with zero-loss backwards of a real sample (no gradient, same collectives).
- Clipping is DeepSpeed's ``gradient_clipping`` (``rl.grad_clip``) on the global norm, which
  the engine reports before clipping, as ``clip_grad_norm_`` does.

Weights: under ZeRO-1/2 every rank holds the full parameters, so the engine trains the policy's
own module. Under ZeRO-3 the engine's parameters are partitioned; the policy keeps a full
replica on every rank for sampling, scoring the old/reference log-probs, evaluation, digests,
snapshots and exports, refreshed by one parameter all-gather after every optimizer step (what
a colocated rollout engine holds anyway). Either way ``policy.model`` holds the consolidated
full weights.

Optimizer state is sharded: :meth:`shard_state` is this rank's partition, loaded back with
:meth:`load_shards`; the session decides where shards travel (in memory for forks, gathered to
rank 0 for snapshots, one file per rank for resume checkpoints; see ``evo_core.checkpoints``).

``deepspeed`` is imported only here (through ``evo_core.trainer.distributed.import_deepspeed``,
which raises ``DeepSpeedMissing`` with the install line when the extra is absent).
"""

from __future__ import annotations

import copy
from typing import Any, Optional, Sequence


def session_ds_config(settings: Any, world_size: int, grad_clip: float) -> dict[str, Any]:
    """The ``ds_config`` of an RL session: ZeRO and precision from ``[distributed]``, clipping from
    ``[rl]``. The micro-batch and accumulation entries are nominal (1 and 1): the session drives
    accumulation boundaries itself (see the module docstring)."""
    from evo_core.trainer.distributed import build_ds_config

    cfg = build_ds_config(settings, world_size)
    cfg.update(train_micro_batch_size_per_gpu=1, gradient_accumulation_steps=1, train_batch_size=world_size,
               gradient_clipping=float(grad_clip) if grad_clip > 0 else 0.0)
    if settings.offload_optimizer:  # a torch AdamW on offloaded state, not DeepSpeed's compiled CPU Adam
        cfg["zero_force_ds_cpu_optimizer"] = False
    return cfg


class ZeroTrainer:
    """The DeepSpeed engine of one session. ``policy.model`` stays the consolidated weights."""

    def __init__(self, policy: Any, settings: Any, rl: Any, *, rank: int, world_size: int) -> None:
        from evo_core.trainer.distributed import adamw, import_deepspeed

        ds = import_deepspeed(settings.accelerator)
        self.policy, self.settings, self.rl, self.stage = policy, settings, rl, int(settings.zero_stage)
        self.rank, self.world_size = rank, world_size
        module = policy.model if self.stage < 3 else copy.deepcopy(policy.model)
        if settings.gradient_checkpointing and hasattr(module, "gradient_checkpointing_enable"):
            module.gradient_checkpointing_enable()
        params = [p for p in module.parameters() if p.requires_grad]
        for p in params:  # a gradient left by the SFT warm start would be summed into the first update's
            p.grad = None
        # RLSession._make_optimizer's (fused on CUDA, unless the state lives in CPU RAM)
        optimizer = adamw(params, lr=rl.lr, weight_decay=rl.weight_decay,
                          fused=all(p.is_cuda for p in params) and not settings.offload_optimizer)
        engine, _, _, _ = ds.initialize(model=module, optimizer=optimizer,
                                        config=session_ds_config(settings, world_size, rl.grad_clip))
        self.engine = engine
        self.optimizer = engine.optimizer  # ZeRO's: param_groups are AdamW's (the session sets the lr there)
        if self.stage < 3:
            self.scorer = policy
        else:  # the policy's scoring code over the engine's partitioned module
            self.scorer = copy.copy(policy)
            self.scorer.model = engine.module

    # -- the update ----------------------------------------------------------------------------
    @property
    def module(self) -> Any:
        return self.engine.module

    def backward(self, loss: Any, *, boundary: bool) -> None:
        self.engine.set_gradient_accumulation_boundary(boundary)
        self.engine.backward(loss * self.world_size, scale_wrt_gas=False)

    def pad_backward(self, sample: Any, *, boundary: bool) -> None:
        """A zero-loss backward (this rank's share ran out of micro-batches): no gradient, but
        the same reductions as its peers' real micro-batches."""
        logp, _, _ = self.scorer.score([sample.prompt_ids], [sample.token_ids])
        self.backward(logp.sum() * 0.0, boundary=boundary)

    def step(self) -> float:
        """The optimizer step (clipping included); returns the global gradient norm before clipping."""
        self.engine.step()
        gn = self.engine.get_global_grad_norm()
        if self.stage == 3:
            self.gather_into_policy()
        return float(gn) if gn is not None else 0.0

    # -- weights --------------------------------------------------------------------------------
    def gather_into_policy(self) -> None:
        """ZeRO-3: the engine's partitioned parameters, all-gathered into the policy's replica
        (a collective: every rank calls it)."""
        import deepspeed
        import torch

        named = list(self.engine.module.named_parameters())
        dst = dict(self.policy.model.named_parameters())
        with deepspeed.zero.GatheredParameters([p for _, p in named], modifier_rank=None), torch.no_grad():
            for name, p in named:
                dst[name].copy_(p.data.to(dst[name].dtype))

    def weights_changed(self) -> None:
        """The policy's weights were loaded from outside (a snapshot, a restore, a resume): the
        engine's parameters and ZeRO's fp32 master partition follow them. A collective under
        ZeRO-3 (the new parameters are re-partitioned); local under ZeRO-1/2 (same module)."""
        import torch

        if self.stage == 3:
            import deepspeed

            named = list(self.engine.module.named_parameters())
            src = dict(self.policy.model.named_parameters())
            with deepspeed.zero.GatheredParameters([p for _, p in named], modifier_rank=0), torch.no_grad():
                if self.rank == 0:
                    for name, p in named:
                        p.data.copy_(src[name].to(p.dtype))
        self.optimizer.refresh_fp32_params()

    # -- optimizer shards ---------------------------------------------------------------------
    def shard_state(self) -> dict[str, Any]:
        """This rank's partition of the optimizer state (fp32 master weights, Adam moments), a
        detached CPU copy."""
        return _detached(self.optimizer.state_dict())

    def load_shards(self, shards: Sequence[Optional[dict[str, Any]]]) -> None:
        """Load this rank's partition (``shards[rank]``; other entries may be None). The fp32
        master weights come from the shard, and the engine's parameters follow them."""
        if len(shards) != self.world_size:
            raise RuntimeError(f"the optimizer state is sharded over {len(shards)} ranks, but this launch has "
                               f"{self.world_size}: resume a ZeRO run with the number of ranks it started with")
        mine = shards[self.rank]
        if mine is None:
            raise RuntimeError(f"rank {self.rank}: no optimizer shard to load")
        full: list[Any] = [mine] * self.world_size  # DeepSpeed indexes the list by rank (a rigid checkpoint)
        self.optimizer.load_state_dict(full, load_optimizer_states=True, load_from_fp32_weights=True)
        if self.stage == 3:  # the fp32 partition is now the truth: the replica follows it
            self.gather_into_policy()

    def fork(self, policy: Any) -> "ZeroTrainer":
        """A new engine over ``policy`` (a copy of this one's) with this rank's optimizer shard,
        copied in memory. A collective: every rank forks."""
        new = ZeroTrainer(policy, self.settings, self.rl, rank=self.rank, world_size=self.world_size)
        shards: list[Optional[dict[str, Any]]] = [None] * self.world_size
        shards[self.rank] = self.shard_state()
        new.load_shards(shards)
        return new

    def layout(self) -> dict[str, Any]:
        return {"stage": self.stage, "world_size": self.world_size}

    def close(self) -> None:
        """Release the engine (its hooks and buffers): a forked branch that was dropped."""
        engine, self.engine = self.engine, None
        if engine is not None:
            try:
                engine.destroy()
            except Exception:  # best effort: a branch's engine going away must not stop training
                pass


def _detached(obj: Any) -> Any:
    """A deep copy with every tensor cloned to the CPU (a state dict holds views of live buffers)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _detached(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_detached(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_detached(v) for v in obj)
    return copy.deepcopy(obj)

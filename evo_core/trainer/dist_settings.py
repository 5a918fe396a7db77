"""The ``[distributed]`` table: how ``evo run`` trains when a launcher (torchrun, the
``deepspeed`` launcher) starts it as several ranks.

Validated when the config is loaded, so a typo is a one-line error before anything is built
(``distributed.zero_stagee: unknown key (known: ...)``). The DeepSpeed keys (``zero_stage``,
``precision``, ...) are the ones :class:`evo_core.trainer.distributed.DeepSpeedSettings`
takes; they are checked by it, with its messages re-prefixed with ``distributed.``.

The batch and the optimizer are defined once, in ``[rl]``: ``rl.prompts_per_step`` is the
global batch, ``rl.updates_per_step`` the optimizer steps of an RL step, ``rl.micro_batch_size``
the sequences of one forward, and the optimizer is AdamW with ``rl.lr``, ``rl.weight_decay`` and
``rl.grad_clip``, whatever the engine. So the DeepSpeedSettings keys that would define them a
second time (``micro_batch_size``, ``grad_accum_steps``, ``lr``, ...) are errors here.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import attrs

ENGINES = ("ddp", "deepspeed")
BACKENDS = ("auto", "gloo", "nccl")
_OWN = ("engine", "backend", "timeout_s", "command_timeout_s")
# DeepSpeedSettings keys that [rl] already defines for evo run: key -> where it is defined
_IN_RL = {
    "micro_batch_size": "rl.micro_batch_size", "grad_accum_steps": "rl.updates_per_step and rl.micro_batch_size",
    "lr": "rl.lr", "weight_decay": "rl.weight_decay", "grad_clip": "rl.grad_clip",
    "optimizer": "rl's AdamW", "betas": "rl's AdamW", "eps": "rl's AdamW",
}


class DistributedConfigError(ValueError):
    """One line naming the ``distributed.*`` key at fault."""


@attrs.frozen(kw_only=True)
class DistributedSettings:
    """``engine``: "ddp" (every rank holds the full model; gradients are summed over ranks with
    one all-reduce per update, what DDP does) or "deepspeed" (ZeRO, see ``deepspeed``).
    ``backend``: the torch.distributed backend; "auto" is nccl on CUDA and gloo on CPU.
    ``timeout_s``: how long a collective waits for a missing rank before the job fails.
    ``command_timeout_s``: how long a follower waits for rank 0's next command (rank 0 evaluates
    and runs the harness alone in between); a rank that dies is noticed at once either way, these
    bound a rank that hangs."""

    engine: str = "ddp"
    backend: str = "auto"
    timeout_s: float = 600.0
    command_timeout_s: float = 86400.0
    deepspeed: Mapping[str, Any] = attrs.Factory(dict)  # the ZeRO keys, as validated by DeepSpeedSettings

    @classmethod
    def from_mapping(cls, data: Optional[Mapping[str, Any]]) -> "DistributedSettings":
        from evo_core.trainer.distributed import DeepSpeedSettings

        data = dict(data or {})
        ds_keys = {a.name for a in attrs.fields(DeepSpeedSettings)} - set(_IN_RL)
        known = sorted(set(_OWN) | ds_keys)
        for key in data:
            if key in _IN_RL:
                raise DistributedConfigError(
                    f"distributed.{key}: evo run defines the batch and the optimizer once, in [rl] "
                    f"(here: {_IN_RL[key]}); remove this key")
            if key not in known:
                raise DistributedConfigError(f"distributed.{key}: unknown key (known: {', '.join(known)})")
        engine = data.get("engine", "ddp")
        if engine not in ENGINES:
            raise DistributedConfigError(f"distributed.engine: must be one of {', '.join(ENGINES)}, got {engine!r}")
        backend = data.get("backend", "auto")
        if backend not in BACKENDS:
            raise DistributedConfigError(f"distributed.backend: must be one of {', '.join(BACKENDS)}, got {backend!r}")
        timeout = data.get("timeout_s", 600.0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise DistributedConfigError(f"distributed.timeout_s: must be a positive number, got {timeout!r}")
        command_timeout = data.get("command_timeout_s", 86400.0)
        if isinstance(command_timeout, bool) or not isinstance(command_timeout, (int, float)) or command_timeout <= 0:
            raise DistributedConfigError(
                f"distributed.command_timeout_s: must be a positive number, got {command_timeout!r}")
        ds = {k: v for k, v in data.items() if k in ds_keys}
        try:
            zero = DeepSpeedSettings.from_mapping(ds)
        except (TypeError, ValueError) as exc:
            msg = str(exc).replace("deepspeed.", "distributed.", 1)
            raise DistributedConfigError(msg.splitlines()[0]) from None
        if engine == "deepspeed" and zero.zero_stage not in (1, 2, 3):
            raise DistributedConfigError(
                f'distributed.zero_stage: engine = "deepspeed" runs ZeRO stage 1, 2 or 3, got {zero.zero_stage} '
                '(stage 0 shards nothing: use engine = "ddp")')
        return cls(engine=engine, backend=backend, timeout_s=float(timeout), command_timeout_s=float(command_timeout),
                   deepspeed=ds)

    def deepspeed_settings(self) -> Any:
        from evo_core.trainer.distributed import DeepSpeedSettings

        return DeepSpeedSettings.from_mapping(self.deepspeed)

    def check_installed(self) -> None:
        """engine = "deepspeed" needs the extra: one line, before any rank joins or builds."""
        import importlib.util

        if self.engine == "deepspeed" and importlib.util.find_spec("deepspeed") is None:
            raise DistributedConfigError(
                "distributed.engine: \"deepspeed\" needs the deepspeed extra, which is not installed: "
                "pip install 'evotrainer[deepspeed]'")

    def resolved_backend(self, device: str) -> str:
        if self.backend != "auto":
            return self.backend
        return "nccl" if device.startswith("cuda") else "gloo"


def check_global_batch(prompts_per_step: int, world_size: int) -> None:
    """The global batch (``rl.prompts_per_step``) is split evenly over the ranks."""
    if prompts_per_step % world_size:
        raise DistributedConfigError(
            f"rl.prompts_per_step = {prompts_per_step} (the global batch) is not divisible by the "
            f"{world_size} ranks of this launch")

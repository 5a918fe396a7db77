"""The in-process rollout engine: samples straight from the policy being trained."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from evo_core.trainer.protocols import Policy, Sample, SamplingParams


class InProcessEngine:
    """``RolloutEngine`` over an ``HFPolicy`` in this process. Weight sync is a no-op:
    the engine always samples from the live weights."""

    def __init__(self, policy: Any, *, chunk_size: int = 1024, turn_cache: bool = True) -> None:
        self.policy = policy
        self.chunk_size = chunk_size
        self.turn_cache = turn_cache

    def generate(self, prompts: Sequence[str], params: SamplingParams, *, generator: Any = None) -> list[list[Sample]]:
        return self.policy.sample(prompts, params, generator=generator, chunk_size=self.chunk_size)

    def sync_weights(self, policy: Policy, version: int) -> Optional[Mapping[str, Any]]:
        self.policy = policy
        return None

    def open_turns(self) -> Optional[Any]:
        """A fresh ``TurnCache`` for one batch of episodes (each episode's KV cache kept between
        turns, ``evo_core/trainer/turn_cache.py``), or None when ``turn_cache`` is off or the
        policy is not an in-process HF model."""
        if not self.turn_cache or not hasattr(self.policy, "_prefill"):
            return None
        from evo_core.trainer.turn_cache import TurnCache

        return TurnCache(self.policy)

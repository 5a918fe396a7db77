"""The in-process rollout engine: samples straight from the policy being trained."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from evo_core.trainer.protocols import Policy, Sample, SamplingParams


class InProcessEngine:
    """``RolloutEngine`` over an ``HFPolicy`` in this process. Weight sync is a no-op:
    the engine always samples from the live weights."""

    def __init__(self, policy: Any, *, chunk_size: int = 1024) -> None:
        self.policy = policy
        self.chunk_size = chunk_size

    def generate(self, prompts: Sequence[str], params: SamplingParams, *, generator: Any = None) -> list[list[Sample]]:
        return self.policy.sample(prompts, params, generator=generator, chunk_size=self.chunk_size)

    def sync_weights(self, policy: Policy, version: int) -> Optional[Mapping[str, Any]]:
        self.policy = policy
        return None

"""Protocols between the trainer, the rollout engines and the harness.

``Policy`` is what gets trained; a ``RolloutEngine`` samples from it (in process,
or through an OpenAI-compatible server); a ``TrainingSession`` is a running
trainer that the harness can fork for online backtests.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Protocol, Sequence, runtime_checkable

import attrs


@attrs.frozen(kw_only=True)
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    stop: tuple[str, ...] = ()
    seed: Optional[int] = None


@attrs.frozen(kw_only=True)
class Sample:
    """One completion: text, token ids and per-token log-probs under the sampling policy."""

    prompt: str
    text: str
    prompt_ids: tuple[int, ...] = ()
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    truncated: bool = False
    finish_reason: str = "stop"  # "stop" | "length"
    # An episode's conversation as one sequence: 1 for each token of ``token_ids`` the policy
    # generated (loss, KL), 0 for the environment's tokens between its turns. Empty: all generated.
    loss_mask: tuple[int, ...] = ()

    @property
    def n_generated(self) -> int:
        """Tokens the policy generated (``len(token_ids)`` for a single completion)."""
        return sum(self.loss_mask) if self.loss_mask else len(self.token_ids)


@runtime_checkable
class Policy(Protocol):
    """A trainable language model with its tokenizer."""

    name: str

    def sample(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Sample]]:
        """``params.n`` samples per prompt, with per-token log-probs."""
        ...

    def logprobs(self, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]]) -> Any:
        """Per-token log-probs (a differentiable tensor, padded) of given completions."""
        ...

    def save(self, path: str) -> None: ...

    @classmethod
    def load(cls, path: str) -> "Policy": ...


@runtime_checkable
class RolloutEngine(Protocol):
    """Batched sampling, in process or over HTTP; both return the same ``Sample``s."""

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Sample]]: ...

    def sync_weights(self, policy: Policy, version: int) -> Optional[Mapping[str, Any]]:
        """Push new weights to the engine (no-op in process). Returns what was synced."""
        ...


@attrs.frozen(kw_only=True)
class EvalResult:
    """Held-out evaluation: per-item scores (task id -> 0/1 or fraction) and aggregates."""

    item_scores: Mapping[str, float]
    metrics: Mapping[str, Optional[float]]
    split: str = "heldout"

    @property
    def n(self) -> int:
        return len(self.item_scores)


@runtime_checkable
class TrainingSession(Protocol):
    """A live trainer. The harness forks it for online A/B backtests and asks it to
    evaluate checkpoints; neither a fork nor an evaluation writes to the run's log."""

    policy_version: int
    step: int

    def fork(self) -> "TrainingSession":
        """An independent copy: policy weights, optimizer state, RNG and data position."""
        ...

    def train_steps(self, k: int, state: Any) -> list[Mapping[str, Any]]:
        """Run ``k`` RL steps with the harness state ``state`` in force (its active
        interventions act at their stages of the step). Returns each step's metrics,
        including the step's rollout summaries under ``"rollouts"``."""
        ...

    def evaluate(self, split: str = "heldout", *, strict: bool = True, limit: Optional[int] = None) -> EvalResult:
        """Greedy/sampled evaluation on held-out tasks with the strict oracle (or the
        training verifier when ``strict`` is False)."""
        ...

    def checkpoint(self) -> Any:
        """An in-memory snapshot of the policy (and optimizer) to restore later."""
        ...

    def restore(self, snapshot: Any) -> None: ...


class VerifierFailed(RuntimeError):
    """The domain's training verifier or oracle raised: the run cannot continue."""

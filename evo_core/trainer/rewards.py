"""Rewards and masks: after the audit, the active interventions' new rewards, oracle
re-grades and masks, the guard that keeps an infrastructure error unscored, and the
trainer's own overlong filter or soft penalty."""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

from evo_core.api import RolloutBatch, RolloutItem
from evo_core.trainer.grading import audit
from evo_core.trainer.grpo import overlong_penalty
from evo_core.trainer.protocols import Sample


def rewarded(s: Any, items: list[RolloutItem], samples: list[Sample], hp: dict[str, Any], state: Any,
             step: int) -> tuple[list[RolloutItem], list[Sample]]:
    """The audit, the interventions' rewards and masks, overlong shaping (in place)."""
    audit(s, items)
    batch = RolloutBatch(step=step, items=items, hyperparameters=hp,
                         regrade=regrader(s.oracle, s.regrade_rate, len(items)))
    raw = [it.reward for it in items]
    s.interventions.rewards_and_masks(batch, state)
    for it, r in zip(items, raw):
        if r is None:  # an infrastructure error is never turned into a score
            it.reward, it.mask = None, False
    if hp["overlong"] == "filter":
        for it in items:
            if it.completion.truncated:
                it.mask = False
    elif hp["overlong"] == "soft":
        for it, smp in zip(items, samples):
            if it.reward is not None:
                it.reward += overlong_penalty(smp.n_generated, int(hp["max_new_tokens"]),
                                              int(hp["overlong_buffer"]), float(hp["overlong_penalty"]))
    return items, samples


def regrader(oracle: Any, rate: float, n: int) -> Callable[[RolloutItem], Optional[float]]:
    """The oracle for re-grades within this step's budget (``rate`` of its ``n`` rollouts) and
    the run's oracle budget; None once either is spent. An audited rollout costs no new label."""
    budget = [int(math.ceil(rate * n))]

    def regrade(item: RolloutItem) -> Optional[float]:
        if item.strict is None:
            if budget[0] <= 0 or not oracle.counts.can_pay("regrade", 1):  # this step's share, or the run's budget
                return None
            budget[0] -= 1
            item.strict = oracle.grade_one("regrade", item.task, item.completion)
        return item.strict.reward

    return regrade

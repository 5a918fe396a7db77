"""What the trainer's hooks see: one step's rollouts, and the sinks that mirror events."""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol, Sequence, runtime_checkable

import attrs

from evo_core.api.domain import Completion, Task, Verdict
from evo_events import Event


@attrs.define(kw_only=True)
class RolloutItem:
    """One rollout inside a step's batch, as the trainer's hooks see it.

    ``reward`` starts as the training verifier's reward; interventions and reward hooks
    may change it; ``mask=False`` drops it from the loss (filters, infra errors).
    ``features`` are the generic response features (``evo_core.harness.features``)."""

    rollout_id: str
    group_id: str
    task: Task
    completion: Completion
    verdict: Verdict
    reward: Optional[float]
    mask: bool = True
    strict: Optional[Verdict] = None
    features: dict[str, Any] = attrs.Factory(dict)
    notes: dict[str, Any] = attrs.Factory(dict)


@attrs.define(kw_only=True)
class RolloutBatch:
    """A step's rollouts. ``regrade`` (when the trainer offers it) grades an item with the
    strict oracle within the step's audit budget and returns its reward, or None when the
    budget is spent."""

    step: int
    items: list[RolloutItem]
    hyperparameters: dict[str, Any] = attrs.Factory(dict)
    regrade: Optional[Callable[[RolloutItem], Optional[float]]] = None


@runtime_checkable
class Sink(Protocol):
    """Mirrors events somewhere (TensorBoard, W&B, MLflow). Failures never stop training."""

    name: str
    version: str

    def handle(self, events: Sequence[Event]) -> None: ...

    def close(self) -> None: ...

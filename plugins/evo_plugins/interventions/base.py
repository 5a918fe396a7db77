"""Intervention types: typed, single-factor, reversible changes to training.

Each declares ``kind`` (its family), ``changes`` (what it touches), ``targets`` (the
diagnosis kinds it claims to fix) and ``prediction(params)`` — a falsifiable claim: the
targeted diagnosis rate falls, and a guard metric does not regress. They act only while
``state.interventions`` lists them (promotion adds them; ``InterventionReverted`` removes
them), so reverting is switching off, never editing history.

Reward/filter interventions work on a ``RolloutView``: the same summary fields whether
the rollout is live (a trainer ``RolloutItem``) or logged (``RolloutCompleted``), so the
offline backtest replays exactly the rule that would act in training.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.api import RolloutItem, Task
from evo_events import RolloutCompleted


@attrs.frozen
class RolloutView:
    rollout_id: str
    group_id: str
    task_id: str
    reward: Optional[float]
    correct: Optional[bool]
    truncated: bool
    length: int
    signals: Mapping[str, Any]
    text: str = ""

    @classmethod
    def of_item(cls, item: RolloutItem) -> "RolloutView":
        sig = {**dict(item.verdict.signals or {}), **dict(item.notes or {})}
        return cls(item.rollout_id, item.group_id, item.task.task_id, item.reward, item.verdict.correct,
                   bool(item.completion.truncated), int(item.completion.n_tokens or 0), sig,
                   item.completion.text or "")

    @classmethod
    def of_event(cls, ev: RolloutCompleted) -> "RolloutView":
        return cls(ev.event_id, ev.group_id, ev.task_id, ev.reward, ev.correct, ev.truncated, ev.length, dict(ev.signals or {}),
                   ev.response_preview or "")


class BaseIntervention:
    name: str = ""
    version: str = "1"
    kind: str = ""
    changes: str = ""
    targets: tuple[str, ...] = ()
    default_params: Mapping[str, Any] = {}
    guard_metric: str = "strict_accuracy"

    def params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return {**self.default_params, **dict(params or {})}

    def prediction(self, params: Mapping[str, Any], targets: Sequence[str] = ()) -> dict[str, Any]:
        return {"falls": list(targets or self.targets), "guard_metric": self.guard_metric, "guard": "does not regress"}

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "kind": self.kind, "changes": self.changes,
                "targets": list(self.targets), "default_params": dict(self.default_params)}

    # Reward-shaping and verifier interventions override this (None: unchanged).
    def new_reward(self, view: RolloutView, params: Mapping[str, Any]) -> Optional[float]:
        return None

    # Rollout filters override this: ids of rollouts to drop from the loss.
    def mask_ids(self, views: Sequence[RolloutView], params: Mapping[str, Any]) -> set[str]:
        return set()

    def hyperparameters(self, current: Mapping[str, Any], params: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
        return None

    def prompt_hint(self, task: Task, params: Mapping[str, Any]) -> Optional[str]:
        return None

    def task_weights(self, tasks: Sequence[Task], params: Mapping[str, Any]) -> Optional[Mapping[str, float]]:
        return None

    @property
    def replayable(self) -> bool:
        """Whether offline replay can show what it would have changed."""
        return self.kind in ("reward_shaping", "verifier", "rollout_filter")


def answer_count(view: RolloutView) -> Optional[int]:
    v = view.signals.get("answer_count")
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

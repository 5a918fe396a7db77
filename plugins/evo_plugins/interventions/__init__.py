"""The standard interventions (entry point ``evo_interventions``) and the trainer hooks
through which the active ones act.

Each trainer hook looks at ``state.interventions`` (what the gates promoted and nothing
reverted), in promotion order, and applies the matching intervention type. Reward hooks
never turn an infrastructure error (``reward is None``) into a score.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from evo_core.hookspecs import hookimpl

from .base import BaseIntervention, RolloutView
from .library import ALL, apply_to_views

__all__ = ["ALL", "BaseIntervention", "RolloutView", "apply_to_views", "catalogue", "active"]

_CATALOGUE: dict[str, BaseIntervention] = {cls.name: cls() for cls in ALL}


def catalogue() -> dict[str, BaseIntervention]:
    return dict(_CATALOGUE)


def active(state: Any, kinds: Sequence[str]) -> list[tuple[BaseIntervention, Mapping[str, Any]]]:
    """The active interventions of ``kinds`` this plugin implements, in promotion order."""
    rows = sorted((getattr(state, "interventions", {}) or {}).values(), key=lambda a: (a.since_harness_version, a.proposal_id))
    out = []
    for a in rows:
        iv = _CATALOGUE.get(a.name)
        if iv is not None and iv.kind in kinds:
            out.append((iv, dict(a.params)))
    return out


@hookimpl
def evo_register_interventions():
    return list(_CATALOGUE.values())


@hookimpl
def evo_transform_rewards(batch, state) -> None:
    acts = active(state, ("verifier", "reward_shaping"))
    if not acts:
        return
    for item in batch.items:
        if item.reward is None:
            continue  # an infrastructure error stays masked, never scored
        view = RolloutView.of_item(item)
        rewards, _ = apply_to_views(acts, [view])
        r = rewards[view.rollout_id]
        if r is not None and r != item.reward:
            item.notes.setdefault("reward_before_interventions", item.reward)
            item.notes["interventions"] = [iv.name for iv, _ in acts]
            item.reward = r


@hookimpl
def evo_filter_rollouts(batch, state) -> None:
    acts = active(state, ("rollout_filter",))
    if not acts:
        return
    views = [RolloutView.of_item(i) for i in batch.items]
    _, masked = apply_to_views(acts, views)
    for item in batch.items:
        if item.rollout_id in masked:
            item.mask = False
            item.notes["masked_by"] = [iv.name for iv, _ in acts]


@hookimpl
def evo_task_weights(tasks, state, step) -> Optional[Mapping[str, float]]:
    out: dict[str, float] = {}
    for iv, params in active(state, ("curriculum",)):
        for tid, w in (iv.task_weights(tasks, params) or {}).items():
            out[tid] = out.get(tid, 1.0) * w
    return out or None


@hookimpl
def evo_hyperparameters(params, state, step) -> Optional[Mapping[str, Any]]:
    out: dict[str, Any] = {}
    for iv, p in active(state, ("hyperparameter",)):
        out.update(iv.hyperparameters(params, p) or {})
    return out or None


@hookimpl
def evo_prompt_hint(task, state) -> Optional[str]:
    hints = [h for iv, p in active(state, ("prompt_hint",)) for h in [iv.prompt_hint(task, p)] if h]
    return "\n".join(hints) if hints else None

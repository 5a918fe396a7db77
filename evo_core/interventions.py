"""The core applies the active interventions, in promotion order, at their stage of a step.

Which are active is the fold's ``state.interventions`` (promotion adds, revert removes); what
each one does is what its class declares (``evo_core.api.interventions.EFFECTS``). A plugin
intervention therefore needs no hook of its own (there are no trainer hooks), and offline replay runs the very
same effect methods on logged rollouts.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from evo_core.api import RolloutBatch, RolloutView, Task, apply_to_views
from evo_core.api.interventions import in_order, merged_hyperparameters, prompt_hints, task_weights


class InterventionApplier:
    def __init__(self, catalogue: Mapping[str, Any]) -> None:
        self.catalogue = dict(catalogue)

    def active(self, state: Any) -> list[tuple[Any, dict[str, Any]]]:
        return in_order((getattr(state, "interventions", None) or {}).values(), self.catalogue)

    def task_weights(self, tasks: Sequence[Task], state: Any) -> Optional[dict[str, float]]:
        return task_weights(self.active(state), tasks)

    def prompt_hints(self, task: Task, state: Any) -> list[str]:
        return prompt_hints(self.active(state), task)

    def hyperparameters(self, current: Mapping[str, Any], state: Any) -> dict[str, Any]:
        return merged_hyperparameters(self.active(state), current)

    def rewards_and_masks(self, batch: RolloutBatch, state: Any) -> None:
        """New rewards, oracle re-grades (budget-limited; what the budget cannot cover is
        screened) and loss masks, on the batch's items in place. An infrastructure error
        (reward None) is never turned into a score."""
        acts = self.active(state)
        if not acts:
            return
        views = [RolloutView.of_item(it, batch.step) for it in batch.items]
        rewards, masked, regrade = apply_to_views(acts, views)
        names = [getattr(iv, "name", "?") for iv, _ in acts]
        for it in batch.items:
            if it.reward is None:
                continue
            if it.rollout_id in regrade:
                graded = batch.regrade(it) if batch.regrade is not None else None
                if graded is None:
                    masked.add(it.rollout_id)  # never paid on an unchecked flag
                else:
                    rewards[it.rollout_id] = graded
                    it.notes["regraded"] = True
            new = rewards[it.rollout_id]
            if new is not None and new != it.reward:
                it.notes.setdefault("reward_before_interventions", it.reward)
                it.notes["interventions"] = names
                it.reward = new
            if it.rollout_id in masked:
                it.mask = False
                it.notes["masked_by"] = names

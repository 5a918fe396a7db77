"""One step's result as events: defined once, for the run loop and for forked branches.

Full trajectories (text, token ids, log-probs, rewards, advantage) go to ONE blob per step
(a blob write per rollout would cost more than the step on a small model); each
``RolloutCompleted`` carries the summary the harness reads and its index in that blob."""

from __future__ import annotations

from typing import Any, Optional

from evo_core.trainer.episodes import jsonable_turns
from evo_events import BlobRef, Emitter, RolloutCompleted

TRAINER = Emitter("evo_trainer", "1")


def trajectory_payload(run_id: str, res: Any) -> dict[str, Any]:
    groups: dict[str, Any] = {}
    for it, s in zip(res.items, res.samples):
        if it.group_id not in groups:
            gold = it.task.gold if isinstance(it.task.gold, (str, int, float)) else None
            groups[it.group_id] = {"task_id": it.task.task_id, "prompt": s.prompt, "gold": gold}
    rollouts = []
    for it, s, e in zip(res.items, res.samples, res.extra):
        r = {"rollout_id": it.rollout_id, "group_id": it.group_id, "text": s.text,
             "token_ids": list(s.token_ids), "logprobs": [round(x, 5) for x in s.logprobs],
             "finish_reason": s.finish_reason, "reward": it.verdict.reward, "reward_final": it.reward,
             "mask": it.mask, "advantage": e["advantage"], "verdict": dict(it.verdict.details)}
        if it.completion.turns:  # an episode: its turns, and which of token_ids the policy generated
            r["turns"] = jsonable_turns(it.completion.turns)
            r["loss_mask"] = list(s.loss_mask)
        rollouts.append(r)
    return {"run_id": run_id, "step": res.step, "groups": groups, "rollouts": rollouts}


def rollout_events(run_id: str, res: Any, trajectory: Optional[BlobRef] = None) -> list[RolloutCompleted]:
    version = res.policy_version - (1 if res.updated else 0)  # the weights that sampled
    out = []
    for i, (it, s, e) in enumerate(zip(res.items, res.samples, res.extra)):
        adv = e["advantage"]
        out.append(RolloutCompleted(
            run_id=run_id, event_id=it.rollout_id, step=res.step, task_id=it.task.task_id, group_id=it.group_id,
            policy_version=version, reward=it.verdict.reward, correct=it.verdict.correct,
            strict_correct=it.strict.correct if it.strict is not None else None, split="train",
            infra_error=it.verdict.infra_error, truncated=s.truncated, length=s.n_generated,
            response_preview=s.text[:200], trajectory=trajectory, signals=dict(it.verdict.signals),
            reward_final=it.reward if it.mask else None, features=dict(it.features),
            train={"entropy": e["entropy"], "advantage": None if adv is None else round(adv, 5),
                   "masked": not it.mask, "trajectory_index": i},
            emitted_by=TRAINER))
    return out

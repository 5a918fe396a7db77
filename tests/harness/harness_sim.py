"""A simulated learner and run loop for harness tests (no torch, deterministic).

``SimSession`` implements ``TrainingSession``: a policy with a hedge propensity and a skill
level. Rewards go through the real trainer hooks (``evo_transform_rewards``), so an active
intervention changes what the policy learns: under the lenient reward, hedging pays and
grows; under a multi-answer penalty it shrinks. ``run_sim`` drives a ``HarnessEngine``
exactly like the run loop does (events appended, state folded, ``on_step`` per step).
"""

from __future__ import annotations

import copy
import hashlib
import math
import random
from typing import Any, Optional

from evo_core.api import Completion, RolloutBatch, RolloutItem, Task, Verdict
from evo_core.harness import build_harness
from evo_core.harness_api import StepContext
from evo_core.state import HarnessState, apply
from evo_core.store import run_stream
from evo_core.trainer.protocols import EvalResult
from evo_events import EvalCompleted, RolloutCompleted, RunFinished, RunStarted, StepCompleted


def _sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


class SimSession:
    def __init__(self, plugins: Any, *, seed: int = 0, group: int = 8, prompts: int = 8, hedge_logit: float = -2.2,
                 skill: float = 0.6, lr: float = 0.5, heldout: int = 60, audit_every: int = 2) -> None:
        self.plugins = plugins
        self.seed = seed
        self.rng = random.Random(seed)
        self.group, self.prompts = group, prompts
        self.h, self.skill, self.lr = hedge_logit, skill, lr
        self.heldout = heldout
        self.audit_every = audit_every
        self.step = 0
        self.policy_version = 0
        self.max_version = 0
        self.forks = 0
        self.restores = 0

    # -- one RL step -----------------------------------------------------------------------
    def rl_step(self, state: Optional[HarnessState]) -> list[dict[str, Any]]:
        state = state or HarnessState()
        self.step += 1
        items = []
        for g in range(self.prompts):
            a, b = self.rng.randrange(10, 99), self.rng.randrange(10, 99)
            task = Task(task_id=f"t{a}+{b}", prompt=f"{a}+{b}=", gold=a + b)
            for k in range(self.group):
                hedged = self.rng.random() < _sig(self.h)
                right = self.rng.random() < self.skill
                nums = [a + b, a + b + 1] if hedged else [a + b if right else a + b + 10]
                text = " ".join(map(str, nums))
                lenient = (a + b) in nums
                strict = len(nums) == 1 and nums[0] == a + b
                v = Verdict(reward=1.0 if lenient else 0.0, correct=lenient, signals={"answer_count": len(nums)})
                rid = hashlib.sha256(f"{self.seed}:{self.step}:{g}:{k}:{self.forks}".encode()).hexdigest()[:32]
                it = RolloutItem(rollout_id=rid, group_id=f"s{self.step}g{g}", task=task,
                                 completion=Completion(text=text, n_tokens=len(text)), verdict=v, reward=v.reward)
                if (g * self.group + k) % self.audit_every == 0:
                    it.strict = Verdict(reward=float(strict), correct=strict)
                items.append(it)
        batch = RolloutBatch(step=self.step, items=items)
        self.plugins.call("evo_transform_rewards", batch=batch, state=state)
        self.plugins.call("evo_filter_rollouts", batch=batch, state=state)
        live = [it for it in batch.items if it.mask and it.reward is not None]
        hedged_r = [it.reward for it in live if it.verdict.signals["answer_count"] > 1]
        plain_r = [it.reward for it in live if it.verdict.signals["answer_count"] == 1]
        if hedged_r and plain_r:  # the policy gradient, in one number: does hedging pay?
            self.h += self.lr * (sum(hedged_r) / len(hedged_r) - sum(plain_r) / len(plain_r))
        self.policy_version = self.max_version = self.max_version + 1
        return [{
            "rollout_id": it.rollout_id, "task_id": it.task.task_id, "group_id": it.group_id, "step": self.step,
            "policy_version": self.policy_version - 1, "reward": it.verdict.reward, "correct": it.verdict.correct,
            "strict_correct": it.strict.correct if it.strict else None, "length": it.completion.n_tokens,
            "response_preview": it.completion.text, "signals": dict(it.verdict.signals), "reward_final": it.reward,
        } for it in items]

    # -- TrainingSession -------------------------------------------------------------------
    def train_steps(self, k: int, state: Any) -> list[dict[str, Any]]:
        out = []
        for _ in range(k):
            rows = self.rl_step(state)
            out.append({"step": self.step, "reward_mean": sum(r["reward"] for r in rows) / len(rows), "rollouts": rows})
        return out

    def evaluate(self, split: str = "heldout", *, strict: bool = True, limit: Optional[int] = None) -> EvalResult:
        n = min(limit or self.heldout, self.heldout)
        rng = random.Random(f"eval:{self.seed}:{self.policy_version}")
        scores = {}
        for i in range(n):
            u = random.Random(f"item:{i}").random()  # item difficulty, fixed across branches
            hedged = rng.random() < _sig(self.h)
            scores[f"h{i}"] = 0.0 if (hedged and strict) else float(u < self.skill)
        acc = sum(scores.values()) / n
        return EvalResult(item_scores=scores, metrics={"strict_accuracy": acc, "hedge_rate": _sig(self.h)}, split=split)

    def fork(self) -> "SimSession":
        new = copy.copy(self)
        new.rng = random.Random()
        new.rng.setstate(self.rng.getstate())
        self.forks += 1
        new.forks = self.forks * 1000
        return new

    def checkpoint(self) -> dict[str, Any]:
        return {"h": self.h, "skill": self.skill}

    def restore(self, snap: dict[str, Any]) -> None:
        self.h, self.skill = snap["h"], snap["skill"]
        self.max_version += 1
        self.policy_version = self.max_version
        self.restores += 1


def run_sim(store: Any, plugins: Any, *, mode: str = "evolving", steps: int = 60, seed: int = 0, run_id: Optional[str] = None,
            eval_every: int = 10, harness: Optional[dict] = None, session: Optional[SimSession] = None) -> tuple[str, HarnessState, Any]:
    """Drive a harness over a simulated run; returns (run_id, final state, session)."""
    run_id = run_id or f"sim-{mode}-{seed}"
    hcfg = {"mode": mode, "window_steps": 10, "diagnose_every": 5,
            "backtest": {"k_steps": 8, "min_n": 30, "n_boot": 300, "regression_cap": 0.2}, **(harness or {})}
    config = {"run": {"steps": steps}, "harness": hcfg}
    stream = run_stream(run_id)
    state = HarnessState()
    session = session or SimSession(plugins, seed=seed)

    def emit(events):
        base = store.stream_version(stream)
        store.append(stream, list(events), expected_version=base)
        for i, ev in enumerate(events):
            apply(state, ev, base + i + 1)

    emit([RunStarted(run_id=run_id, config=config, config_hash="x", seed=seed, harness_mode=mode,
                     code_version="test", started_at="2026-01-01T00:00:00Z")])
    h = build_harness(hcfg, plugins, run_id=run_id, store=store)
    first = session.evaluate()
    ev0 = EvalCompleted(run_id=run_id, step=0, policy_version=0, split="heldout", n=len(first.item_scores),
                        metrics=dict(first.metrics), item_scores=dict(first.item_scores))
    emit([ev0])
    pending_evals = [ev0]
    for step in range(1, steps + 1):
        rows = session.rl_step(state)
        rollouts = [RolloutCompleted(run_id=run_id, event_id=r["rollout_id"], step=step, task_id=r["task_id"],
                                     group_id=r["group_id"], policy_version=r["policy_version"], reward=r["reward"],
                                     correct=r["correct"], strict_correct=r["strict_correct"], length=r["length"],
                                     response_preview=r["response_preview"], signals=r["signals"]) for r in rows]
        se = StepCompleted(run_id=run_id, step=step, policy_version=session.policy_version,
                           harness_version=state.harness_version,
                           metrics={"reward_mean": sum(r["reward"] for r in rows) / len(rows)})
        evals = list(pending_evals)
        pending_evals = []
        if step % eval_every == 0 or step == steps:
            res = session.evaluate()
            evals.append(EvalCompleted(run_id=run_id, step=step, policy_version=session.policy_version, split="heldout",
                                       n=len(res.item_scores), metrics=dict(res.metrics), item_scores=dict(res.item_scores)))
        emit(rollouts + [se] + [e for e in evals if e is not ev0])
        ctx = StepContext(run_id=run_id, step=step, state=state, rollouts=rollouts, step_event=se, evals=evals,
                          session=session, emit=emit, store=store, final=step == steps)
        h.on_step(ctx)
    h.on_run_end(StepContext(run_id=run_id, step=steps, state=state, rollouts=(), step_event=se, evals=(),
                             session=session, emit=emit, store=store, final=True))
    emit([RunFinished(run_id=run_id, status="completed", step=steps)])
    return run_id, state, session

"""A step's metrics, from its rollouts, samples, advantages and update statistics: the
figures ``StepCompleted`` carries (nothing domain-specific beyond the verdicts' numeric
signals, averaged as ``signal_<name>``)."""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from evo_core.api import RolloutItem
from evo_core.trainer.protocols import Sample


def mean(xs: Sequence[float]) -> Optional[float]:
    return sum(xs) / len(xs) if xs else None


def step_metrics(items: list[RolloutItem], samples: list[Sample], adv: list[Optional[float]], zero_var: set[str],
                 upd: dict[str, Any], rollout_time: float, lr: float) -> dict[str, Optional[float]]:
    graded = [it for it in items if it.reward is not None]
    rewards = [float(it.reward) for it in graded]  # type: ignore[arg-type]
    raw = [float(it.verdict.reward) for it in items if it.verdict.reward is not None]
    mu = mean(rewards)
    std = math.sqrt(sum((r - mu) ** 2 for r in rewards) / len(rewards)) if rewards and mu is not None else None
    audited = [it for it in items if it.strict is not None and it.strict.correct is not None]
    lens = [x.n_generated for x in samples]
    correct_len = [x.n_generated for it, x in zip(items, samples) if it.verdict.correct]
    wrong_len = [x.n_generated for it, x in zip(items, samples) if it.verdict.correct is False]
    groups = {it.group_id for it in items}
    gen_tokens = sum(lens)
    m: dict[str, Optional[float]] = {
        "reward_mean": mu, "reward_std": std, "reward_raw_mean": mean(raw),
        "strict_correct_rate": mean([1.0 if it.strict.correct else 0.0 for it in audited]),  # type: ignore[union-attr]
        "audited": float(len(audited)),
        "length_mean": mean([float(x) for x in lens]),
        "length_correct": mean([float(x) for x in correct_len]),
        "length_incorrect": mean([float(x) for x in wrong_len]),
        "truncation_rate": mean([1.0 if x.truncated else 0.0 for x in samples]),
        "infra_error_rate": mean([1.0 if it.verdict.reward is None else 0.0 for it in items]),
        "masked_frac": mean([0.0 if (a is not None) else 1.0 for a in adv]),
        "zero_var_frac": len(zero_var) / len(groups) if groups else None,
        "entropy": upd.get("entropy"), "clip_frac": upd.get("clip_frac"), "kl": upd.get("kl"),
        "loss": upd.get("loss"), "grad_norm": upd.get("grad_norm"), "lr": lr,
        "rollout_time_s": rollout_time, "update_time_s": upd.get("time"),
        "rollout_tokens_per_s": gen_tokens / rollout_time if rollout_time > 0 else None,
        "update_tokens_per_s": (upd["tokens"] / upd["time"]) if upd.get("time") else None,
        "n_rollouts": float(len(items)),
    }
    sig: dict[str, list[float]] = {}
    for it in items:
        for k, v in it.verdict.signals.items():
            if isinstance(v, (bool, int, float)):
                sig.setdefault(k, []).append(float(v))
    for k, vs in sig.items():
        m[f"signal_{k}"] = mean(vs)
    return m

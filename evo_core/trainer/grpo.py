"""GRPO-family pieces: group-relative advantages and the clipped policy-gradient loss.

Variants (config switches, see ``RLSection``):
- GRPO: advantage (r - mean) / std, sequence-level loss (token mean, then sequence mean);
- Dr. GRPO: no std normalisation, token sum divided by a constant (max_new_tokens);
- DAPO: clip-higher (ε_low, ε_high), token-level loss, zero-variance groups dropped.
Optional KL to a reference policy uses the k3 estimator.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import attrs


@attrs.frozen(kw_only=True)
class LossSettings:
    clip_low: float = 0.2
    clip_high: float = 0.2
    agg: str = "seq_mean_token_mean"
    norm_len: int = 1  # Dr. GRPO's constant denominator
    kl_coef: float = 0.0


def resolve(rl: Any) -> tuple[LossSettings, bool, bool]:
    """(loss settings, scale_rewards, dynamic_sampling) with the algorithm's defaults."""
    algo = rl.algorithm
    agg = rl.loss_agg or {"grpo": "seq_mean_token_mean", "dr_grpo": "seq_mean_token_sum_norm", "dapo": "token_mean"}[algo]
    clip_high = rl.clip_high if rl.clip_high is not None else (0.28 if algo == "dapo" else rl.clip_low)
    scale = rl.scale_rewards if rl.scale_rewards is not None else algo != "dr_grpo"
    dyn = rl.dynamic_sampling if rl.dynamic_sampling is not None else algo == "dapo"
    return LossSettings(clip_low=rl.clip_low, clip_high=clip_high, agg=agg, norm_len=rl.max_new_tokens,
                        kl_coef=rl.kl_coef), scale, dyn


def group_advantages(rewards: Sequence[Optional[float]], groups: Sequence[str], valid: Sequence[bool],
                     *, scale: bool, eps: float = 1e-6) -> tuple[list[Optional[float]], set[str]]:
    """Advantages within each group over its valid items (others get None), and the set of
    groups whose valid rewards are all exactly equal (zero variance: no signal)."""
    by_group: dict[str, list[int]] = {}
    for i, (g, ok) in enumerate(zip(groups, valid)):
        if ok and rewards[i] is not None:
            by_group.setdefault(g, []).append(i)
    adv: list[Optional[float]] = [None] * len(rewards)
    zero_var: set[str] = set()
    for g, idx in by_group.items():
        rs = [float(rewards[i]) for i in idx]  # type: ignore[arg-type]
        mean = sum(rs) / len(rs)
        if all(r == rs[0] for r in rs):
            zero_var.add(g)
        std = math.sqrt(sum((r - mean) ** 2 for r in rs) / (len(rs) - 1)) if len(rs) > 1 else 0.0
        for i, r in zip(idx, rs):
            adv[i] = (r - mean) / (std + eps) if scale else r - mean
    return adv, zero_var


def overlong_penalty(length: int, max_len: int, buffer: int, penalty: float) -> float:
    """DAPO's soft overlong punishment: 0 well inside the limit, ramping to -penalty at it."""
    start = max_len - buffer
    if length <= start:
        return 0.0
    if length < max_len:
        return -penalty * (length - start) / max(buffer, 1)
    return -penalty


def pg_loss(logp: Any, old_logp: Any, adv: Any, mask: Any, s: LossSettings, *, ref_logp: Any = None,
            n_seqs: int, n_tokens: float) -> tuple[Any, dict[str, float]]:
    """Clipped surrogate over a micro-batch. ``n_seqs``/``n_tokens`` are the minibatch's totals,
    so micro-batch losses add up to the minibatch loss (gradient accumulation)."""
    import torch

    ratio = torch.exp(logp - old_logp)
    a = adv[:, None]
    pg1 = -a * ratio
    pg2 = -a * torch.clamp(ratio, 1.0 - s.clip_low, 1.0 + s.clip_high)
    per_tok = torch.maximum(pg1, pg2)
    kl_tok = None
    if ref_logp is not None and s.kl_coef > 0:
        d = ref_logp - logp
        kl_tok = torch.exp(d) - d - 1.0
        per_tok = per_tok + s.kl_coef * kl_tok
    per_tok = per_tok * mask
    if s.agg == "token_mean":
        loss = per_tok.sum() / max(n_tokens, 1.0)
    elif s.agg == "seq_mean_token_sum_norm":
        loss = (per_tok.sum(-1) / s.norm_len).sum() / max(n_seqs, 1)
    else:
        loss = (per_tok.sum(-1) / mask.sum(-1).clamp(min=1.0)).sum() / max(n_seqs, 1)
    with torch.no_grad():
        clipped = ((pg2 > pg1).float() * mask).sum().item()
        stats = {"clipped_tokens": clipped,
                 "kl_sum": float((kl_tok * mask).sum().item()) if kl_tok is not None else 0.0}
    return loss, stats

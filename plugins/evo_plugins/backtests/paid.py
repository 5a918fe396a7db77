"""The backtests' pay check: would the proposal pay wrong answers more often than the control
pays them? A proposal's reward effect is replayed on rollouts (logged ones offline, the
treatment branches' online); the audited ones it lifts from unpaid to paid (and that the
arm did pay) are compared with the control's audited paid rollouts by the one-sided Fisher
test of ``evo_core.api.stats.pay_check``. A restore that pays what its group repeats passes
while the repeats are right and fails once they are not: a repair must not be the loophole."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from evo_core.api import RolloutView, apply_to_views
from evo_core.api.stats import ALPHA, PayCheck, audited, lifted, paid_reward, pay_check



def lifted_by(iv: Any, params: Mapping[str, Any], rows: Sequence[Any], pay_threshold: float = 0.0,
              *, logged: bool = True) -> list[Any]:
    """Rows the change's reward effect lifts from unpaid to paid; with ``logged``, only those
    the arm also paid (what training did, ``reward_final``), else on the replay alone."""
    if iv is None or not callable(getattr(iv, "new_reward", None)):
        return []
    rows = [r for r in rows if getattr(r, "split", "train") == "train" and getattr(r, "infra_error", None) is None]
    pool = lifted(rows, pay_threshold) if logged else [r for r in rows if r.reward is not None and r.reward <= pay_threshold]
    # a per-rollout effect is replayed on the candidates only; a mask may read the whole set
    scope = rows if callable(getattr(iv, "mask", None)) else pool
    new, masked, _ = apply_to_views([(iv, dict(params))], [RolloutView.of_event(r) for r in scope])
    up = {i for i, v in new.items() if v is not None and v > pay_threshold and i not in masked}
    return [r for r in pool if r.event_id in up]


def control_paid(rows: Iterable[Any], pay_threshold: float = 0.0) -> list[Any]:
    """The audited training rollouts the control arm paid."""
    return [r for r in audited(rows) if (paid_reward(r) or 0.0) > pay_threshold]


def check(iv: Any, params: Mapping[str, Any], treatment: Sequence[Any], control: Sequence[Any], *,
          logged: bool = True, pay_threshold: float = 0.0) -> PayCheck:
    return pay_check(lifted_by(iv, params, treatment, pay_threshold, logged=logged), control_paid(control, pay_threshold))


def ab_checks(iv: Any, params: Mapping[str, Any], treatment: Sequence[Any], control: Sequence[Any],
              pay_threshold: float = 0.0) -> tuple[PayCheck, PayCheck]:
    """The A/B's two checks of what the treatment paid because of the change, each at half
    the level (Bonferroni): against the control branches' paid rollouts, and against what the
    change would have paid on the control branches (replayed there: the same policy, not
    trained to aim at it). The second sees a restore the policy learns to exploit even where
    the verifier's own payments are all wrong."""
    paid_t = lifted_by(iv, params, treatment, pay_threshold)
    level = ALPHA / 2
    return (pay_check(paid_t, control_paid(control, pay_threshold), level, "the control branches' paid rollouts"),
            pay_check(paid_t, lifted_by(iv, params, control, pay_threshold, logged=False), level,
                      "those it would have paid on the control branches"))


def veto_reason(pc: PayCheck) -> str:
    return f"pays oracle-rejected rollouts more often than the control: {pc.describe()}"


__all__ = ["ab_checks", "check", "control_paid", "lifted_by", "veto_reason"]

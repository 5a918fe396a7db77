"""Is a diagnosis valid? A test its evidence can fail.

The training reward can be wrong in two directions, and the audited sample (the rollouts the
strict oracle labelled) shows both:

- **paid** side: rollouts training paid. The oracle *rejecting* one is overpayment.
- **unpaid** side: rollouts training did not pay. The oracle *accepting* one is underpayment.

A diagnosis names evidence (rollout ids). It is **valid** when, among its audited evidence on
one side, the oracle's verdict departs from the rest of that side in the same window, in the
direction of a wrong reward: a higher rejection rate than the other paid audited rollouts
(overpayment), or a higher acceptance rate than the other unpaid audited rollouts
(underpayment). The test is a one-sided Fisher exact test at level ``ALPHA`` (0.05). A
diagnostic that flags rollouts at random has a p-value that is uniform under the null, so it
is called valid only about 5% of the time; see ``docs/harness.md``.

The side is the one the diagnosis declares (``stats["side"]``: ``"paid"`` or ``"unpaid"``), or
else the side most of its audited evidence lies on (ties: paid).
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

import attrs

from evo_core.harness.stats import fisher_greater

ALPHA = 0.05
SIDES = ("paid", "unpaid")


def paid_reward(r: Any) -> Optional[float]:
    """What training paid a rollout: its reward after interventions (a masked rollout was paid
    nothing); None when it was never graded."""
    if r.reward is None:
        return None
    if (getattr(r, "train", None) or {}).get("masked"):
        return 0.0
    final = getattr(r, "reward_final", None)
    return final if final is not None else r.reward


def audited(rows: Iterable[Any]) -> list[Any]:
    """Training rollouts with an oracle label and a reward (the audited sample)."""
    return [r for r in rows if getattr(r, "split", "train") == "train" and getattr(r, "infra_error", None) is None
            and r.strict_correct is not None and paid_reward(r) is not None]


def side_of(r: Any, pay_threshold: float = 0.0) -> str:
    return "paid" if (paid_reward(r) or 0.0) > pay_threshold else "unpaid"


def wrongly_rewarded(r: Any, side: str) -> bool:
    """Overpaid (paid side, rejected) or underpaid (unpaid side, accepted)."""
    return (not r.strict_correct) if side == "paid" else bool(r.strict_correct)


@attrs.frozen
class Validity:
    side: str
    valid: bool
    p_value: Optional[float]
    evidence: int  # audited evidence rollouts on the side
    evidence_wrong: int  # of which wrongly rewarded
    rest: int  # the side's other audited rollouts in the window
    rest_wrong: int
    alpha: float = ALPHA

    @property
    def evidence_rate(self) -> Optional[float]:
        return self.evidence_wrong / self.evidence if self.evidence else None

    @property
    def base_rate(self) -> Optional[float]:
        return self.rest_wrong / self.rest if self.rest else None

    def to_dict(self) -> dict[str, Any]:
        return {"side": self.side, "valid": self.valid, "p_value": self.p_value, "alpha": self.alpha,
                "evidence": self.evidence, "evidence_wrong": self.evidence_wrong, "rest": self.rest,
                "rest_wrong": self.rest_wrong, "evidence_rate": self.evidence_rate, "base_rate": self.base_rate}


def diagnosis_validity(evidence: Sequence[Any], window: Sequence[Any], *, side: Optional[str] = None,
                       alpha: float = ALPHA, pay_threshold: float = 0.0) -> Optional[Validity]:
    """The validity test of one diagnosis: ``evidence`` are its rollouts, ``window`` the
    rollouts of the same window (evidence may be among them). None when no evidence is audited."""
    ev = audited(evidence)
    if not ev:
        return None
    if side not in SIDES:
        paid = sum(side_of(r, pay_threshold) == "paid" for r in ev)
        side = "paid" if paid * 2 >= len(ev) else "unpaid"
    ids = {r.event_id for r in ev}
    ev = [r for r in ev if side_of(r, pay_threshold) == side]
    rest = [r for r in audited(window) if r.event_id not in ids and side_of(r, pay_threshold) == side]
    a = sum(wrongly_rewarded(r, side) for r in ev)
    c = sum(wrongly_rewarded(r, side) for r in rest)
    p = fisher_greater(a, len(ev) - a, c, len(rest) - c) if ev else None
    return Validity(side=side, valid=p is not None and p < alpha, p_value=p, evidence=len(ev), evidence_wrong=a,
                    rest=len(rest), rest_wrong=c, alpha=alpha)

"""The pay check: does a change that raises rewards pay wrong answers more often than the
verifier does? Among the audited rollouts the change lifted from unpaid to paid, the
oracle's rejection rate against its rejection rate among the rollouts the control paid, by
a one-sided Fisher exact test at level ``ALPHA`` (the validity test's level). The live pay
watch (``evo_core.harness.paywatch``) and the backtests (through ``evo_core.api.stats``)
decide with it."""

from __future__ import annotations

from typing import Any, Iterable, Optional

import attrs

from evo_core.harness.stats import fisher_greater
from evo_core.harness.validity import ALPHA, audited, paid_reward

CHECK = "pays_rejected"  # figures["check"] of a decision taken on it


@attrs.frozen
class PayCheck:
    """The oracle's verdict on what a change paid, against what the verifier paid."""

    raised: int  # rollouts it lifted to paid (audited or not)
    paid: int  # of which audited
    paid_rejected: int
    control: int  # audited rollouts the verifier itself paid
    control_rejected: int
    p_value: Optional[float]
    alpha: float = ALPHA
    evidence: tuple[str, ...] = ()  # the audited rollouts it paid that the oracle rejects
    against: str = "those the control paid"  # what the control is, in words

    @property
    def loophole(self) -> bool:
        return self.p_value is not None and self.p_value < self.alpha

    @property
    def paid_rate(self) -> Optional[float]:
        return self.paid_rejected / self.paid if self.paid else None

    @property
    def control_rate(self) -> Optional[float]:
        return self.control_rejected / self.control if self.control else None

    def to_dict(self) -> dict[str, Any]:
        return {"check": CHECK, "raised": self.raised, "paid_audited": self.paid, "paid_rejected": self.paid_rejected,
                "control_audited": self.control, "control_rejected": self.control_rejected,
                "paid_rejection_rate": self.paid_rate, "control_rejection_rate": self.control_rate,
                "p_value": self.p_value, "alpha": self.alpha, "test": "one-sided Fisher exact", "against": self.against}

    def describe(self) -> str:
        p = "n/a" if self.p_value is None else f"{self.p_value:.3g}"
        return (f"the oracle rejects {self.paid_rejected}/{self.paid} of the audited rollouts it paid against "
                f"{self.control_rejected}/{self.control} of {self.against} (one-sided Fisher p={p}, "
                f"level {self.alpha})")


def pay_check(raised: Iterable[Any], control: Iterable[Any], alpha: float = ALPHA,
              against: str = "those the control paid") -> PayCheck:
    """Compare the oracle's rejection rate among ``raised`` (rollouts a change paid) with
    that among ``control`` (rollouts the verifier paid). Only audited rollouts count."""
    raised = list(raised)
    a_rows = [r for r in raised if r.strict_correct is not None]
    c_rows = [r for r in control if r.strict_correct is not None]
    a = sum(not r.strict_correct for r in a_rows)
    c = sum(not r.strict_correct for r in c_rows)
    p = fisher_greater(a, len(a_rows) - a, c, len(c_rows) - c) if a_rows and c_rows else None
    bad = tuple(sorted(r.event_id for r in a_rows if not r.strict_correct))
    return PayCheck(len(raised), len(a_rows), a, len(c_rows), c, p, alpha, bad, against)


def verifier_paid(rows: Iterable[Any], pay_threshold: float = 0.0) -> list[Any]:
    """Audited training rollouts the verifier paid and training paid (the control)."""
    return [r for r in audited(rows) if r.reward > pay_threshold and (paid_reward(r) or 0.0) > pay_threshold]


def lifted(rows: Iterable[Any], pay_threshold: float = 0.0) -> list[Any]:
    """Training rollouts the verifier left unpaid and training paid: some change raised them."""
    return [r for r in rows if getattr(r, "split", "train") == "train" and getattr(r, "infra_error", None) is None
            and r.reward is not None and r.reward <= pay_threshold and (paid_reward(r) or 0.0) > pay_threshold]


__all__ = ["CHECK", "PayCheck", "lifted", "pay_check", "verifier_paid"]

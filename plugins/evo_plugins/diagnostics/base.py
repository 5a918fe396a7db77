"""Shared machinery for the standard diagnostics.

A standard diagnostic computes a ``Measurement`` (its primary statistic, the evidence and
extra stats) and fires when the statistic crosses its threshold. ``measure`` exposes the
statistic even when nothing fires, so backtests can check that a fix made it fall.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.api import BaseDiagnostic as ApiBaseDiagnostic
from evo_core.api import Finding, Window
from evo_events import RolloutCompleted

MAX_EVIDENCE = 50


@attrs.frozen
class Measurement:
    value: Optional[float]
    n: int
    fired: bool
    severity: str = "warning"
    evidence: tuple[str, ...] = ()
    stats: Mapping[str, Any] = attrs.Factory(dict)
    kind: Optional[str] = None  # defaults to the diagnostic's first kind
    message: str = ""


class BaseDiagnostic(ApiBaseDiagnostic):
    """The public base (``evo_core.api.BaseDiagnostic``) with ``evaluate`` and ``measure`` both
    derived from one ``measurements`` method."""

    def measurements(self, window: Window, params: Mapping[str, Any]) -> list[Measurement]:
        raise NotImplementedError

    def evaluate(self, window: Window, params: Mapping[str, Any]) -> list[Finding]:
        p = {**self.default_params, **params}
        out = []
        for m in self.measurements(window, p):
            if not m.fired:
                continue
            stats = {"value": m.value, "n": m.n, **dict(m.stats)}
            out.append(Finding(kind=m.kind or self.kinds[0], severity=m.severity, evidence=m.evidence[:MAX_EVIDENCE],
                               stats=stats, message=m.message))
        return out

    def measure(self, window: Window, params: Mapping[str, Any], kind: Optional[str] = None) -> Optional[float]:
        p = {**self.default_params, **params}
        for m in self.measurements(window, p):
            if kind is None or (m.kind or self.kinds[0]) == kind:
                return m.value
        return None


# --- small helpers over rollouts ----------------------------------------------------------


# the last window filtered: (its rollouts, the graded training ones among them), replaced
# whole (one assignment: a reader never sees one window's rows with another's answer)
_last_train: tuple[Any, tuple[RolloutCompleted, ...]] = (None, ())


def train_rollouts(window: Window) -> list[RolloutCompleted]:
    """Graded training rollouts (infrastructure failures carry no evidence). A pass runs every
    diagnostic on one window: the window is filtered once (a one-entry cache on its rollouts,
    an immutable tuple, held by identity) and each caller gets its own list."""
    global _last_train
    rows = window.rollouts
    last = _last_train
    if last[0] is not rows:
        if not isinstance(rows, tuple):  # a mutable sequence may change under an identity key
            return [r for r in rows if r.split == "train" and r.infra_error is None]
        last = _last_train = (rows, tuple(r for r in rows if r.split == "train" and r.infra_error is None))
    return list(last[1])


def signal(r: RolloutCompleted, *names: str, default: Any = None) -> Any:
    sig = r.signals or {}
    for n in names:
        if n in sig and sig[n] is not None:
            return sig[n]
    return default


def num(v: Any) -> Optional[float]:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    return None


def halves(rows: Sequence[RolloutCompleted]) -> tuple[list[RolloutCompleted], list[RolloutCompleted]]:
    """Split a window by step into an early and a late half (for "rising"/"widening")."""
    steps = sorted({r.step for r in rows})
    if len(steps) < 2:
        return [], list(rows)
    mid = steps[len(steps) // 2]
    return [r for r in rows if r.step < mid], [r for r in rows if r.step >= mid]


def rate(rows: Sequence[Any], pred) -> Optional[float]:
    return (sum(1 for r in rows if pred(r)) / len(rows)) if rows else None


def rewarded(r: RolloutCompleted, min_reward: float = 1.0) -> bool:
    return r.reward is not None and r.reward >= min_reward

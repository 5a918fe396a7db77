"""What diagnostics read (a window of evidence) and report (findings)."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Protocol, Sequence, runtime_checkable

import attrs

from evo_events import EvalCompleted, FailureDiagnosed, RolloutCompleted, StepCompleted

STRICT_METRICS = ("strict_accuracy", "accuracy", "pass_rate", "resolve_rate")
VALIDATION_SPLITS = ("validation", "heldout")  # "heldout": what logs before the three splits called it


@attrs.frozen(kw_only=True)
class Window:
    """The evidence a diagnostic reads: recent rollouts (oldest first), step metrics and
    validation evals. Test-split evaluations never appear here."""

    run_id: str
    step: int
    rollouts: Sequence[RolloutCompleted] = ()
    steps: Sequence[StepCompleted] = ()
    evals: Sequence[EvalCompleted] = ()
    diagnoses: Sequence[FailureDiagnosed] = ()


@attrs.frozen(kw_only=True)
class Finding:
    """What a diagnostic reports; the engine turns it into ``FailureDiagnosed``."""

    kind: str
    severity: str  # "info" | "warning" | "invalid"
    evidence: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    stats: Mapping[str, Any] = attrs.Factory(dict)
    message: str = ""


@runtime_checkable
class Diagnostic(Protocol):
    """Reads a window of evidence and reports findings. Pure: same window, same findings.

    A diagnostic may also define ``measure(window, params, kind=None) -> float | None``,
    its statistic whether or not it fires (backtests check that a fix makes it fall)."""

    name: str
    version: str
    default_params: Mapping[str, Any]

    def evaluate(self, window: Window, params: Mapping[str, Any]) -> list[Finding]: ...


def strict_metric(ev: Optional[EvalCompleted], name: Optional[str] = None) -> Optional[float]:
    """The strict score of an evaluation: the named metric, a standard one, or the item mean."""
    if ev is None:
        return None
    for key in ((name,) if name else ()) + STRICT_METRICS:
        v = ev.metrics.get(key) if key else None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    if ev.item_scores:
        return sum(ev.item_scores.values()) / len(ev.item_scores)
    return None


def is_validation(ev: EvalCompleted) -> bool:
    return ev.split in VALIDATION_SPLITS and ev.branch == "main"

"""What diagnostics read (a window of evidence) and report (findings)."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Protocol, Sequence, runtime_checkable

import attrs

from evo_core.api.params import Param, declare_parameters
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

    kind: str  # one of the diagnostic's ``kinds``
    severity: str  # "info" | "warning" | "invalid"
    evidence: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    stats: Mapping[str, Any] = attrs.Factory(dict)  # "value": the statistic that fired (what retirement compares)
    message: str = ""


@runtime_checkable
class Diagnostic(Protocol):
    """Reads a window of evidence and reports findings. Pure: same window, same findings.

    Everything the engine and the standard plugins read from a diagnostic is here.
    ``BaseDiagnostic`` supplies every default; a class that does not subclass it must define
    them all (``evo_core.api.contract.check_diagnostic`` lists what is missing)."""

    name: str
    """Unique name; the key of its ``[harness.diagnostics.NAME]`` table."""
    version: str
    """Its code version, recorded with every diagnosis (``FailureDiagnosed.diagnostic_version``)."""
    kinds: tuple[str, ...]
    """The diagnosis kinds its findings report (``Finding.kind``). ``measure`` is asked by kind:
    retirement, the do-not-repeat ledger and online fingerprinting find the diagnostic
    behind a kind through this. Default (``BaseDiagnostic``): ``(name,)``."""
    parameters: Mapping[str, Param]
    """Its parameters with types and ranges (``evo_core.api.params``); the config check holds
    ``[harness.diagnostics.NAME]`` to them. Default: inferred from ``default_params``."""
    default_params: Mapping[str, Any]
    """The parameters' defaults (``BaseDiagnostic`` derives them from ``parameters``)."""
    prior: bool
    """Flaw- or domain-specific knowledge: joins only with ``harness.priors = true``. Default False."""

    def evaluate(self, window: Window, params: Mapping[str, Any]) -> list[Finding]:
        """The findings on ``window`` (``params``: defaults overlaid with the config's). Each
        finding's ``stats["value"]`` is the statistic that made it fire."""
        ...

    def measure(self, window: Window, params: Mapping[str, Any], kind: Optional[str] = None) -> Optional[float]:
        """The statistic behind diagnosis ``kind`` on ``window`` whether or not it fires (None:
        cannot tell). Backtests check that a repair makes it fall; retirement switches a repair
        off when it has not. Default: the ``stats["value"]`` of the finding of that kind, 0.0
        when none fires."""
        ...


class BaseDiagnostic:
    """The defaults of the ``Diagnostic`` contract. A subclass sets ``name``, ``version``,
    ``parameters`` (or ``default_params``) and ``kinds`` when it reports more than one kind,
    and defines ``evaluate``; defining ``measure`` too gives the statistic when nothing fires."""

    name: str = ""
    version: str = "1"
    kinds: tuple[str, ...] = ()
    parameters: Mapping[str, Param] = {}
    default_params: Mapping[str, Any] = {}
    prior: bool = False

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        declare_parameters(cls)
        if not cls.kinds and cls.__dict__.get("name"):
            cls.kinds = (cls.name,)

    def params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overlaid with ``params``."""
        return {**dict(self.default_params), **dict(params or {})}

    def evaluate(self, window: Window, params: Mapping[str, Any]) -> list[Finding]:
        raise NotImplementedError(f"{type(self).__name__}.evaluate")

    def measure(self, window: Window, params: Mapping[str, Any], kind: Optional[str] = None) -> Optional[float]:
        kind = kind or (self.kinds[0] if self.kinds else self.name)
        for f in self.evaluate(window, params):
            if f.kind == kind and isinstance(f.stats.get("value"), (int, float)):
                return float(f.stats["value"])
        return 0.0


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

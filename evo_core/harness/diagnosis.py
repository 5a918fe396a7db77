"""Diagnostics as the harness runs them, live and in replay: which are active (config
overlaid with the revisions the log promoted), how a setting resolves to a runnable
diagnostic (a code plugin or a data-only spec), running them over a window, and measuring
one diagnosis kind's statistic whether or not it fires."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_core.api import Finding, Window
from evo_core.harness.specs import SpecError, compiled_spec, validate_spec
from evo_core.state import DiagnosticSetting, HarnessState
from evo_events import FailureDiagnosed, RolloutCompleted

SEVERITY_RANK = {"info": 0, "warning": 1, "invalid": 2}


class SpecDiagnostic:
    """A data-only diagnostic spec (``evo_core.harness.specs``) behind the ``Diagnostic`` protocol."""

    def __init__(self, name: str, version: str, spec: Mapping[str, Any]) -> None:
        validate_spec(spec)
        self.name, self.version, self.spec = name, version, dict(spec)
        self._compiled = compiled_spec(self.spec)  # validated and compiled once, evaluated every pass
        self.kinds = (spec["kind"],)
        self.default_params: dict[str, Any] = {}

    def evaluate(self, window: Window, params: Mapping[str, Any]) -> list[Finding]:
        res = self._compiled.evaluate(window.rollouts)
        if not res.fired:
            return []
        return [Finding(kind=self.spec["kind"], severity=self.spec.get("severity", "warning"),
                        evidence=res.evidence, stats=res.stats,
                        message=self.spec.get("description", f"spec {self.name} v{self.version} fired"))]

    def measure(self, window: Window, params: Mapping[str, Any], kind: Optional[str] = None) -> Optional[float]:
        return self._compiled.evaluate(window.rollouts).value


Ran = list[tuple[Any, DiagnosticSetting, Finding]]
Failed = list[tuple[str, Exception]]


class Diagnoses:
    """The diagnostic side of one harness config over an installed catalogue."""

    def __init__(self, configured: Mapping[str, Mapping[str, Any]], catalogue: Mapping[str, Any]) -> None:
        self.configured = configured
        self.catalogue = catalogue
        self._specs: dict[tuple[str, str], SpecDiagnostic] = {}

    def settings(self, state: HarnessState) -> dict[str, DiagnosticSetting]:
        """Configured diagnostics overlaid with the revisions the log has promoted."""
        out: dict[str, DiagnosticSetting] = {}
        for name, params in self.configured.items():
            params = dict(params)
            if params.pop("enabled", True) is False:
                continue
            version = str(params.pop("version", "")) or ""
            out[name] = DiagnosticSetting(name, version, params, params.pop("spec", None))
        for name, setting in state.diagnostics.items():
            if setting.source == "config":
                if name not in out:
                    continue  # switched off in this config (replay with another config)
                if setting.spec is None:  # configured, never revised: the code's own version names it
                    setting = DiagnosticSetting(name, "", dict(setting.params), None, "config", setting.since_harness_version)
            out[name] = setting
        return out

    def resolve(self, setting: DiagnosticSetting) -> Optional[Any]:
        if setting.spec is not None:
            key = (setting.name, setting.version)
            if key not in self._specs:
                self._specs[key] = SpecDiagnostic(setting.name, setting.version or "spec-1", setting.spec)
            return self._specs[key]
        return self.catalogue.get(setting.name)

    def missing(self, state: HarnessState) -> list[str]:
        return [n for n, s in self.settings(state).items() if s.spec is None and n not in self.catalogue]

    def run(self, window: Window, state: HarnessState) -> tuple[Ran, Failed]:
        """Every active diagnostic over ``window`` (pure: used live, by backtests and in
        replay): the findings, and the diagnostics that raised (a bad spec included)."""
        out: Ran = []
        failed: Failed = []
        for name, setting in self.settings(state).items():
            try:
                diag = self.resolve(setting)
                if diag is None:
                    continue
                findings = diag.evaluate(window, {**dict(getattr(diag, "default_params", {}) or {}), **setting.params})
            except Exception as exc:  # SpecError included: a bad spec is the diagnostic's failure
                failed.append((name, exc))
                continue
            for f in findings or ():
                out.append((diag, setting, f))
        return out, failed

    def summary(self, window: Window, state: HarnessState) -> list[tuple[str, str, Any, tuple[str, ...]]]:
        return [(f.kind, f.severity, f.stats.get("value"), tuple(f.evidence)) for _, _, f in self.run(window, state)[0]]

    def measure(self, kind: str, window: Window, state: HarnessState) -> Optional[float]:
        """The statistic behind diagnosis ``kind`` on ``window`` (fired or not); None when no
        active diagnostic reports that kind or it cannot measure."""
        for setting in self.settings(state).values():
            try:
                diag = self.resolve(setting)
            except SpecError:
                continue
            if diag is None or kind not in tuple(getattr(diag, "kinds", ()) or (getattr(diag, "name", None),)):
                continue
            params = {**dict(getattr(diag, "default_params", {}) or {}), **setting.params}
            fn = getattr(diag, "measure", None)
            try:
                if fn is not None:
                    return fn(window, params, kind)
                return float(len([f for f in diag.evaluate(window, params) if f.kind == kind]))
            except Exception:
                return None
        return None

    def target_value(self, targets: Sequence[str], window: Window, state: HarnessState,
                     diagnoses: Sequence[FailureDiagnosed] = ()) -> float:
        """The largest statistic among the targeted diagnosis kinds: measured on ``window``,
        or as this pass's diagnoses reported it. What retirement and the ledger compare."""
        vals = [v for k in targets for v in [self.measure(k, window, state)] if isinstance(v, (int, float))]
        vals += [float(d.stats["value"]) for d in diagnoses
                 if d.kind in set(targets) and isinstance(d.stats.get("value"), (int, float))]
        return max(vals) if vals else 0.0

    def view(self, state: HarnessState, run_id: str, step: int) -> "DiagnosticsView":
        return DiagnosticsView(self, state, run_id, step)


def with_watched(state: HarnessState, diagnostic: Optional[Mapping[str, Any]], source: str = "backtest") -> HarnessState:
    """``state`` with a proposal's own diagnostic installed (to measure what it targets)."""
    if not diagnostic:
        return state
    s = state.copy()
    d = diagnostic
    s.diagnostics[d["name"]] = DiagnosticSetting(d["name"], str(d.get("version", "spec-1")), {}, dict(d["spec"]), source)
    return s


@attrs.frozen
class DiagnosticsView:
    """The active diagnostics under one harness state, over rollouts the caller holds (a
    forked branch's, a replayed history's): what a backtester measures with. A value the
    pass hands out, not a way back into it."""

    diagnoses: Diagnoses
    state: HarnessState
    run_id: str
    step: int

    def _window(self, rollouts: Sequence[RolloutCompleted]) -> Window:
        return Window(run_id=self.run_id, step=self.step, rollouts=tuple(rollouts))

    def measure(self, kind: str, rollouts: Sequence[RolloutCompleted]) -> Optional[float]:
        """The statistic behind diagnosis ``kind`` on ``rollouts`` (fired or not); None when
        no active diagnostic reports it."""
        return self.diagnoses.measure(kind, self._window(rollouts), self.state)

    def findings(self, rollouts: Sequence[RolloutCompleted]) -> list[tuple[str, str, Any, tuple[str, ...]]]:
        """(kind, severity, value, evidence) of every active diagnostic that fires on ``rollouts``."""
        return self.diagnoses.summary(self._window(rollouts), self.state)

    def resolve(self, name: str, version: str = "", params: Optional[Mapping[str, Any]] = None,
                spec: Optional[Mapping[str, Any]] = None) -> Optional[Any]:
        """A diagnostic object for a proposed setting: the installed plugin ``name``, or the
        data-only ``spec``. Raises ``SpecError`` on a malformed spec."""
        setting = DiagnosticSetting(name, version, dict(params or {}), dict(spec) if spec is not None else None, "backtest")
        return self.diagnoses.resolve(setting)

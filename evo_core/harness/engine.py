"""The harness engine: evidence → diagnoses → proposals → backtests → gates → decisions.

One engine per run, with no memory of its own: everything it knows between steps is the
fold of the log (``HarnessState``) and the evidence window (also a fold). The loop calls
``run_pass`` once per step, *before* the step is committed; the pass returns its events, and
the loop appends the step's events and the pass's in one batch. So a step and its harness
work are durable together or not at all: a crash anywhere in a pass is recovered by
recomputing the step from its checkpoint, and the pass again, deterministically.

Replay runs this same engine over recorded evidence (``evo_core.audit.replay``), with the
recorded online backtests standing in for the trainer.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import attrs
import structlog

from evo_core.api import Window, is_validation
from evo_core import faults
from evo_core.harness import mainline, proposals
from evo_core.harness.config import HarnessConfig
from evo_core.harness.decisions import ENGINE, ENGINE_VERSION, plugin_versions
from evo_core.harness.diagnosis import SEVERITY_RANK, Diagnoses
from evo_core.harness.emit import PassBuffer, jsonable
from evo_core.harness.isolation import Isolation
from evo_core.harness.ports import TrainerPort
from evo_core.harness.skills import load_skill_sources
from evo_core.harness.window import EvidenceWindow
from evo_core.state import HarnessState
from evo_events import Emitter, EvalCompleted, Event, FailureDiagnosed, HarnessPassCompleted, SkillRegistered

log = structlog.get_logger("evo.harness")

__all__ = ["HarnessEngine", "Catalog", "PassInput", "HarnessPass", "ENGINE", "ENGINE_VERSION"]


@attrs.frozen
class Catalog:
    """The installed plugins a run can use, resolved once per run, by name."""

    diagnostics: Mapping[str, Any] = attrs.Factory(dict)
    interventions: Mapping[str, Any] = attrs.Factory(dict)
    proposers: Mapping[str, Any] = attrs.Factory(dict)
    backtesters: Mapping[str, Any] = attrs.Factory(dict)
    gates: Mapping[str, Any] = attrs.Factory(dict)

    @classmethod
    def from_plugins(cls, pm: Any) -> "Catalog":
        return cls(pm.diagnostics(), pm.interventions(), pm.proposers(), pm.backtesters(), pm.gates())


@attrs.frozen
class RecordedBacktests:
    """Replay: what the trainer did for the harness in a logged run, standing in for it: the
    online backtests, by (step, proposal fingerprint, backtester), and the main-line snapshots
    the policy gate's promotions persisted, by (step, policy version)."""

    outcomes: Mapping[tuple[int, str, str], Any] = attrs.Factory(dict)
    snapshots: Mapping[tuple[int, int], Any] = attrs.Factory(dict)

    def get(self, step: int, fingerprint: str, backtester: str) -> Optional[Any]:
        return self.outcomes.get((step, fingerprint, backtester))

    def snapshot(self, step: int, policy_version: int) -> Optional[Any]:
        return self.snapshots.get((step, policy_version))


@attrs.define
class PassInput:
    step: int
    state: HarnessState  # the fold after this step's trainer events
    evidence: EvidenceWindow  # with this step's rollouts and evals added
    evals: Sequence[EvalCompleted] = ()  # this step's evaluations (only validation ones are read)
    trainer: Optional[TrainerPort] = None
    final: bool = False
    recorded: Optional[RecordedBacktests] = None
    seed: int = 0


class HarnessEngine:
    def __init__(self, config: HarnessConfig, catalog: Catalog, *, run_id: str) -> None:
        self.config = with_priors(config, catalog)
        self.catalog = catalog
        self.run_id = run_id
        self.diagnoses = Diagnoses(self.config.diagnostics, catalog.diagnostics)
        self.versions = plugin_versions(catalog)

    def run_pass(self, inp: PassInput) -> list[Event]:
        p = HarnessPass(self, inp)
        p.run()
        return p.buf.events


def with_priors(config: HarnessConfig, catalog: Catalog) -> HarnessConfig:
    """Cold (the default) runs only what the config names and the generic defaults; warm
    (``priors = true``) adds every installed diagnostic and proposer marked ``prior``: the
    flaw- and domain-specific knowledge written by hand."""
    if not config.priors:
        return config
    diagnostics = dict(config.diagnostics)
    proposers = dict(config.proposers)
    for name, d in catalog.diagnostics.items():
        if getattr(d, "prior", False):
            diagnostics.setdefault(name, {})
    for name, pr in catalog.proposers.items():
        if getattr(pr, "prior", False):
            proposers.setdefault(name, {})
    return attrs.evolve(config, diagnostics=diagnostics, proposers=proposers)


class HarnessPass:
    """One step's harness work; its events go to a buffer folded into a working state."""

    def __init__(self, engine: HarnessEngine, inp: PassInput) -> None:
        self.engine, self.inp = engine, inp
        self.config, self.catalog, self.run_id, self.step = engine.config, engine.catalog, engine.run_id, inp.step
        self.buf = PassBuffer(inp.state.copy())
        self.iso = Isolation(self.run_id, self.step, self.buf.emit, ENGINE)
        self.evidence = inp.evidence
        self.proposed = 0
        self.decided = 0

    @property
    def state(self) -> HarnessState:
        return self.buf.state

    def emit(self, *events: Event) -> None:
        self.buf.emit(*events)

    def window(self) -> Window:
        return self.evidence.window(self.step)

    # -- the pass ----------------------------------------------------------------------------
    def run(self) -> None:
        first = self.state.passes == 0
        if first:
            self._report_missing()
            self._import_skills()
        gated = set(self.state.gated_evals) | {self.state.main.eval_id}
        new_evals = [e for e in self.inp.evals if is_validation(e) and e.event_id not in gated]
        due = self.step % self.config.diagnose_every == 0 or self.inp.final or bool(new_evals)
        findings: list[FailureDiagnosed] = []
        if due:
            findings = self.diagnose()
            faults.point("harness.diagnosed")
            if self.config.evolving:
                proposals.retire(self, findings)
                proposals.proposal_round(self, findings)
        if mainline.gate_due(self, new_evals):
            active = findings if due else None
            mainline.policy_gate(self, new_evals[-1] if new_evals else self.evidence.evals[-1], active)
        self.emit(HarnessPassCompleted(run_id=self.run_id, step=self.step, harness_version=self.state.harness_version,
                                       diagnosed=due, active=tuple(d.event_id for d in findings),
                                       proposals=self.proposed, decisions=self.decided, emitted_by=ENGINE))

    def _report_missing(self) -> None:
        """Configured but not installed: said once, on the run's first pass."""
        cfg = self.config
        for name in self.engine.diagnoses.missing(self.state):
            self.iso.missing(name, "evo_register_diagnostics", "diagnostic")
        for name, params in cfg.proposers.items():
            if dict(params).get("enabled", True) is not False and name not in self.catalog.proposers:
                self.iso.missing(name, "evo_register_proposers", "proposer")
        for name in cfg.backtest.plan:
            if name not in self.catalog.backtesters:
                self.iso.missing(name, "evo_register_backtesters", "backtester")

    def _import_skills(self) -> None:
        cfg = self.config
        if not cfg.evolving or cfg.ablations.no_skill_reuse or not cfg.skills_from:
            return
        ok, skills = self.iso.call("skills_from", "load", lambda: load_skill_sources(cfg.skills_from))
        for sk in skills or () if ok else ():
            if sk["skill_id"] in self.state.skills:
                continue
            prov = dict(sk.get("provenance") or {})
            prov["imported_from"] = sk.get("origin", "")
            self.emit(SkillRegistered(run_id=self.run_id, skill_id=sk["skill_id"], name=sk["name"],
                                      bundle=dict(sk["bundle"]), provenance=prov, source_run=sk.get("source_run"),
                                      emitted_by=ENGINE))

    # -- diagnostics -------------------------------------------------------------------------
    def diagnose(self) -> list[FailureDiagnosed]:
        diags = self.engine.diagnoses
        failures: list[tuple[str, Exception]] = []
        results = diags.run(self.window(), self.state, lambda name, exc: failures.append((name, exc)))
        for name, exc in failures:
            self.iso.call(name, "evaluate", _raiser(exc))
        events: list[FailureDiagnosed] = []
        for diag, setting, f in results:
            if f.severity not in SEVERITY_RANK:
                self.iso.call(diag.name, "evaluate", _raiser(ValueError(f"severity {f.severity!r} is not info|warning|invalid")))
                continue
            version = setting.version or str(diag.version)
            events.append(FailureDiagnosed(
                run_id=self.run_id, step=self.step, kind=f.kind, severity=f.severity, diagnostic=setting.name,
                diagnostic_version=version, evidence=tuple(f.evidence), stats=jsonable(dict(f.stats)),
                message=f.message, caused_by=tuple(f.evidence)[:50], emitted_by=Emitter(setting.name, version)))
        self.emit(*events)
        self.evidence.add_diagnoses(events)
        return events


def _raiser(exc: Exception) -> Any:
    def fn() -> None:
        raise exc

    return fn

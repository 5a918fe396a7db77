"""The harness engine: evidence → diagnoses → proposals → backtests → gates → decisions.

One ``HarnessEngine`` per run. The loop calls ``on_step(ctx)`` after each step's events
are committed; every decision the engine makes is an event emitted through ``ctx.emit``
(so ``ctx.state`` stays equal to the fold of the log). Plugins are called through
isolation wrappers: a raising plugin becomes ``PluginFailed`` and the run goes on.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import structlog

from evo_core.api import Finding, Window
from evo_core.harness.config import HarnessConfig
from evo_core.harness.skills import load_skill_sources
from evo_core.harness.specs import SpecError, evaluate_spec, validate_spec
from evo_core.harness.types import (
    BacktestContext,
    BacktestOutcome,
    Candidate,
    GateContext,
    GateDecision,
    Proposal,
    ProposalContext,
    ProposalRejection,
)
from evo_core.harness.window import EvidenceWindow
from evo_core.harness_api import StepContext
from evo_core.state import DiagnosticSetting, HarnessState
from evo_events import (
    BacktestFailed,
    BacktestPassed,
    Emitter,
    EvalCompleted,
    Event,
    FailureDiagnosed,
    InterventionProposed,
    InterventionReverted,
    PluginFailed,
    Promoted,
    Rejected,
    RolloutCompleted,
    SkillRegistered,
    SkillRetired,
)

log = structlog.get_logger("evo.harness")

ENGINE_VERSION = "1"
ENGINE = Emitter("evo_harness", ENGINE_VERSION)
SEVERITY_RANK = {"info": 0, "warning": 1, "invalid": 2}
STRICT_METRICS = ("strict_accuracy", "accuracy", "pass_rate", "resolve_rate")


class SpecDiagnostic:
    """Runs a data-only diagnostic spec (see ``evo_core.harness.specs``)."""

    def __init__(self, name: str, version: str, spec: Mapping[str, Any]) -> None:
        validate_spec(spec)
        self.name, self.version, self.spec = name, version, dict(spec)
        self.kinds = (spec["kind"],)
        self.default_params: dict[str, Any] = {}

    def evaluate(self, window: Window, params: Mapping[str, Any]) -> list[Finding]:
        res = evaluate_spec(self.spec, window.rollouts)
        if not res.fired:
            return []
        return [Finding(kind=self.spec["kind"], severity=self.spec.get("severity", "warning"),
                        evidence=res.evidence, stats=res.stats,
                        message=self.spec.get("description", f"spec {self.name} v{self.version} fired"))]

    def measure(self, window: Window, params: Mapping[str, Any]) -> Optional[float]:
        return evaluate_spec(self.spec, window.rollouts).value


def strict_metric(ev: Optional[EvalCompleted], name: Optional[str] = None) -> Optional[float]:
    """Held-out strict score of an eval: the named metric, a standard one, or the item mean."""
    if ev is None:
        return None
    for key in ((name,) if name else ()) + STRICT_METRICS:
        v = ev.metrics.get(key) if key else None
        if isinstance(v, (int, float)):
            return float(v)
    if ev.item_scores:
        return sum(ev.item_scores.values()) / len(ev.item_scores)
    return None


class HarnessEngine:
    """Implements ``evo_core.harness_api.Harness``."""

    def __init__(self, config: HarnessConfig, plugins: Any, *, run_id: str, store: Any = None) -> None:
        self.config = config
        self.plugins = plugins
        self.run_id = run_id
        self.store = store
        self.window = EvidenceWindow(run_id, config.window_steps)
        self._failures: list[tuple[str, str, str, str]] = []  # plugin, hook, type, message
        self.diag_catalog = self._provider(plugins.diagnostics, "evo_register_diagnostics")
        self.interventions = self._provider(plugins.interventions, "evo_register_interventions")
        self.proposers = self._provider(plugins.proposers, "evo_register_proposers")
        self.backtesters = self._provider(plugins.backtesters, "evo_register_backtesters")
        self.gates = self._provider(plugins.gates, "evo_register_gates")
        self.active_diagnoses: list[FailureDiagnosed] = []
        self.main_snapshot: Any = None
        self.main_eval: Optional[EvalCompleted] = None
        self.main_train_reward: Optional[float] = None
        self.last_gate_step = 0
        self.last_promotion_step = -10**9
        self._rejected: dict[str, float] = {}  # fingerprint -> evidence value when rejected
        self._promoted: dict[str, dict[str, Any]] = {}  # proposal id -> targets, value, step
        self._spec_cache: dict[tuple[str, str], Any] = {}
        self._missing_reported: set[str] = set()
        self._started = False
        self._gated_evals: set[str] = set()
        if store is not None:
            self._resume_from_log()

    # -- plugin isolation ------------------------------------------------------------------
    def _provider(self, getter: Callable[[], dict[str, Any]], hook: str) -> dict[str, Any]:
        try:
            return dict(getter())
        except Exception as exc:  # the plugin manager isolates per plugin; this guards the getter
            self._failures.append(("plugin_manager", hook, type(exc).__name__, str(exc)))
            return {}

    def _guard(self, ctx: StepContext, plugin: str, hook: str, fn: Callable[[], Any]) -> tuple[bool, Any]:
        try:
            return True, fn()
        except Exception as exc:
            log.warning("plugin_failed", plugin=plugin, hook=hook, error=f"{type(exc).__name__}: {exc}")
            self._emit(ctx, [PluginFailed(run_id=self.run_id, plugin=plugin, hook=hook, error_type=type(exc).__name__,
                                          message=(str(exc) or traceback.format_exc(limit=3))[:2000], step=ctx.step,
                                          emitted_by=ENGINE)])
            return False, None

    def _emit(self, ctx: StepContext, events: Sequence[Event]) -> None:
        if events:
            ctx.emit(list(events))

    # -- resume ----------------------------------------------------------------------------
    def _resume_from_log(self) -> None:
        from evo_core.store import run_stream

        try:
            events = list(self.store.events(run_stream(self.run_id)))
        except Exception:
            return
        if not events:
            return
        self.window.prefill(events)
        self.main_eval = next((e for e in self.window.evals if e.policy_version == 0 and e.branch == "main"), None)
        proposals: dict[str, InterventionProposed] = {}
        for ev in events:
            if isinstance(ev, InterventionProposed):
                proposals[ev.event_id] = ev
            elif isinstance(ev, Rejected) and ev.fingerprint:
                self._rejected[ev.fingerprint] = float(ev.figures.get("evidence_value") or 0.0)
            elif isinstance(ev, Promoted):
                if ev.subject == "policy":
                    self.last_gate_step = ev.step
                    self.main_train_reward = ev.figures.get("train_reward", self.main_train_reward)
                    self.main_eval = next((e for e in reversed(self.window.evals)
                                           if str(e.policy_version) == ev.subject_id), self.main_eval)
                else:
                    p = proposals.get(ev.subject_id)
                    self.last_promotion_step = ev.step
                    self._promoted[ev.subject_id] = {"targets": tuple(p.targets) if p else (), "step": ev.step,
                                                     "value": ev.figures.get("target_value")}
            elif isinstance(ev, EvalCompleted):
                self._gated_evals.add(ev.event_id)

    # -- the Harness protocol --------------------------------------------------------------
    def on_step(self, ctx: StepContext) -> None:
        if self._failures:
            self._emit(ctx, [PluginFailed(run_id=self.run_id, plugin=p, hook=h, error_type=t, message=m, step=ctx.step,
                                          emitted_by=ENGINE) for p, h, t, m in self._failures])
            self._failures.clear()
        if not self._started:
            self._start(ctx)
        self.window.add_step(ctx.step, ctx.rollouts, ctx.step_event, ctx.evals)
        if self.main_train_reward is None and self.main_eval is not None and self.main_eval.policy_version == 0:
            self.main_train_reward = self._train_reward_since(-1)  # the starting checkpoint's reward
        evals = [e for e in ctx.evals if e.branch == "main" and e.event_id not in self._gated_evals]
        due = ctx.step % self.config.diagnose_every == 0 or ctx.final or bool(evals)
        if due:
            findings = self.diagnose(ctx)
            if self.config.evolving:
                self._check_retirements(ctx, findings)
                self._proposal_round(ctx, findings)
        gate_due = bool(evals) if self.config.policy_gate_every == 0 else (
            ctx.step - self.last_gate_step >= self.config.policy_gate_every and bool(self.window.evals))
        if gate_due:
            cand = evals[-1] if evals else self.window.evals[-1]
            self._policy_gate(ctx, cand)
        for e in evals:
            self._gated_evals.add(e.event_id)

    def on_run_end(self, ctx: StepContext) -> None:
        """Gate any held-out eval not yet gated; an evolving harness leaves the session on
        its main line (a rejected final branch is rolled back)."""
        evals = [e for e in ctx.evals if e.branch == "main" and e.event_id not in self._gated_evals]
        if evals:
            self.window.add_step(ctx.step, (), None, evals)
            self.diagnose(ctx)
            self._policy_gate(ctx, evals[-1])
            for e in evals:
                self._gated_evals.add(e.event_id)

    # -- start: main-line snapshot, imported skills ----------------------------------------
    def _start(self, ctx: StepContext) -> None:
        self._started = True
        self._adopt_logged_evals(ctx)
        if ctx.session is not None and self.main_snapshot is None:
            ok, snap = self._guard(ctx, "session", "checkpoint", ctx.session.checkpoint)
            self.main_snapshot = snap if ok else None
        if not self.config.evolving or self.config.ablations.no_skill_reuse or not self.config.skills_from:
            return
        have = set(ctx.state.skills)
        ok, skills = self._guard(ctx, "skills_from", "load", lambda: load_skill_sources(self.config.skills_from))
        if not ok:
            return
        events = []
        for sk in skills:
            if sk["skill_id"] in have:
                continue
            prov = dict(sk.get("provenance") or {})
            prov["imported_from"] = sk.get("origin", "")
            events.append(SkillRegistered(run_id=self.run_id, skill_id=sk["skill_id"], name=sk["name"],
                                          bundle=dict(sk["bundle"]), provenance=prov,
                                          source_run=sk.get("source_run"), emitted_by=ENGINE))
        self._emit(ctx, events)

    def _adopt_logged_evals(self, ctx: StepContext) -> None:
        """Evaluations logged before the first step (the starting checkpoint, step 0) are
        not in any StepContext: read them from the log. The starting checkpoint is the main
        line by definition."""
        store = ctx.store if ctx.store is not None else self.store
        if store is None or self.main_eval is not None:
            return
        from evo_core.store import run_stream

        current = {e.event_id for e in ctx.evals}
        try:
            logged = [e for e in store.events(run_stream(self.run_id))
                      if isinstance(e, EvalCompleted) and e.branch == "main" and e.event_id not in current
                      and e.event_id not in self._gated_evals and e.step < ctx.step]
        except Exception:
            return
        for e in logged:
            self.window.evals.append(e)
            self._gated_evals.add(e.event_id)
            if e.policy_version == 0 and self.main_eval is None:
                self.main_eval = e

    # -- diagnostics -----------------------------------------------------------------------
    def diagnostic_settings(self, state: HarnessState) -> dict[str, DiagnosticSetting]:
        """Configured diagnostics overlaid with the revisions the log has promoted."""
        out: dict[str, DiagnosticSetting] = {}
        for name, params in self.config.diagnostics.items():
            params = dict(params)
            version = str(params.pop("version", "")) or ""
            spec = params.pop("spec", None)
            out[name] = DiagnosticSetting(name, version, params, spec)
        for name, setting in state.diagnostics.items():
            if setting.source == "config" and setting.spec is None:
                # configured, never revised: the code's own version names it
                setting = DiagnosticSetting(name, "", dict(setting.params), None, "config", setting.since_harness_version)
            out[name] = setting
        return out

    def resolve_diagnostic(self, setting: DiagnosticSetting) -> Optional[Any]:
        if setting.spec is not None:
            key = (setting.name, setting.version)
            if key not in self._spec_cache:
                self._spec_cache[key] = SpecDiagnostic(setting.name, setting.version or "spec-1", setting.spec)
            return self._spec_cache[key]
        return self.diag_catalog.get(setting.name)

    def run_diagnostics(self, window: Window, state: HarnessState,
                        on_error: Optional[Callable[[str, Exception], None]] = None) -> list[tuple[Any, DiagnosticSetting, Finding]]:
        """Pure: every active diagnostic over ``window``. Used live and by backtests."""
        out = []
        for name, setting in self.diagnostic_settings(state).items():
            try:
                diag = self.resolve_diagnostic(setting)
            except SpecError as exc:
                if on_error:
                    on_error(name, exc)
                continue
            if diag is None:
                continue
            params = {**dict(getattr(diag, "default_params", {}) or {}), **setting.params}
            try:
                findings = diag.evaluate(window, params)
            except Exception as exc:
                if on_error:
                    on_error(name, exc)
                continue
            for f in findings or ():
                out.append((diag, setting, f))
        return out

    def diagnose(self, ctx: StepContext) -> list[FailureDiagnosed]:
        window = self.window.window(ctx.step)
        errors: list[Event] = []

        def on_error(name: str, exc: Exception) -> None:
            errors.append(PluginFailed(run_id=self.run_id, plugin=name, hook="evaluate", error_type=type(exc).__name__,
                                       message=str(exc)[:2000], step=ctx.step, emitted_by=ENGINE))

        for name, setting in self.diagnostic_settings(ctx.state).items():
            if setting.spec is None and name not in self.diag_catalog and name not in self._missing_reported:
                self._missing_reported.add(name)
                errors.append(PluginFailed(run_id=self.run_id, plugin=name, hook="evo_register_diagnostics",
                                           error_type="NotInstalled", message=f"diagnostic {name!r} is configured but not installed",
                                           step=ctx.step, emitted_by=ENGINE))
        results = self.run_diagnostics(window, ctx.state, on_error)
        events: list[FailureDiagnosed] = []
        for diag, setting, f in results:
            if f.severity not in SEVERITY_RANK:
                errors.append(PluginFailed(run_id=self.run_id, plugin=diag.name, hook="evaluate", error_type="BadFinding",
                                           message=f"severity {f.severity!r} is not info|warning|invalid", step=ctx.step,
                                           emitted_by=ENGINE))
                continue
            version = setting.version or str(diag.version)
            events.append(FailureDiagnosed(
                run_id=self.run_id, step=ctx.step, kind=f.kind, severity=f.severity, diagnostic=setting.name,
                diagnostic_version=version, evidence=tuple(f.evidence), stats=_jsonable(dict(f.stats)),
                message=f.message, caused_by=tuple(f.evidence)[:50], emitted_by=Emitter(setting.name, version)))
        self._emit(ctx, errors)
        self._emit(ctx, events)
        self.window.add_diagnoses(events)
        self.active_diagnoses = events
        return events

    # -- proposals -------------------------------------------------------------------------
    def _target_value(self, targets: Iterable[str], diagnoses: Sequence[FailureDiagnosed]) -> float:
        vals = [float(d.stats.get("value")) for d in diagnoses
                if d.kind in set(targets) and isinstance(d.stats.get("value"), (int, float))]
        return max(vals) if vals else 0.0

    def _filter(self, ctx: StepContext, proposals: list[Proposal], diagnoses: Sequence[FailureDiagnosed]) -> list[Proposal]:
        state = ctx.state
        active_fps = {state.proposals.get(pid, {}).get("fingerprint") for pid in state.interventions}
        promoted_fps = {e.fingerprint for e in state.ledger if e.decision == "promoted" and e.fingerprint}
        recent_targets = {t for pid, info in self._promoted.items() if pid in state.interventions
                          and ctx.step - info["step"] < self.config.window_steps for t in info["targets"]}
        out, seen = [], set()
        for p in proposals:
            fp = p.fingerprint
            if fp in seen or fp in active_fps or fp in promoted_fps:
                continue
            if p.kind == "diagnostic" and self.config.ablations.no_revision:
                continue
            if p.skill_id and self.config.ablations.no_skill_reuse:
                continue
            if p.targets and set(p.targets) <= recent_targets:
                continue  # a just-promoted change for these diagnoses needs time to act
            if fp in self._rejected:
                before = self._rejected[fp]
                now = self._target_value(p.targets, diagnoses)
                if now <= before * (1.0 + self.config.ledger_new_evidence) + 1e-9:
                    log.info("ledger_blocked", name=p.name, fingerprint=fp[:12], before=before, now=now)
                    continue
            seen.add(fp)
            out.append(p)
        return out

    def _proposal_round(self, ctx: StepContext, diagnoses: list[FailureDiagnosed]) -> None:
        actionable = [d for d in diagnoses if SEVERITY_RANK.get(d.severity, 0) >= 1]
        if not actionable or ctx.step - self.last_promotion_step < self.config.cooldown_steps:
            return
        window = self.window.window(ctx.step)
        skills = {} if self.config.ablations.no_skill_reuse else {k: s for k, s in ctx.state.skills.items() if not s.retired}
        pctx = ProposalContext(run_id=self.run_id, step=ctx.step, diagnoses=tuple(actionable), state=ctx.state,
                               window=window, config=self.config, interventions=self.interventions,
                               diagnostics=self.diag_catalog, skills=skills)
        proposals: list[Proposal] = []
        for name, params in self.config.proposers.items():
            if name == "skills" and self.config.ablations.no_skill_reuse:
                continue
            proposer = self.proposers.get(name)
            if proposer is None:
                if name not in self._missing_reported:
                    self._missing_reported.add(name)
                    self._emit(ctx, [PluginFailed(run_id=self.run_id, plugin=name, hook="evo_register_proposers",
                                                  error_type="NotInstalled", message=f"proposer {name!r} is not installed",
                                                  step=ctx.step, emitted_by=ENGINE)])
                continue
            ok, out = self._guard(ctx, name, "propose", lambda: proposer.propose(pctx, dict(params)))
            for item in (out or ()) if ok else ():
                if isinstance(item, ProposalRejection):
                    self._emit(ctx, [Rejected(run_id=self.run_id, subject="proposal", subject_id=f"{item.proposer}@{ctx.step}",
                                              step=ctx.step, gate="parse", harness_version=ctx.state.harness_version,
                                              reasons=(item.reason,), figures={"raw": item.raw},
                                              plugin_versions={name: str(proposer.version)}, emitted_by=ENGINE)])
                elif isinstance(item, Proposal):
                    proposals.append(item)
        promoted_targets: set[str] = set()
        tried = 0
        for p in self._filter(ctx, proposals, actionable):
            if tried >= self.config.max_proposals_per_round:
                break
            if p.kind != "diagnostic" and set(p.targets) & promoted_targets:
                continue  # single factor: one training change per diagnosis per round
            tried += 1
            if self._evaluate_proposal(ctx, p, actionable) and p.kind != "diagnostic":
                promoted_targets |= set(p.targets)

    def _evaluate_proposal(self, ctx: StepContext, p: Proposal, diagnoses: Sequence[FailureDiagnosed]) -> bool:
        targeted = [d for d in diagnoses if d.kind in set(p.targets)] or list(diagnoses)
        prop = InterventionProposed(
            run_id=self.run_id, step=ctx.step, kind=p.kind, name=p.name, params=_jsonable(dict(p.params)),
            targets=p.targets, prediction=_jsonable(dict(p.prediction)), rationale=p.rationale, proposer=p.proposer,
            fingerprint=p.fingerprint, skill_id=p.skill_id,
            caused_by=tuple(p.evidence) or tuple(d.event_id for d in targeted), emitted_by=ENGINE)
        self._emit(ctx, [prop])
        outcomes = self._backtest(ctx, prop.event_id, p, diagnoses)
        bt_events = []
        for o in outcomes:
            cls = BacktestPassed if o.passed else BacktestFailed
            figures = dict(o.figures)
            figures.setdefault("decision", {True: "pass", False: "fail", None: "none"}[o.passed])
            figures["backtester"] = o.backtester
            bt_events.append(cls(run_id=self.run_id, proposal_id=prop.event_id, step=ctx.step, mode=o.mode,
                                 figures=_jsonable(figures), ci=o.ci, n=o.n, reasons=o.reasons, evidence=o.evidence,
                                 caused_by=(prop.event_id,), emitted_by=Emitter(o.backtester, o.version)))
        self._emit(ctx, bt_events)
        cand = Candidate(subject="intervention", subject_id=prop.event_id, step=ctx.step, proposal=p, backtests=tuple(outcomes))
        decisions = self._run_gates(ctx, cand)
        target_value = self._target_value(p.targets, diagnoses)
        accepted = self._decide(ctx, cand, decisions, caused_by=tuple(e.event_id for e in bt_events) or (prop.event_id,),
                                proposal_event=prop, diagnoses=targeted, backtest_events=bt_events, target_value=target_value)
        # a reused skill that failed its fingerprint check in the online A/B is retired
        if p.skill_id and any(o.mode == "online" and o.figures.get("fingerprint_ok") is False for o in outcomes):
            self._emit(ctx, [SkillRetired(run_id=self.run_id, skill_id=p.skill_id, step=ctx.step,
                                          reason="fingerprint check failed: the targeted diagnosis did not fall in treatment",
                                          evidence=tuple(e.event_id for e in bt_events), emitted_by=ENGINE)])
        return accepted

    def _backtest(self, ctx: StepContext, proposal_id: str, p: Proposal, diagnoses: Sequence[FailureDiagnosed]) -> list[BacktestOutcome]:
        bcfg = self.config.backtest
        bctx = BacktestContext(run_id=self.run_id, step=ctx.step, state=ctx.state, window=self.window.window(ctx.step),
                               config=self.config, interventions=self.interventions, diagnostics=self.diag_catalog,
                               diagnoses=tuple(diagnoses), session=ctx.session, seed=bcfg.seed + ctx.step,
                               history=tuple(self.window.history()), diagnose=self._diagnose_window,
                               measure=self.measure_kind, resolve=self.resolve_diagnostic)
        plan = []
        if bcfg.offline:
            plan.append("offline_replay")
        if bcfg.online and not self.config.ablations.no_online_backtest and ctx.session is not None and p.kind != "diagnostic":
            plan.append("online_ab")
        outcomes: list[BacktestOutcome] = []
        for name in plan:
            bt = self.backtesters.get(name)
            if bt is None:
                outcomes.append(BacktestOutcome(backtester=name, mode=name.split("_")[0], passed=False,
                                                reasons=(f"backtester {name!r} is not installed",)))
                continue
            ok, res = self._guard(ctx, name, "backtest", lambda: bt.backtest(p, bctx))
            if not ok or res is None:
                outcomes.append(BacktestOutcome(backtester=name, mode="online" if "online" in name else "offline",
                                                passed=False, reasons=(f"backtester {name} raised; see PluginFailed",)))
                break
            outcomes.append(res)
            if res.passed is False:
                break  # no point paying for the online fork after a failed replay
        return outcomes

    def _diagnose_window(self, window: Window, state: HarnessState) -> list[tuple[str, str, Any, tuple[str, ...]]]:
        return [(f.kind, f.severity, f.stats.get("value"), tuple(f.evidence)) for _, _, f in self.run_diagnostics(window, state)]

    def measure_kind(self, kind: str, window: Window, state: HarnessState) -> Optional[float]:
        """The statistic behind diagnosis ``kind`` on ``window`` (fired or not)."""
        for name, setting in self.diagnostic_settings(state).items():
            try:
                diag = self.resolve_diagnostic(setting)
            except SpecError:
                continue
            if diag is None or kind not in tuple(getattr(diag, "kinds", ()) or ()):
                continue
            params = {**dict(getattr(diag, "default_params", {}) or {}), **setting.params}
            fn = getattr(diag, "measure", None)
            try:
                if fn is not None:
                    try:
                        return fn(window, params, kind)
                    except TypeError:
                        return fn(window, params)
                return float(len([f for f in diag.evaluate(window, params) if f.kind == kind]))
            except Exception:
                return None
        return None

    # -- gates -----------------------------------------------------------------------------
    def _run_gates(self, ctx: StepContext, cand: Candidate) -> list[GateDecision]:
        gctx = GateContext(run_id=self.run_id, step=ctx.step, state=ctx.state, config=self.config,
                           diagnoses=tuple(self.active_diagnoses))
        decisions = []
        for name, params in self.config.gates.items():
            params = dict(params)
            if params.pop("enabled", True) is False:
                continue
            gate = self.gates.get(name)
            if gate is None:
                decisions.append(GateDecision(gate=name, passed=False, veto=True,
                                              reasons=(f"gate {name!r} is configured but not installed",)))
                continue
            if cand.subject not in getattr(gate, "subjects", ("intervention", "policy")):
                continue
            ok, d = self._guard(ctx, name, "decide", lambda: gate.decide(cand, gctx, dict(params)))
            if not ok or d is None:
                decisions.append(GateDecision(gate=name, passed=False, veto=True, reasons=(f"gate {name} raised",)))
                continue
            decisions.append(d)
        return decisions

    def plugin_versions(self) -> dict[str, str]:
        out = {"harness_engine": ENGINE_VERSION}
        for prefix, cat in (("diagnostic", self.diag_catalog), ("intervention", self.interventions),
                            ("proposer", self.proposers), ("backtester", self.backtesters), ("gate", self.gates)):
            for n, obj in cat.items():
                out[f"{prefix}:{n}"] = str(getattr(obj, "version", "?"))
        return out

    def _decide(self, ctx: StepContext, cand: Candidate, decisions: list[GateDecision], *, caused_by: tuple[str, ...],
                proposal_event: Optional[InterventionProposed] = None, diagnoses: Sequence[FailureDiagnosed] = (),
                backtest_events: Sequence[Event] = (), target_value: float = 0.0, figures: Optional[dict] = None) -> bool:
        real = [d for d in decisions if not d.abstain]
        vetoes = [d for d in real if d.veto]
        failed = [d for d in real if not d.passed]
        accepted = bool(real) and not vetoes and not failed
        gate_names = "+".join(d.gate for d in real) or "none"
        h = ctx.state.harness_version
        figs = dict(figures or {})
        figs["gates"] = {d.gate: {"passed": d.passed, "veto": d.veto, "reasons": list(d.reasons),
                                  "figures": _jsonable(dict(d.figures)), "version": d.version} for d in decisions}
        if cand.subject == "intervention":
            figs["target_value"] = target_value
        versions = self.plugin_versions()
        if accepted:
            reasons = tuple(r for d in real for r in d.reasons)
            if cand.subject == "intervention":
                p = cand.proposal
                assert p is not None and proposal_event is not None
                skill_id = p.skill_id or f"skill-{proposal_event.event_id[:12]}"
                prom = Promoted(run_id=self.run_id, subject="intervention", subject_id=cand.subject_id, step=ctx.step,
                                gate=gate_names, harness_version_before=h, harness_version_after=h + 1, reasons=reasons,
                                plugin_versions=versions, skill_id=skill_id, figures=_jsonable(figs), caused_by=caused_by,
                                emitted_by=ENGINE)
                events: list[Event] = [prom]
                if not p.skill_id:
                    events.append(self._skill_event(ctx, p, proposal_event, prom, diagnoses, backtest_events, decisions, skill_id))
                self._emit(ctx, events)
                self.last_promotion_step = ctx.step
                self._promoted[cand.subject_id] = {"targets": tuple(p.targets), "step": ctx.step, "value": target_value}
                log.info("promoted", subject="intervention", name=p.name, harness_version=h + 1, step=ctx.step)
            else:
                self._emit(ctx, [Promoted(run_id=self.run_id, subject="policy", subject_id=cand.subject_id, step=ctx.step,
                                          gate=gate_names, harness_version_before=h, harness_version_after=h, reasons=reasons,
                                          plugin_versions=versions, figures=_jsonable(figs), caused_by=caused_by,
                                          emitted_by=ENGINE)])
            return True
        reasons = tuple(f"{d.gate}: {r}" for d in vetoes + [d for d in failed if d not in vetoes] for r in (d.reasons or ("failed",)))
        if not real:
            reasons = ("no gate decided on this candidate",)
        fp = cand.proposal.fingerprint if cand.proposal is not None else None
        if cand.subject == "intervention":
            figs["evidence_value"] = target_value
        self._emit(ctx, [Rejected(run_id=self.run_id, subject=cand.subject, subject_id=cand.subject_id, step=ctx.step,
                                  gate=gate_names, harness_version=h, reasons=reasons, fingerprint=fp,
                                  plugin_versions=versions, figures=_jsonable(figs), caused_by=caused_by, emitted_by=ENGINE)])
        if fp:
            self._rejected[fp] = target_value
        log.info("rejected", subject=cand.subject, id=cand.subject_id, reasons=reasons[:3], step=ctx.step)
        return False

    def _skill_event(self, ctx: StepContext, p: Proposal, prop: InterventionProposed, prom: Promoted,
                     diagnoses: Sequence[FailureDiagnosed], backtests: Sequence[Event], decisions: Sequence[GateDecision],
                     skill_id: str) -> SkillRegistered:
        settings = self.diagnostic_settings(ctx.state)
        diag_bundle = {}
        for d in diagnoses:
            s = settings.get(d.diagnostic)
            diag_bundle[d.diagnostic] = {"version": d.diagnostic_version, "kind": d.kind,
                                         "params": dict(s.params) if s else {}, "spec": s.spec if s else None}
        bundle = {
            "intervention": {"kind": p.kind, "name": p.name, "params": dict(p.params), "targets": list(p.targets)},
            "diagnostics": diag_bundle,
            "preconditions": {"diagnoses": sorted(set(p.targets)), "min_severity": "warning"},
            "expected_effect": dict(p.prediction),
        }
        provenance = {
            "run_id": self.run_id, "step": ctx.step, "harness_version": prom.harness_version_after,
            "evidence": sorted({e for d in diagnoses for e in d.evidence})[:200],
            "diagnoses": [d.event_id for d in diagnoses], "proposal": prop.event_id, "proposer": p.proposer,
            "backtests": [b.event_id for b in backtests], "promotion": prom.event_id,
            "gates": {d.gate: {"passed": d.passed, "version": d.version} for d in decisions},
            "plugin_versions": self.plugin_versions(),
        }
        return SkillRegistered(run_id=self.run_id, skill_id=skill_id, name=p.name, bundle=_jsonable(bundle),
                               provenance=_jsonable(provenance), source_run=self.run_id, caused_by=(prom.event_id,),
                               emitted_by=ENGINE)

    # -- skills that stop working are retired ----------------------------------------------
    def _check_retirements(self, ctx: StepContext, findings: Sequence[FailureDiagnosed]) -> None:
        events: list[Event] = []
        h = ctx.state.harness_version
        for pid, active in list(ctx.state.interventions.items()):
            info = self._promoted.get(pid)
            if info is None or ctx.step - info["step"] < 2 * self.config.window_steps:
                continue
            now = self._target_value(info["targets"], findings)
            before = info.get("value") or 0.0
            if now > 0 and now >= before:
                reason = (f"fingerprint check failed: {'/'.join(info['targets'])} still at {now:.3f} "
                          f"(was {before:.3f} when promoted at step {info['step']})")
                if active.skill_id and active.skill_id in ctx.state.skills and not ctx.state.skills[active.skill_id].retired:
                    events.append(SkillRetired(run_id=self.run_id, skill_id=active.skill_id, reason=reason, step=ctx.step,
                                               evidence=tuple(d.event_id for d in findings if d.kind in info["targets"]),
                                               emitted_by=ENGINE))
                events.append(InterventionReverted(run_id=self.run_id, proposal_id=pid, step=ctx.step,
                                                   harness_version_before=h, harness_version_after=h + 1, reason=reason,
                                                   emitted_by=ENGINE))
                h += 1
                self._promoted.pop(pid, None)
        self._emit(ctx, events)

    # -- the policy gate -------------------------------------------------------------------
    def _train_reward_since(self, step: int) -> Optional[float]:
        vals = [r.reward for r in self.window.rollouts() if r.step > step and r.reward is not None and r.split == "train"]
        return sum(vals) / len(vals) if vals else None

    def _policy_gate(self, ctx: StepContext, ev: EvalCompleted) -> None:
        metric = (self.config.gates.get("policy") or {}).get("metric")
        if self.main_eval is None and ev.policy_version == 0:
            self.main_eval = ev  # the starting checkpoint is the main line by definition
            self.main_train_reward = self._train_reward_since(-1)
            return
        train_reward = self._train_reward_since(self.last_gate_step)
        cand = Candidate(subject="policy", subject_id=str(ev.policy_version), step=ctx.step, eval=ev,
                         main_eval=self.main_eval, train_reward=train_reward, main_train_reward=self.main_train_reward,
                         rollouts=tuple(r for r in self.window.rollouts() if r.step > self.last_gate_step))
        decisions = self._run_gates(ctx, cand)
        figures = {"candidate_strict": strict_metric(ev, metric), "main_strict": strict_metric(self.main_eval, metric),
                   "train_reward": train_reward, "main_train_reward": self.main_train_reward,
                   "main_policy_version": self.main_eval.policy_version if self.main_eval else None}
        # What a rejection does to training: "veto" (default, evolving) puts the main line back
        # only when a validity veto fired — an invalid branch is never continued; "reject" also
        # after a plain score drop; "never" (default, fixed: a static recipe trains one line and
        # only picks which checkpoints to ship) leaves training alone.
        restore_on = (self.config.gates.get("policy") or {}).get("restore_on") or ("veto" if self.config.evolving else "never")
        vetoed = any(d.veto for d in decisions if not d.abstain)
        figures["restore_on"] = restore_on
        accepted = self._decide(ctx, cand, decisions, caused_by=(ev.event_id,) + tuple(d.event_id for d in self.active_diagnoses),
                                figures=figures)
        self.last_gate_step = ctx.step
        if accepted:
            self.main_eval = ev
            self.main_train_reward = train_reward
            if ctx.session is not None:
                ok, snap = self._guard(ctx, "session", "checkpoint", ctx.session.checkpoint)
                if ok:
                    self.main_snapshot = snap
        elif ctx.session is not None and self.main_snapshot is not None and (
                restore_on == "reject" or (restore_on == "veto" and vetoed)):
            # the main line stays, and training continues from it
            self._guard(ctx, "session", "restore", lambda: ctx.session.restore(self.main_snapshot))


def _jsonable(obj: Any) -> Any:
    """Coerce plugin output into canonical-JSON-safe data (tuples → lists, keys → str)."""
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in (sorted(obj, key=str) if isinstance(obj, (set, frozenset)) else obj)]
    if isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            return None
        return obj
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return str(obj)

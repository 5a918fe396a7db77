"""Proposals: collect them from the configured proposers, filter them through the
do-not-repeat ledger, backtest each along the configured plan, let the gates decide, and
retire promoted changes whose targeted diagnosis did not fall."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import attrs
import structlog

from evo_core import faults
from evo_core.api import (
    BacktestContext,
    BacktestOutcome,
    Candidate,
    GateContext,
    Proposal,
    ProposalContext,
    ProposalRejection,
)
from evo_core.harness.decisions import ENGINE, decision_events
from evo_core.harness.diagnosis import SEVERITY_RANK
from evo_core.harness.emit import jsonable
from evo_core.harness.gating import run_gates, verdict
from evo_core.harness.mainline import records, restore_event
from evo_core.state import DiagnosticSetting, HarnessState, family
from evo_events import (
    BacktestFailed,
    BacktestInconclusive,
    BacktestPassed,
    Emitter,
    Event,
    FailureDiagnosed,
    InterventionProposed,
    InterventionReverted,
    Rejected,
    SkillRetired,
)

if TYPE_CHECKING:
    from evo_core.harness.engine import HarnessPass

log = structlog.get_logger("evo.harness")


# --- what a change is measured by ----------------------------------------------------------


def with_diagnostic(state: HarnessState, prop: Proposal, source: str = "backtest") -> HarnessState:
    """``state`` with the proposal's own diagnostic installed (to measure what it targets)."""
    if not prop.diagnostic:
        return state
    s = state.copy()
    d = prop.diagnostic
    s.diagnostics[d["name"]] = DiagnosticSetting(d["name"], str(d.get("version", "spec-1")), {}, dict(d["spec"]), source)
    return s


def target_value(p: "HarnessPass", targets: Sequence[str], state: HarnessState,
                 diagnoses: Sequence[FailureDiagnosed] = ()) -> float:
    """The largest statistic among the targeted diagnosis kinds on the current window."""
    window = p.window()
    vals = [v for k in targets for v in [p.engine.diagnoses.measure(k, window, state)] if isinstance(v, (int, float))]
    vals += [float(d.stats["value"]) for d in diagnoses
             if d.kind in set(targets) and isinstance(d.stats.get("value"), (int, float))]
    return max(vals) if vals else 0.0


# --- the round -----------------------------------------------------------------------------


def proposal_round(p: "HarnessPass", findings: Sequence[FailureDiagnosed]) -> None:
    actionable = [d for d in findings if SEVERITY_RANK.get(d.severity, 0) >= 1]
    last = p.state.last_promotion_step
    if not actionable or (last is not None and p.step - last < p.config.cooldown_steps):
        return
    collected = collect(p, actionable)
    promoted_targets: set[str] = set()
    tried = 0
    for prop in ledger_filter(p, collected, actionable):
        if tried >= p.config.max_proposals_per_round:
            break
        if prop.kind != "diagnostic" and set(prop.targets) & promoted_targets:
            continue  # single factor: one training change per diagnosis per round
        tried += 1
        if evaluate(p, prop, actionable) and prop.kind != "diagnostic":
            promoted_targets |= set(prop.targets)


def collect(p: "HarnessPass", actionable: Sequence[FailureDiagnosed]) -> list[Proposal]:
    cfg = p.config
    skills = {} if cfg.ablations.no_skill_reuse else {k: s for k, s in p.state.skills.items() if not s.retired}
    pctx = ProposalContext(run_id=p.run_id, step=p.step, diagnoses=tuple(actionable), state=p.state, window=p.window(),
                           config=cfg, interventions=p.catalog.interventions, diagnostics=p.catalog.diagnostics,
                           skills=skills, history=tuple(p.evidence.history()), seed=cfg.backtest.seed + p.step)
    out: list[Proposal] = []
    for name, params in cfg.proposers.items():
        params = dict(params)
        if params.pop("enabled", True) is False or (name == "skills" and cfg.ablations.no_skill_reuse):
            continue
        proposer = p.catalog.proposers.get(name)
        if proposer is None:
            continue  # reported once, on the run's first pass
        ok, items = p.iso.call(name, "propose", lambda: proposer.propose(pctx, params))
        for item in (items or ()) if ok else ():
            if isinstance(item, ProposalRejection):
                p.emit(Rejected(run_id=p.run_id, subject="proposal", subject_id=f"{item.proposer}@{p.step}", step=p.step,
                                gate="parse", harness_version=p.state.harness_version, reasons=(item.reason,),
                                figures={"raw": item.raw}, plugin_versions={name: str(proposer.version)},
                                emitted_by=ENGINE))
            elif isinstance(item, Proposal):
                out.append(item)
    return out


def ledger_filter(p: "HarnessPass", proposals: Sequence[Proposal], diagnoses: Sequence[FailureDiagnosed]) -> list[Proposal]:
    state, cfg = p.state, p.config
    active_fps = {state.proposals.get(pid, {}).get("fingerprint") for pid in state.interventions}
    promoted_fps = {e.fingerprint for e in state.ledger if e.decision == "promoted" and e.fingerprint}
    recent_targets = {t for a in state.interventions.values() if p.step - a.step < cfg.window_steps for t in a.targets}
    out, seen = [], set()
    for prop in proposals:
        if cfg.ablations.no_revision and prop.diagnostic:
            prop = attrs.evolve(prop, diagnostic=None)  # the repair may act; the harness adds no diagnostic
        fp = prop.fingerprint
        if fp in seen or fp in active_fps or fp in promoted_fps:
            continue
        if prop.kind == "diagnostic" and cfg.ablations.no_revision:
            continue
        if prop.skill_id and cfg.ablations.no_skill_reuse:
            continue
        if prop.targets and set(prop.targets) <= recent_targets:
            continue  # a just-promoted change for these diagnoses needs time to act
        fam = family(prop.kind, prop.name, prop.targets)
        if fp in state.rejected or fam in state.rejected_families:
            before = state.rejected.get(fp, state.rejected_families.get(fam, 0.0))
            now = target_value(p, prop.targets, with_diagnostic(state, prop), diagnoses)
            if now <= before * (1.0 + cfg.ledger_new_evidence) + 1e-9:
                log.info("ledger_blocked", name=prop.name, fingerprint=fp[:12], before=before, now=now)
                continue
        seen.add(fp)
        out.append(prop)
    return out


def evaluate(p: "HarnessPass", prop: Proposal, diagnoses: Sequence[FailureDiagnosed]) -> bool:
    targeted = [d for d in diagnoses if d.kind in set(prop.targets)] or list(diagnoses)
    prop_ev = InterventionProposed(
        run_id=p.run_id, step=p.step, kind=prop.kind, name=prop.name, params=jsonable(dict(prop.params)),
        targets=prop.targets, prediction=jsonable(dict(prop.prediction)), rationale=prop.rationale, proposer=prop.proposer,
        fingerprint=prop.fingerprint, skill_id=prop.skill_id,
        diagnostic=jsonable(dict(prop.diagnostic)) if prop.diagnostic else None,
        caused_by=tuple(d.event_id for d in targeted) + tuple(e for e in prop.evidence if e), emitted_by=ENGINE)
    p.emit(prop_ev)
    p.proposed += 1
    faults.point("harness.proposed")
    outcomes = backtest(p, prop, diagnoses)
    bt_events = [backtest_event(p, prop_ev.event_id, o) for o in outcomes]
    p.emit(*bt_events)
    cand = Candidate(subject="intervention", subject_id=prop_ev.event_id, step=p.step, proposal=prop,
                     backtests=tuple(outcomes))
    gctx = GateContext(run_id=p.run_id, step=p.step, state=p.state, config=p.config, diagnoses=tuple(records(diagnoses)))
    v = verdict(run_gates(p.catalog.gates, p.config.gates, cand, gctx, p.iso))
    value = target_value(p, prop.targets, with_diagnostic(p.state, prop), diagnoses)
    events = decision_events(p.run_id, p.step, p.state.harness_version, cand, v, p.engine.versions,
                             caused_by=tuple(e.event_id for e in bt_events) or (prop_ev.event_id,), figures={},
                             proposal_event=prop_ev, diagnoses=targeted, backtest_events=bt_events, target_value=value)
    p.emit(*events)
    p.decided += 1
    faults.point("harness.decided")
    log.info("promoted" if v.accepted else "rejected", subject="intervention", name=prop.name, step=p.step,
             harness_version=p.state.harness_version, reasons=v.reasons[:2])
    iv = p.catalog.interventions.get(prop.name)
    if v.accepted and getattr(iv, "restore_main", False):
        restore = restore_event(p, (events[0].event_id,))
        if restore is not None:
            p.emit(restore)
    if prop.skill_id and any(o.mode == "online" and o.figures.get("fingerprint_ok") is False for o in outcomes):
        p.emit(SkillRetired(run_id=p.run_id, skill_id=prop.skill_id, step=p.step,
                            reason="fingerprint check failed: the targeted diagnosis did not fall in treatment",
                            evidence=tuple(e.event_id for e in bt_events), emitted_by=ENGINE))
    return v.accepted


# --- backtests -----------------------------------------------------------------------------


def plan(p: "HarnessPass", prop: Proposal) -> list[str]:
    """The configured plan, or every installed backtester (offline ones first)."""
    cfg = p.config.backtest
    names = list(cfg.plan) if cfg.plan else sorted(p.catalog.backtesters, key=lambda n: (
        getattr(p.catalog.backtesters[n], "mode", "offline") != "offline", n))
    out = []
    for name in names:
        mode = getattr(p.catalog.backtesters.get(name), "mode", "offline")
        if mode == "offline" and not cfg.offline:
            continue
        if mode == "online" and (not cfg.online or p.config.ablations.no_online_backtest or prop.kind == "diagnostic"):
            continue
        out.append(name)
    return out


def backtest(p: "HarnessPass", prop: Proposal, diagnoses: Sequence[FailureDiagnosed]) -> list[BacktestOutcome]:
    diags = p.engine.diagnoses
    bctx = BacktestContext(run_id=p.run_id, step=p.step, state=p.state, window=p.window(), config=p.config,
                           interventions=p.catalog.interventions, diagnostics=p.catalog.diagnostics,
                           diagnoses=tuple(diagnoses), trainer=p.inp.trainer, seed=p.config.backtest.seed + p.step,
                           history=tuple(p.evidence.history()), diagnose=diags.summary, measure=diags.measure,
                           resolve=diags.resolve)
    outcomes: list[BacktestOutcome] = []
    for name in plan(p, prop):
        bt = p.catalog.backtesters.get(name)
        if bt is None:
            outcomes.append(BacktestOutcome(backtester=name, mode="offline", passed=False,
                                            reasons=(f"backtester {name!r} is not installed",)))
            break
        res = _run_one(p, bt, name, prop, bctx)
        faults.point("harness.backtested")
        outcomes.append(res)
        if res.passed is False:
            break  # no point paying for the online fork after a failed replay
    return outcomes


def _run_one(p: "HarnessPass", bt: Any, name: str, prop: Proposal, bctx: BacktestContext) -> BacktestOutcome:
    mode = getattr(bt, "mode", "offline")
    if mode == "online" and p.inp.trainer is None:
        recorded = p.inp.recorded.get(p.step, prop.fingerprint, name) if p.inp.recorded else None
        if recorded is not None:
            return recorded
        return BacktestOutcome(backtester=name, mode=mode, passed=None,
                               reasons=("no decision: no training session to fork",))
    ok, res = p.iso.call(name, "backtest", lambda: bt.backtest(prop, bctx))
    if not ok or res is None:
        return BacktestOutcome(backtester=name, mode=mode, passed=False, reasons=(f"backtester {name} raised; see PluginFailed",))
    return res


def backtest_event(p: "HarnessPass", proposal_id: str, o: BacktestOutcome) -> Event:
    cls = {True: BacktestPassed, False: BacktestFailed, None: BacktestInconclusive}[o.passed]
    figures = dict(o.figures)
    figures.setdefault("decision", {True: "pass", False: "fail", None: "none"}[o.passed])
    figures["backtester"] = o.backtester
    return cls(run_id=p.run_id, proposal_id=proposal_id, step=p.step, mode=o.mode, figures=jsonable(figures), ci=o.ci,
               n=o.n, reasons=o.reasons, evidence=o.evidence, caused_by=(proposal_id,),
               emitted_by=Emitter(o.backtester, o.version))


# --- retirement ----------------------------------------------------------------------------


def retire(p: "HarnessPass", findings: Sequence[FailureDiagnosed]) -> None:
    """A promoted change whose targeted statistic did not fall after two windows is switched
    off (and its skill retired): it did not do what it predicted."""
    for pid, active in sorted(p.state.interventions.items(), key=lambda kv: kv[1].since_harness_version):
        if p.step - active.step < 2 * p.config.window_steps:
            continue
        now = target_value(p, active.targets, p.state, findings)
        before = active.value or 0.0
        if not (now > 0 and now >= before):
            continue
        reason = (f"fingerprint check failed: {'/'.join(active.targets)} still at {now:.3f} "
                  f"(was {before:.3f} when promoted at step {active.step})")
        h = p.state.harness_version
        if active.skill_id and active.skill_id in p.state.skills and not p.state.skills[active.skill_id].retired:
            p.emit(SkillRetired(run_id=p.run_id, skill_id=active.skill_id, reason=reason, step=p.step,
                                evidence=tuple(d.event_id for d in findings if d.kind in active.targets),
                                emitted_by=ENGINE))
        p.emit(InterventionReverted(run_id=p.run_id, proposal_id=pid, step=p.step, harness_version_before=h,
                                    harness_version_after=h + 1, reason=reason, emitted_by=ENGINE))


__all__ = ["proposal_round", "collect", "ledger_filter", "evaluate", "plan", "backtest", "retire", "target_value",
           "with_diagnostic"]

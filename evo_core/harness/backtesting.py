"""Backtests of one proposal: which backtesters run and in what order, the two arms of an
online A/B, calling each backtester, and each outcome as an event.

A collaborator of the harness pass: it returns outcomes and events and never emits them."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from evo_core import faults
from evo_core.api import Arms, BacktestContext, BacktestOutcome, Proposal
from evo_core.harness.config import HarnessConfig
from evo_core.harness.diagnosis import with_watched
from evo_core.harness.emit import jsonable
from evo_core.harness.isolation import Isolation
from evo_core.harness.ports import HarnessPort
from evo_core.state import ActiveIntervention, HarnessState
from evo_events import BacktestFailed, BacktestInconclusive, BacktestPassed, Emitter, Event

CANDIDATE_ID = "backtest-candidate"  # the treatment arm's stand-in id for the proposal under test
NO_SESSION = "no decision: no training session to fork"


def plan(config: HarnessConfig, backtesters: Mapping[str, Any], prop: Proposal) -> list[str]:
    """The configured plan, or every installed backtester (offline ones first), less the modes
    this config or this proposal's kind rules out."""
    cfg = config.backtest
    names = list(cfg.plan) if cfg.plan else sorted(backtesters, key=lambda n: (
        getattr(backtesters[n], "mode", "offline") != "offline", n))
    out = []
    for name in names:
        mode = getattr(backtesters.get(name), "mode", "offline")
        if mode == "offline" and not cfg.offline:
            continue
        if mode == "online" and (not cfg.online or config.ablations.no_online_backtest or prop.kind == "diagnostic"):
            continue
        out.append(name)
    return out


def arms(state: HarnessState, proposal: Proposal, restore_main: bool) -> Arms:
    """Control and treatment both watch the proposal's own diagnostic; only treatment has the
    change in force. A change that restores the main line trains treatment from it."""
    control = with_watched(state, proposal.diagnostic)
    treatment = control.copy()
    treatment.interventions[CANDIDATE_ID] = ActiveIntervention(
        CANDIDATE_ID, proposal.kind, proposal.name, dict(proposal.params), tuple(proposal.targets),
        treatment.harness_version + 1, proposal.skill_id, state.step)
    return Arms(control=control, treatment=treatment, treatment_start=state.main.checkpoint if restore_main else None)


def run_plan(names: Sequence[str], backtesters: Mapping[str, Any], prop: Proposal, ctx: BacktestContext,
             port: HarnessPort, iso: Isolation) -> list[BacktestOutcome]:
    """Each backtester of the plan in turn; a failed one ends the plan (no point paying for an
    online fork after a failed replay). Online ones run through the port."""
    outcomes: list[BacktestOutcome] = []
    for name in names:
        bt = backtesters.get(name)
        if bt is None:
            outcomes.append(BacktestOutcome(backtester=name, mode="offline", passed=False,
                                            reasons=(f"backtester {name!r} is not installed",)))
            break
        res = _run_one(bt, name, prop, ctx, port, iso)
        faults.point("harness.backtested")
        outcomes.append(res)
        if res.passed is False:
            break
    return outcomes


def _run_one(bt: Any, name: str, prop: Proposal, ctx: BacktestContext, port: HarnessPort,
             iso: Isolation) -> BacktestOutcome:
    mode = getattr(bt, "mode", "offline")
    unpaid = getattr(port, "unpaid_backtest", None)
    why = unpaid(ctx.config.backtest.k_steps, ctx.config.backtest.replicates) \
        if mode == "online" and callable(unpaid) else None
    if why:  # an A/B the run's oracle budget cannot pay is not started: no decision, with the reason
        return BacktestOutcome(backtester=name, mode=mode, passed=None, figures={"oracle_budget_exhausted": True},
                               reasons=(f"no decision: {why}",), version=str(getattr(bt, "version", "1")))
    res = None
    with iso.guard(name, "backtest") as g:
        res = port.online_backtest(bt, prop, ctx) if mode == "online" else bt.backtest(prop, ctx)
    if g.failed:
        return BacktestOutcome(backtester=name, mode=mode, passed=False, reasons=(f"backtester {name} raised; see PluginFailed",))
    if res is None:
        return BacktestOutcome(backtester=name, mode=mode, passed=None, reasons=(NO_SESSION,))
    return res


def outcome_event(run_id: str, step: int, proposal_id: str, o: BacktestOutcome) -> Event:
    cls = {True: BacktestPassed, False: BacktestFailed, None: BacktestInconclusive}[o.passed]
    figures = dict(o.figures)
    figures.setdefault("decision", {True: "pass", False: "fail", None: "none"}[o.passed])
    figures["backtester"] = o.backtester
    return cls(run_id=run_id, proposal_id=proposal_id, step=step, mode=o.mode, figures=jsonable(figures), ci=o.ci,
               n=o.n, reasons=o.reasons, evidence=o.evidence, caused_by=(proposal_id,),
               emitted_by=Emitter(o.backtester, o.version))


__all__ = ["plan", "arms", "run_plan", "outcome_event", "CANDIDATE_ID"]

"""Backtests of one proposal: which backtesters run and in what order, the two arms of an
online A/B, the outcomes of a backtester that cannot run or raised, and each outcome as an
event.

A collaborator of the harness pass: it returns outcomes and events; it never calls a
backtester (the pass does, under its guard, online ones through its port) and never emits."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from evo_core.api import Arms, BacktestContext, BacktestOutcome, Proposal
from evo_core.harness.config import HarnessConfig
from evo_core.harness.diagnosis import with_watched
from evo_core.harness.emit import jsonable
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


def not_installed(name: str) -> BacktestOutcome:
    """A planned backtester that is not installed: a failure, which ends the plan."""
    return BacktestOutcome(backtester=name, mode="offline", passed=False,
                           reasons=(f"backtester {name!r} is not installed",))


def unpaid(bt: Any, name: str, ctx: BacktestContext, port: HarnessPort) -> Optional[BacktestOutcome]:
    """An online A/B the run's oracle budget cannot pay is not started: no decision, with the
    reason (None: it can be run)."""
    ask = getattr(port, "unpaid_backtest", None)
    why = ask(ctx.config.backtest.k_steps, ctx.config.backtest.replicates) \
        if getattr(bt, "mode", "offline") == "online" and callable(ask) else None
    if not why:
        return None
    return BacktestOutcome(backtester=name, mode="online", passed=None, figures={"oracle_budget_exhausted": True},
                           reasons=(f"no decision: {why}",), version=str(getattr(bt, "version", "1")))


def settled(bt: Any, name: str, res: Optional[BacktestOutcome], raised: bool) -> BacktestOutcome:
    """What a backtester's call came to: its outcome; a failure when it raised; no decision
    when an online one could not run here (no session to fork)."""
    mode = getattr(bt, "mode", "offline")
    if raised:
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


__all__ = ["plan", "arms", "not_installed", "unpaid", "settled", "outcome_event", "CANDIDATE_ID"]

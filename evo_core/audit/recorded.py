"""What a replay reads from a run's log besides its evidence: which events are the recorded
trajectory (the trainer's) and which the harness's decisions, and the trainer's part in
the harness's work (online backtests, main-line snapshots), to stand in for the trainer."""

from __future__ import annotations

from typing import Any, Mapping, Optional

import attrs

from evo_events import (
    BACKTEST_RESULT_TYPES,
    BACKTEST_RESULTS,
    BacktestFailed,
    BacktestInconclusive,
    BacktestPassed,
    Event,
    FailureDiagnosed,
    HarnessPassCompleted,
    InterventionProposed,
    InterventionReverted,
    PluginFailed,
    PolicyUpdated,
    Promoted,
    Rejected,
    SkillRegistered,
    SkillRetired,
    backtest_decision,
)
from evo_core.api import BacktestOutcome
from evo_core.harness.ports import Snapshot
from evo_core.trainer.step_events import TRAINER

from evo_core.audit.index import RunIndex

# What the harness writes; any other event (and anything the trainer emitted) is the trajectory.
_HARNESS_TYPES = (FailureDiagnosed, InterventionProposed, *BACKTEST_RESULTS, Promoted, Rejected,
                  InterventionReverted, SkillRegistered, SkillRetired, HarnessPassCompleted, PluginFailed)


def is_trainers(ev: Event) -> bool:
    """Whether ``ev`` is part of the recorded trajectory (the trainer's) rather than a harness
    decision. Logs written before emitters were set are told apart by event type."""
    if ev.emitted_by.name == TRAINER.name:
        return True
    if isinstance(ev, PolicyUpdated):
        return ev.target != "restore"  # a restore is the harness's decision
    return not isinstance(ev, _HARNESS_TYPES)


# --- what stands in for the trainer -------------------------------------------------------------


def outcome_of(ev: BacktestPassed | BacktestFailed | BacktestInconclusive) -> BacktestOutcome:
    """A logged backtest event as the outcome its backtester returned."""
    figures = dict(ev.figures)
    name = str(figures.pop("backtester", ev.emitted_by.name))
    passed = backtest_decision(ev)
    if figures.get("decision") == {True: "pass", False: "fail", None: "none"}[passed]:
        figures.pop("decision")  # the engine's default; it adds it back when it logs the outcome
    return BacktestOutcome(backtester=name, mode=ev.mode, passed=passed, figures=figures,
                           ci=tuple(ev.ci) if ev.ci is not None else None, n=ev.n, reasons=ev.reasons,
                           evidence=ev.evidence, version=ev.emitted_by.version)


@attrs.frozen
class RecordedPort:
    """The harness port of a replay: what the trainer did for the harness in the logged run
    stands in for it. The online backtests by (step, proposal fingerprint, backtester), and
    the main-line snapshots the policy gate's promotions persisted by (step, policy version).
    A backtest the run never made cannot be decided here."""

    outcomes: Mapping[tuple[int, str, str], BacktestOutcome] = attrs.Factory(dict)
    snapshots: Mapping[tuple[int, int], Snapshot] = attrs.Factory(dict)

    def online_backtest(self, backtester: Any, proposal: Any, ctx: Any) -> Optional[BacktestOutcome]:
        return self.outcomes.get((ctx.step, proposal.fingerprint, backtester.name))

    def snapshot(self, step: int, policy_version: int) -> Optional[Snapshot]:
        return self.snapshots.get((step, policy_version))


def recorded_stand_ins(index: RunIndex) -> RecordedPort:
    """The run's backtest outcomes by (step, proposal fingerprint, backtester), and the
    main-line snapshots its policy promotions persisted by (step, policy version)."""
    fingerprints: dict[str, str] = {}
    outcomes: dict[tuple[int, str, str], BacktestOutcome] = {}
    snapshots: dict[tuple[int, int], Snapshot] = {}
    for _, ev in index.of_type(InterventionProposed.TYPE, *BACKTEST_RESULT_TYPES, Promoted.TYPE):
        if isinstance(ev, InterventionProposed):
            fingerprints[ev.event_id] = ev.fingerprint
        elif isinstance(ev, BACKTEST_RESULTS):
            fp = fingerprints.get(ev.proposal_id)
            if fp:
                o = outcome_of(ev)
                outcomes[(ev.step, fp, o.backtester)] = o
        elif isinstance(ev, Promoted) and ev.subject == "policy" and ev.checkpoint is not None:
            try:
                version = int(ev.subject_id)
            except ValueError:
                continue
            snapshots[(ev.step, version)] = Snapshot(ev.checkpoint, ev.digest, version)
    return RecordedPort(outcomes, snapshots)

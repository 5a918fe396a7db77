"""An undecided backtest is its own event, and logs written before it existed (a
``BacktestFailed`` whose figures say ``decision: none``) read and replay the same way."""

from __future__ import annotations

import pytest

from evo_core.audit.recorded import outcome_of
from evo_core.audit.replay_diff import IdMap, first_difference, type_of
from evo_events import BacktestFailed, BacktestInconclusive, BacktestPassed, Emitter, backtest_decision, backtest_decision_of


def _bt(cls, decision, **kw):
    return cls(run_id="r", proposal_id="p" * 32, step=10, mode="offline", n=4,
               figures={"decision": decision, "backtester": "offline_replay"},
               reasons=("no decision: 4 audited invalid rollouts (< 5)",),
               emitted_by=Emitter("offline_replay", "2"), **kw)


@pytest.mark.parametrize(("cls", "decision", "expected"), [
    (BacktestPassed, "pass", True), (BacktestFailed, "fail", False),
    (BacktestInconclusive, "none", None), (BacktestFailed, "none", None),  # the last: a legacy log
])
def test_backtest_decision_reads_every_form(cls, decision, expected):
    ev = _bt(cls, decision)
    assert backtest_decision(ev) is expected
    assert outcome_of(ev).passed is expected
    assert backtest_decision_of(ev.TYPE, dict(ev.figures)) is expected  # raw payloads (the report) read alike


def test_backtest_decision_refuses_other_events():
    from evo_events import RunResumed

    with pytest.raises(TypeError, match="not a backtest result"):
        backtest_decision(RunResumed(run_id="r", from_step=1, resumed_at="2026-12-02T00:00:00Z"))


def test_a_legacy_undecided_failure_replays_as_the_inconclusive_event():
    legacy, now = _bt(BacktestFailed, "none", event_id="a" * 32), _bt(BacktestInconclusive, "none", event_id="b" * 32)
    assert type_of(legacy) == type_of(now) == BacktestInconclusive.TYPE
    assert first_difference([legacy], [now], IdMap()) is None
    failed = _bt(BacktestFailed, "fail", event_id="c" * 32)
    assert "recorded BacktestFailed, replayed BacktestInconclusive" in first_difference([failed], [now], IdMap())

"""The property issue 11 asks for: replaying a run with its own harness reproduces its
decisions exactly — every harness event of every step, event for event, apart from event
ids. Runs are real: the run loop driving the simulated learner, over seeds and config knobs
(the harness arm, run length, cadence, window, the loophole's starting strength, and a run
stopped and resumed part-way).

The comparison here is the test's own, not ``replay_diff``'s: the log's harness events are
grouped into passes by their closing ``HarnessPassCompleted``, and the replayed ids are
mapped onto the recorded ones by position."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from evo_core.audit import parse_spec, replay
from evo_core.audit.replay_diff import IdMap, first_difference
from evo_core.store import open_store, run_stream
from evo_core.trainer.step_events import TRAINER
from evo_events import (
    BacktestPassed,
    Event,
    HarnessPassCompleted,
    PolicyUpdated,
    Promoted,
    Rejected,
)
from tests.audit._sim import replay_plugins, sim_run

HEX_ID = re.compile(r"[0-9a-f]{32}")


def recorded_passes(events: list[Event]) -> list[list[Event]]:
    """The log's harness events (whatever the trainer did not emit), one list per pass."""
    out: list[list[Event]] = [[]]
    for ev in events:
        if ev.emitted_by.name == TRAINER.name:
            continue
        out[-1].append(ev)
        if isinstance(ev, HarnessPassCompleted):
            out.append([])
    assert out[-1] == [], "every harness event belongs to a pass"
    return out[:-1]


def assert_same(recorded: list[Event], replayed: list[Event]) -> None:
    assert [type(e) for e in replayed] == [type(e) for e in recorded]
    ids = {b.event_id: a.event_id for a, b in zip(recorded, replayed)}
    ids.update({k[:12]: v[:12] for k, v in list(ids.items())})

    def cite(x: Any) -> Any:  # the replayed ids as the recorded ones they stand for
        if isinstance(x, dict):
            return {k: cite(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            items = [cite(v) for v in x]
            # a list of ids is a set: where the engine sorts ids, their order is the ids' own
            return sorted(items) if items and all(isinstance(v, str) and HEX_ID.fullmatch(v) for v in x) else items
        if isinstance(x, str):
            return re.sub(r"[0-9a-f]{32}|(?<=skill-)[0-9a-f]{12}", lambda m: ids.get(m.group(0), m.group(0)), x)
        return x

    for a, b in zip(recorded, replayed):
        da, db = attrs.asdict(a), attrs.asdict(b)
        del da["event_id"], db["event_id"]
        assert cite(da) == cite(db), f"{type(a).__name__} at step {getattr(a, 'step', '?')} differs"


def check_reproduced(store: Any, run_id: str) -> list[Event]:
    events = list(store.events(run_stream(run_id)))
    res = replay(store, run_id, parse_spec([]), replay_plugins(), write=False)
    recorded = recorded_passes(events)
    assert [p.step for p in res.pass_events] == [p[-1].step for p in recorded]
    flat_rec = [e for p in recorded for e in p]
    flat_rep = [e for p in res.pass_events for e in p.replayed]
    assert_same(flat_rec, flat_rep)
    assert res.reproduced and res.divergences == []
    assert res.flips == [] and res.appeared == [] and res.vanished == []
    decisions = [e for e in flat_rec if isinstance(e, (Promoted, Rejected))]
    assert decisions and res.decisions == {"recorded_decisions": len(decisions), "replayed_decisions": len(decisions)}
    return flat_rec


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), arm=st.sampled_from(["fixed", "evolving"]), steps=st.integers(20, 40),
       diagnose_every=st.integers(3, 6), eval_every=st.sampled_from([5, 10]), window_steps=st.integers(5, 10),
       h=st.floats(-3.0, -1.0), stop_at=st.one_of(st.none(), st.integers(2, 18)))
@example(seed=0, arm="evolving", steps=40, diagnose_every=5, eval_every=10, window_steps=10, h=-2.2, stop_at=None)
@example(seed=1, arm="evolving", steps=30, diagnose_every=5, eval_every=10, window_steps=10, h=-2.2, stop_at=7)
def test_replay_with_its_own_harness_reproduces_the_run(seed, arm, steps, diagnose_every, eval_every, window_steps,
                                                        h, stop_at):
    store = open_store("memory://")
    with tempfile.TemporaryDirectory() as ck:
        run_id = sim_run(store, Path(ck), arm=arm, steps=steps, seed=seed, eval_every=eval_every,
                         diagnose_every=diagnose_every, window_steps=window_steps, stop_at=stop_at, h=h)
    check_reproduced(store, run_id)


def test_reproduction_covers_online_backtests_promotions_and_restores(tmp_path):
    """The evolving run the property's first example replays: an intervention promoted on a
    recorded online A/B, main-line snapshots and a restore to the main line all come back."""
    store = open_store("memory://")
    run_id = sim_run(store, tmp_path, arm="evolving", steps=40, seed=0)
    harness = check_reproduced(store, run_id)
    assert any(isinstance(e, BacktestPassed) and e.mode == "online" for e in harness)
    assert any(isinstance(e, Promoted) and e.subject == "intervention" for e in harness)
    assert any(isinstance(e, Promoted) and e.subject == "policy" and e.checkpoint is not None for e in harness)
    assert any(isinstance(e, PolicyUpdated) and e.target == "restore" for e in harness)


def test_a_changed_event_is_a_divergence(tmp_path):
    """Neither comparison passes anything: one changed field is found, by both."""
    store = open_store("memory://")
    run_id = sim_run(store, tmp_path, arm="fixed", steps=20, seed=5)
    res = replay(store, run_id, parse_spec([]), replay_plugins(), write=False)
    p = next(p for p in res.pass_events if any(isinstance(e, Promoted) for e in p.replayed))
    i = next(i for i, e in enumerate(p.replayed) if isinstance(e, Promoted))
    changed = list(p.replayed)
    changed[i] = attrs.evolve(changed[i], figures={**changed[i].figures, "train_reward": -1.0})
    with pytest.raises(AssertionError, match="Promoted"):
        assert_same(p.recorded, changed)
    assert first_difference(p.recorded, changed, IdMap()) == f"event {i + 1} (Promoted): figures differ"
    assert first_difference(p.recorded, p.replayed, IdMap()) is None


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), arm=st.sampled_from(["fixed", "evolving"]), steps=st.integers(20, 60),
       diagnose_every=st.integers(2, 7), eval_every=st.sampled_from([3, 5, 10]), window_steps=st.integers(3, 12),
       h=st.floats(-4.0, 0.0), stop_at=st.one_of(st.none(), st.integers(1, 30)))
def test_replay_reproduces_more_runs(seed, arm, steps, diagnose_every, eval_every, window_steps, h, stop_at):
    store = open_store("memory://")
    with tempfile.TemporaryDirectory() as ck:
        run_id = sim_run(store, Path(ck), arm=arm, steps=steps, seed=seed, eval_every=eval_every,
                         diagnose_every=diagnose_every, window_steps=window_steps,
                         stop_at=stop_at if stop_at is None or stop_at < steps else None, h=h)
    check_reproduced(store, run_id)

"""A replayed policy gate compares each candidate with the main line the *replayed* harness
kept, not with the checkpoint the recorded harness promoted: the replay folds its own
decisions into its own state.

The run is a fixed-harness run of the simulated learner: its policy gate trusts the
training reward, which the loophole keeps raising while validation strict accuracy falls.
Replayed with ``gate:policy:trust=validation`` (early stopping), the gate rejects the
checkpoints that fell below the replay's own main line."""

from __future__ import annotations

from evo_core.api import strict_metric
from evo_core.audit import parse_spec, replay
from evo_core.store import open_store, run_stream
from evo_events import EvalCompleted, Promoted, Rejected
from tests.audit._sim import replay_plugins, sim_run


def test_policy_gate_replay_follows_its_own_main_line(tmp_path):
    store = open_store("memory://")
    run_id = sim_run(store, tmp_path, arm="fixed", steps=50, seed=3)
    events = list(store.events(run_stream(run_id)))
    res = replay(store, run_id, parse_spec(["gate:policy:trust=validation"]), replay_plugins(), write=False)

    strict = {e.step: strict_metric(e) for e in events
              if isinstance(e, EvalCompleted) and e.split == "validation" and e.branch == "main"}
    recorded = [e for e in events if isinstance(e, (Promoted, Rejected)) and e.subject == "policy"]
    replayed = [e for p in res.pass_events for e in p.replayed if isinstance(e, (Promoted, Rejected)) and e.subject == "policy"]
    assert [e.step for e in replayed] == [e.step for e in recorded] == sorted(s for s in strict if s > 0)
    assert all(isinstance(e, Promoted) for e in recorded)  # the training reward kept rising

    # The replay's main line, walked by hand: a checkpoint joins it when its validation
    # strict accuracy is not below the main line's (the first gate compares with whatever
    # main-line score the harness has then).
    main = replayed[0].figures["main_strict"]
    expected_flips = set()
    for rec, rep in zip(recorded, replayed):
        assert rep.figures["main_strict"] == main  # the replay compares with its own main line
        c = strict[rec.step]
        if main is None or c >= main:
            assert isinstance(rep, Promoted)
            main = c
        else:
            assert isinstance(rep, Rejected) and "validation strict accuracy fell" in rep.reasons[0]
            expected_flips.add(rec.event_id)
    assert expected_flips, "the loophole should make some checkpoint fall below the main line"
    assert {f["decision_id"] for f in res.flips} == expected_flips
    assert all((f["recorded"], f["would"]) == ("promoted", "rejected") for f in res.flips)
    # At least one candidate was above the *recorded* main line (the previous checkpoint,
    # promoted by the run) but below the replay's, which had stayed put.
    previous = {rec.step: strict[recorded[i - 1].step] for i, rec in enumerate(recorded) if i}
    assert any(strict[r.step] >= previous[r.step] for r in recorded if r.event_id in expected_flips and r.step in previous)

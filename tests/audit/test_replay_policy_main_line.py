"""A replayed policy gate compares each candidate with the main line the *replayed*
harness would have kept, not with the checkpoint the recorded harness promoted."""

from __future__ import annotations

from evo_core.audit import parse_spec, replay
from evo_core.plugins import PluginManager
from evo_core.store import open_store, run_stream
from evo_events import EvalCompleted, Promoted, RolloutCompleted, RunStarted


def _log(store, run_id="pol"):
    cfg = {"harness": {"mode": "fixed", "diagnose_every": 5, "window_steps": 10}}
    evs = [RunStarted(run_id=run_id, config=cfg, config_hash="h", seed=0, harness_mode="fixed",
                      code_version="t", started_at="2026-01-01T00:00:00Z")]
    evs.append(EvalCompleted(run_id=run_id, step=0, policy_version=0, split="heldout", n=2,
                             metrics={"strict_accuracy": 0.7}, item_scores={"a": 1.0, "b": 0.4}))
    strict = {10: 0.5, 20: 0.6}
    hv = 0
    for step in range(1, 21):
        evs += [RolloutCompleted(run_id=run_id, step=step, task_id="t", group_id=f"g{step}", policy_version=step - 1,
                                 reward=0.9, strict_correct=False)]
        if step in strict:
            evs.append(EvalCompleted(run_id=run_id, step=step, policy_version=step, split="heldout", n=2,
                                     metrics={"strict_accuracy": strict[step]}, item_scores={"a": strict[step], "b": strict[step]}))
            evs.append(Promoted(run_id=run_id, subject="policy", subject_id=str(step), step=step, gate="policy",
                                harness_version_before=hv, harness_version_after=hv))
    store.append(run_stream(run_id), evs, expected_version=0)
    return run_id


def test_policy_gate_replay_follows_its_own_main_line():
    store = open_store("memory://")
    run_id = _log(store)
    res = replay(store, run_id, parse_spec(["gate:policy:trust=strict"]), PluginManager(), write=False)
    flipped = {f["subject_id"]: f for f in res.flips}
    # Step 10 (0.5) falls below the start (0.7). Step 20 (0.6) is above the *recorded* main
    # line (0.5, step 10) but below the replayed one, which never left the start.
    assert set(flipped) == {"10", "20"}
    assert all(f["would"] == "rejected" for f in flipped.values())
    assert "0.700" in " ".join(flipped["20"]["reasons"]) or "0.7" in " ".join(flipped["20"]["reasons"])

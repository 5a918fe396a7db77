"""State is a pure fold: the live state equals the fold of the log; checkout at any point
equals the fold of that prefix, with or without snapshots, on memory and SQLite."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from evo_events import (
    FailureDiagnosed,
    InterventionProposed,
    InterventionReverted,
    PolicyUpdated,
    Promoted,
    Rejected,
    RolloutCompleted,
    RunFinished,
    RunStarted,
    SkillRegistered,
    SkillRetired,
    StepCompleted,
)
from evo_core.checkout import CheckoutError, checkout, diff_states, fold_run, resolve_at, state_event_types
from evo_core.state import HarnessState, apply, fold
from evo_core.store import open_store, run_stream
from evo_core.synthetic import generate_run


@st.composite
def run_logs(draw):
    """A random but well-formed run: proposals before promotions, versions increasing."""
    rid = "r"
    evs = [RunStarted(run_id=rid, config={"harness": {"diagnostics": {"d0": {"max": 0.1, "version": "2"}},
                                                      "gates": {"g": {"min": draw(st.integers(0, 5))}}}},
                      config_hash="h", seed=0, harness_mode=draw(st.sampled_from(["fixed", "evolving"])),
                      code_version="t", started_at="2026-01-01T00:00:00Z")]
    hv = 0
    proposals: list[str] = []
    active: list[str] = []
    skills: list[str] = []
    for step in range(1, draw(st.integers(1, 12)) + 1):
        for _ in range(draw(st.integers(0, 3))):
            evs.append(RolloutCompleted(run_id=rid, step=step, task_id="t", group_id="g", policy_version=step,
                                        reward=draw(st.sampled_from([0.0, 1.0, None]))))
        evs.append(StepCompleted(run_id=rid, step=step, policy_version=step, harness_version=hv, metrics={}))
        if draw(st.booleans()):
            evs.append(PolicyUpdated(run_id=rid, step=step, policy_version=step, digest="d"))
        for _ in range(draw(st.integers(0, 2))):
            action = draw(st.sampled_from(["diagnose", "propose", "promote", "reject", "revert", "skill", "retire",
                                           "policy"]))
            if action == "diagnose":
                evs.append(FailureDiagnosed(run_id=rid, step=step, kind=draw(st.sampled_from(["a", "b"])),
                                            severity="warning", diagnostic="d0", diagnostic_version="1"))
            elif action == "propose":
                kind = draw(st.sampled_from(["reward_shaping", "diagnostic", "curriculum"]))
                params = ({"diagnostic": "d0", "version": str(step), "params": {"max": step / 10}}
                          if kind == "diagnostic" else {"p": draw(st.integers(0, 9))})
                skill = draw(st.sampled_from([None, *skills])) if skills else None
                ev = InterventionProposed(run_id=rid, step=step, kind=kind, name=f"n{step}", params=params,
                                          fingerprint=f"f{len(proposals)}", skill_id=skill)
                proposals.append(ev.event_id)
                evs.append(ev)
            elif action == "promote" and proposals:
                pid = draw(st.sampled_from(proposals))
                evs.append(Promoted(run_id=rid, subject="intervention", subject_id=pid, step=step, gate="g",
                                    harness_version_before=hv, harness_version_after=hv + 1))
                hv += 1
                active.append(pid)
            elif action == "reject" and proposals:
                evs.append(Rejected(run_id=rid, subject="intervention", subject_id=draw(st.sampled_from(proposals)),
                                    step=step, gate="g", harness_version=hv, fingerprint="f"))
            elif action == "revert" and active:
                evs.append(InterventionReverted(run_id=rid, proposal_id=active.pop(), step=step,
                                                harness_version_before=hv, harness_version_after=hv + 1))
                hv += 1
            elif action == "skill":
                sid = f"s{len(skills)}"
                skills.append(sid)
                evs.append(SkillRegistered(run_id=rid, skill_id=sid, name="k", bundle={"x": 1}))
            elif action == "retire" and skills:
                evs.append(SkillRetired(run_id=rid, skill_id=draw(st.sampled_from(skills)), reason="r"))
            elif action == "policy":
                evs.append(Promoted(run_id=rid, subject="policy", subject_id=str(step), step=step, gate="g",
                                    harness_version_before=hv, harness_version_after=hv))
    if draw(st.booleans()):
        evs.append(RunFinished(run_id=rid, status="completed", step=step))
    cuts = sorted(set(draw(st.lists(st.integers(1, len(evs)), max_size=6))) | {len(evs)})
    return evs, cuts


def _append_live(store, evs, cuts):
    """Append in batches as a live loop would, applying each event to a live state."""
    live = HarnessState()
    stream = run_stream("r")
    start = 0
    for cut in cuts:
        batch = evs[start:cut]
        stored = store.append(stream, batch, expected_version=start)
        for ev, rec in zip(batch, stored):
            apply(live, ev, rec.version)
        start = cut
    return live


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log=run_logs(), data=st.data())
def test_fold_equals_live_and_checkout_equals_prefix_fold(backend, tmp_path_factory, log, data):
    evs, cuts = log
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path_factory.mktemp('fold')}/e.sqlite"
    store = open_store(url)
    live = _append_live(store, evs, cuts)
    stream = run_stream("r")
    assert fold(store.events(stream)) == live
    assert checkout(store, "r") == live
    assert fold(evs) == live
    positions = data.draw(st.lists(st.integers(1, len(evs)), min_size=1, max_size=6))
    for pos in positions:
        want = fold(store.events(stream, to_version=pos))
        assert checkout(store, "r", f"pos:{pos}") == want
        assert fold_run(store, "r", pos, use_snapshots=False) == want
    # a harness version points at the event that made it
    top = live.harness_version
    h = data.draw(st.integers(0, top))
    st_h = checkout(store, "r", h)
    assert st_h.harness_version == h and st_h == fold(evs[: resolve_at(store, "r", h)])
    store.close()


def test_filtered_fold_equals_full_fold_and_knows_every_state_type(evo_store):
    run_id = generate_run(evo_store, steps=25, rollouts_per_step=6)
    stream = run_stream(run_id)
    assert fold_run(evo_store, run_id, use_snapshots=False) == fold(evo_store.events(stream))
    types = state_event_types()
    assert "evo.RolloutCompleted" not in types
    for name in ("evo.RunStarted", "evo.Promoted", "evo.Rejected", "evo.InterventionProposed",
                 "evo.InterventionReverted", "evo.SkillRegistered", "evo.SkillRetired", "evo.RunFinished",
                 "evo.StepCompleted", "evo.PolicyUpdated", "evo.FailureDiagnosed"):
        assert name in types


def test_snapshots_are_only_a_cache(tmp_path, monkeypatch):
    import evo_core.checkout as co

    monkeypatch.setattr(co, "SNAPSHOT_EVERY", 7)
    store = open_store(f"sqlite:///{tmp_path}/s.sqlite")
    run_id = generate_run(store, steps=60, rollouts_per_step=3)
    n = store.stream_version(run_stream(run_id))
    points = list(range(1, n + 1, 17)) + [n]
    with_cache = [checkout(store, run_id, f"pos:{p}") for p in points]
    assert store.snapshots.latest(run_stream(run_id), co.fold_fingerprint(), n) is not None
    again = [checkout(store, run_id, f"pos:{p}") for p in points]  # served from snapshots now
    assert store.snapshots.clear() > 0
    cold = [fold_run(store, run_id, p, use_snapshots=False) for p in points]
    assert with_cache == again == cold
    # a snapshot whose event hash no longer matches the log is ignored, not trusted
    checkout(store, run_id)
    v, h, data = store.snapshots.latest(run_stream(run_id), co.fold_fingerprint(), n)
    data["harness_version"] = 999
    store.snapshots.clear()
    store.snapshots.save(run_stream(run_id), co.fold_fingerprint(), v, "0" * 64, data)
    assert checkout(store, run_id).harness_version != 999


def test_checkout_at_time_event_id_and_bad_input(evo_tiny_run):
    store, run_id = evo_tiny_run
    stream = run_stream(run_id)
    promo = next(r for r in store.read_stream(stream, types={"evo.Promoted"}))
    assert checkout(store, run_id, promo.event_id) == fold(store.events(stream, to_version=promo.version))
    assert checkout(store, run_id, "head") == checkout(store, run_id)
    import datetime as dt

    iso = dt.datetime.fromtimestamp(promo.recorded_at + 1, dt.timezone.utc).isoformat()
    assert resolve_at(store, run_id, iso) == store.stream_version(stream)
    for bad, msg in [("pos:0", "positions 1.."), ("99", "never reached harness version 99"),
                     ("nonsense", "is not a harness version"), ("pos:x", "is not a stream position"),
                     ("1999-01-01T00:00:00Z", "no event that old")]:
        with pytest.raises(CheckoutError, match=msg):
            checkout(store, run_id, bad)
    with pytest.raises(CheckoutError, match="no run 'ghost'"):
        checkout(store, "ghost")


def test_diff_states_is_structured(evo_tiny_run):
    store, run_id = evo_tiny_run
    a, b = checkout(store, run_id, 0), checkout(store, run_id, 1)
    d = diff_states(a, b)
    assert d["harness_version"] == [0, 1]
    (pid, added), = d["interventions"]["added"].items()
    assert added["name"] == "sim_exploit_penalty" and added["params"] == {"penalty": 0.6}
    assert [e["decision"] for e in d["ledger"]] == ["promoted"]
    assert diff_states(b, b) == {"run_id": run_id, "from_position": b.position, "to_position": b.position}
    back = diff_states(b, a)
    assert pid in back["interventions"]["removed"]


def test_diff_names_diagnostic_gate_and_skill_changes():
    from evo_core.state import DiagnosticSetting, Skill

    a = HarnessState(run_id="r", harness_version=3, gate_config={"policy": {"min": 0.1}, "old": 1})
    a.diagnostics["hedge"] = DiagnosticSetting("hedge", "1", {"max_rate": 0.15})
    a.skills["s1"] = Skill("s1", "penalty")
    b = HarnessState(run_id="r", harness_version=4, gate_config={"policy": {"min": 0.2}, "new": True})
    b.diagnostics["hedge"] = DiagnosticSetting("hedge", "2", {"max_rate": 0.1}, source="p9", since_harness_version=4)
    b.diagnostics["gap"] = DiagnosticSetting("gap", "1", {})
    b.skills["s1"] = Skill("s1", "penalty", retired=True)
    d = diff_states(a, b)
    assert d["diagnostics"]["changed"]["hedge"] == {"version": ["1", "2"], "params": [{"max_rate": 0.15}, {"max_rate": 0.1}],
                                                    "source": ["config", "p9"]}
    assert list(d["diagnostics"]["added"]) == ["gap"]
    assert d["gate_config"] == {"added": {"new": True}, "removed": {"old": 1},
                                "changed": {"policy": [{"min": 0.1}, {"min": 0.2}]}}
    assert d["skills"] == {"retired": ["s1"]} and d["harness_version"] == [3, 4]

"""The engine end to end, driven by the real run loop over a simulated learner with a loophole:
fixed vs evolving, induction and repair, isolation, the ledger, ablations, skills."""

import json

import pytest

from evo_core.harness.skills import export_skills, skills_in_store
from evo_core.hookspecs import hookimpl
from evo_core.simulation import run_simulated
from evo_core.state import fold
from evo_core.store import open_store, run_stream
from evo_core.testing import isolated_plugins
from evo_events import (
    BacktestFailed,
    BacktestInconclusive,
    BacktestPassed,
    FailureDiagnosed,
    HarnessPassCompleted,
    InterventionProposed,
    PluginFailed,
    PolicyUpdated,
    Promoted,
    Rejected,
    SkillRegistered,
    SkillRetired,
    backtest_decision,
)


def events(store, run_id):
    return list(store.events(run_stream(run_id)))


def of(evs, cls):
    return [e for e in evs if isinstance(e, cls)]


@pytest.fixture
def pm():
    return isolated_plugins()


@pytest.fixture(scope="module")
def both_runs(tmp_path_factory):
    store = open_store("memory://")
    pm = isolated_plugins()
    ck = str(tmp_path_factory.mktemp("ck"))
    out = {}
    for arm in ("fixed", "evolving"):
        rid, loop = run_simulated(store, pm, arm=arm, steps=40, seed=1, checkpoint_dir=ck)
        out[arm] = (rid, loop, events(store, rid))
    return store, out


def test_fixed_harness_logs_the_loophole_and_never_changes_itself(both_runs):
    store, runs = both_runs
    rid, loop, evs = runs["fixed"]
    assert loop.state.harness_version == 0 and not of(evs, InterventionProposed)
    gap = [d for d in of(evs, FailureDiagnosed) if d.kind == "reward_oracle_gap"]
    assert gap and all(d.severity == "invalid" for d in gap)
    assert loop.session.policy.h > -2.2  # the loophole grew: exploiting was paid more than answering


def test_evolving_harness_induces_the_loophole_and_repairs_it(both_runs):
    store, runs = both_runs
    rid, loop, evs = runs["evolving"]
    props = [p for p in of(evs, InterventionProposed) if p.proposer == "contrast"]
    assert props, "the contrast proposer induced nothing"
    first = props[0]
    assert first.diagnostic and first.diagnostic["spec"]["where"] and first.params["predicate"]
    assert first.prediction["holdout_precision"] >= 0.8 and first.prediction["fitted_on"]
    assert first.prediction["features_considered"] and first.caused_by
    promoted = [p for p in of(evs, Promoted) if p.subject == "intervention"]
    assert promoted and promoted[0].step <= 15  # acts as soon as the audited evidence clears the minimum
    assert {b.mode for b in of(evs, BacktestPassed) if b.proposal_id == promoted[0].subject_id} == {"offline", "online"}
    assert loop.session.policy.h < runs["fixed"][1].session.policy.h - 2  # the repaired run stopped exploiting
    skill = [k for k in of(evs, SkillRegistered) if k.skill_id == promoted[0].skill_id][0]
    for key in ("evidence", "diagnoses", "proposal", "backtests", "gates", "plugin_versions", "harness_version"):
        assert skill.provenance[key], key
    assert skill.bundle["diagnostic"]["spec"] == first.diagnostic["spec"] or skill.bundle["diagnostic"]
    spec_kind = promoted_kind = [p for p in props if p.event_id == promoted[0].subject_id][0].targets[0]
    assert spec_kind in loop.state.diagnostics or promoted_kind in {s.spec["kind"] for s in loop.state.diagnostics.values() if s.spec}
    assert loop.state.interventions  # the promoted repair is active


def test_live_state_equals_the_fold_and_every_step_has_its_pass(both_runs):
    store, runs = both_runs
    for rid, loop, evs in runs.values():
        assert fold(evs).to_dict() == loop.state.to_dict()
        passes = [e.step for e in of(evs, HarnessPassCompleted)]
        assert passes == list(range(1, 41))
    assert store.verify().ok


def test_a_step_and_its_harness_pass_are_one_append(both_runs):
    store, runs = both_runs
    rid, _, evs = runs["evolving"]
    records = list(store.read_stream(run_stream(rid)))
    by_id = {r.event_id: r for r in records}
    for p in of(evs, HarnessPassCompleted):
        step_rec = next(r for r in records if r.type == "evo.StepCompleted" and r.decode().step == p.step)
        assert by_id[p.event_id].position > step_rec.position
        between = [r for r in records if step_rec.position < r.position < by_id[p.event_id].position]
        assert all(r.type != "evo.StepCompleted" for r in between)


class _Boom:
    name, version, kinds, default_params = "boom", "1", ("boom",), {}

    def evaluate(self, window, params):
        raise RuntimeError("diagnostic exploded")


class _BoomPlugin:
    @hookimpl
    def evo_register_diagnostics(self):
        return [_Boom()]


def test_a_raising_diagnostic_is_isolated(pm, tmp_path):
    pm.register(_BoomPlugin(), name="boom_plugin")
    store = open_store("memory://")
    rid, loop = run_simulated(store, pm, steps=12, seed=2, checkpoint_dir=str(tmp_path), harness={"diagnostics": {"boom": {}}})
    fails = [e for e in of(events(store, rid), PluginFailed) if e.plugin == "boom"]
    assert fails and "exploded" in fails[0].message
    assert loop.state.step == 12 and loop.state.status == "completed"


def test_unknown_diagnostic_is_reported_once(pm, tmp_path):
    store = open_store("memory://")
    rid, _ = run_simulated(store, pm, steps=12, checkpoint_dir=str(tmp_path), harness={"diagnostics": {"no_such_diag": {}}})
    fails = [e for e in of(events(store, rid), PluginFailed) if e.plugin == "no_such_diag"]
    assert len(fails) == 1 and fails[0].error_type == "NotInstalled"


def test_ledger_blocks_repeats_without_new_evidence(pm, tmp_path):
    store = open_store("memory://")
    # an impossible bar: every online backtest fails, every proposal is rejected
    rid, loop = run_simulated(store, pm, steps=40, seed=4, checkpoint_dir=str(tmp_path), harness={
        "backtest": {"k_steps": 4, "replicates": 2, "min_effect": 0.99}, "ledger_new_evidence": 100.0})
    evs = events(store, rid)
    fps = [p.fingerprint for p in of(evs, InterventionProposed)]
    assert fps and len(fps) == len(set(fps))
    assert all(r.fingerprint for r in of(evs, Rejected) if r.subject == "intervention")
    assert not [p for p in of(evs, Promoted) if p.subject == "intervention"]


def test_ablations(pm, tmp_path):
    store = open_store("memory://")
    rid, _ = run_simulated(store, pm, arm="evolving/gate-only", steps=20, seed=5, checkpoint_dir=str(tmp_path))
    assert not of(events(store, rid), InterventionProposed)
    rid, loop = run_simulated(store, pm, arm="evolving/no-revision", steps=20, seed=5, checkpoint_dir=str(tmp_path),
                              harness={"ablations": {"no_online_backtest": True}})
    evs = events(store, rid)
    assert of(evs, InterventionProposed) and all(p.diagnostic is None and p.kind != "diagnostic"
                                                 for p in of(evs, InterventionProposed))
    assert all(b.mode == "offline" for b in of(evs, BacktestPassed) + of(evs, BacktestFailed))
    rid, _ = run_simulated(store, pm, arm="evolving/no-policy-gate", steps=20, seed=5, checkpoint_dir=str(tmp_path))
    assert not [e for e in of(events(store, rid), Promoted) + of(events(store, rid), Rejected) if e.subject == "policy"]


def test_skills_transfer_when_their_predicate_fires(pm, tmp_path, both_runs):
    store, runs = both_runs
    skills = [s for s in skills_in_store(store) if (s["bundle"].get("diagnostic") or {}).get("spec")]
    assert skills and skills[0]["provenance"]
    f = tmp_path / "skills.json"
    export_skills(skills, f)
    other = open_store("memory://")
    rid, loop = run_simulated(other, pm, steps=20, seed=7, checkpoint_dir=str(tmp_path), harness={"skills_from": [str(f)]})
    evs = events(other, rid)
    imported = {k.skill_id for k in of(evs, SkillRegistered) if k.provenance.get("imported_from") == str(f)}
    assert imported == {s["skill_id"] for s in skills}
    from_skill = [p for p in of(evs, InterventionProposed) if p.proposer == "skills"]
    assert from_skill and from_skill[0].skill_id in imported and "predicate fires" in from_skill[0].rationale
    assert of(evs, BacktestPassed) or of(evs, BacktestFailed)  # backtested again here


def test_a_skill_that_does_nothing_is_retired(pm, tmp_path, both_runs):
    store, _ = both_runs
    base = skills_in_store(store)[0]
    useless = [{**base, "skill_id": "skill-useless", "bundle": {
        "intervention": {"kind": "prompt_hint", "name": "prompt_hint", "params": {"hint": "x"},
                         "targets": ["reward_oracle_gap"]},
        "preconditions": {"diagnoses": ["reward_oracle_gap"]}}}]
    g = tmp_path / "useless.json"
    g.write_text(json.dumps({"format": "evo-skills", "version": 1, "skills": useless}))
    third = open_store("memory://")
    rid, loop = run_simulated(third, pm, steps=15, seed=8, checkpoint_dir=str(tmp_path),
                              harness={"skills_from": [str(g)], "proposers": {"contrast": {"enabled": False}}})
    retired = of(events(third, rid), SkillRetired)
    assert retired and retired[0].skill_id == "skill-useless" and loop.state.skills["skill-useless"].retired


def test_no_skill_reuse_ignores_skills_from(pm, tmp_path, both_runs):
    store, _ = both_runs
    f = tmp_path / "s.json"
    export_skills(skills_in_store(store), f)
    other = open_store("memory://")
    rid, _ = run_simulated(other, pm, steps=10, seed=9, checkpoint_dir=str(tmp_path),
                           harness={"skills_from": [str(f)], "ablations": {"no_skill_reuse": True}})
    assert all(k.source_run == rid for k in of(events(other, rid), SkillRegistered))


def test_policy_gate_cadence(pm, tmp_path):
    store = open_store("memory://")
    rid, _ = run_simulated(store, pm, arm="fixed", steps=40, seed=11, checkpoint_dir=str(tmp_path),
                           harness={"policy_gate_every": 20})
    steps = [e.step for e in of(events(store, rid), Promoted) + of(events(store, rid), Rejected) if e.subject == "policy"]
    assert steps == [20, 40]


def test_restores_are_decisions_the_loop_carries_out(pm, tmp_path):
    # fixed: a static recipe never touches training, even when its gate rejects
    store = open_store("memory://")
    rid, _ = run_simulated(store, pm, arm="fixed", steps=30, seed=12, checkpoint_dir=str(tmp_path),
                           harness={"gates": {"policy": {"reward_tolerance": -1.0}}})
    assert not [e for e in of(events(store, rid), PolicyUpdated) if e.target == "restore"]
    # evolving, "reject": every rejection of a checkpoint off the main line puts the main line back
    rid, loop = run_simulated(store, pm, steps=30, seed=13, checkpoint_dir=str(tmp_path),
                              harness={"gates": {"policy": {"restore_on": "reject", "tolerance": -1.0}}})
    evs = events(store, rid)
    restores = [e for e in of(evs, PolicyUpdated) if e.target == "restore"]
    rejected = {e.event_id for e in of(evs, Rejected) if e.subject == "policy"}
    assert restores and all(r.caused_by[0] in rejected for r in restores)
    main = [p for p in of(evs, Promoted) if p.subject == "policy"]
    last_main = main[-1] if main else None
    for r in restores:  # the restored weights are the main line's, by digest
        assert r.digest == (last_main.digest if last_main and last_main.step < r.step else
                            [e for e in of(evs, PolicyUpdated) if e.step == 0][0].digest) or r.digest


def test_the_promoted_main_line_is_persisted_with_its_digest(pm, tmp_path):
    store = open_store("memory://")
    rid, loop = run_simulated(store, pm, steps=30, seed=3, checkpoint_dir=str(tmp_path), session={"h": -6.0})
    main = [p for p in of(events(store, rid), Promoted) if p.subject == "policy"]
    assert main and all(p.checkpoint is not None and p.digest for p in main)
    data = store.blobs.get(main[-1].checkpoint)
    assert loop.session.detached_policy(data).digest() == main[-1].digest
    assert loop.state.main.digest == main[-1].digest


class _Undecided:
    name, version, mode = "undecided", "1", "offline"

    def backtest(self, proposal, ctx):
        from evo_core.api import BacktestOutcome

        return BacktestOutcome(backtester=self.name, mode="offline", passed=None, reasons=("no decision: too few",))


class _UndecidedPlugin:
    @hookimpl
    def evo_register_backtesters(self):
        return [_Undecided()]


def test_a_backtester_that_cannot_decide_is_logged_as_inconclusive_and_the_plan_goes_on(pm, tmp_path):
    pm.register(_UndecidedPlugin(), name="undecided_plugin")
    store = open_store("memory://")
    rid, _ = run_simulated(store, pm, steps=20, seed=1, checkpoint_dir=str(tmp_path),
                           harness={"backtest": {"plan": ["undecided", "online_ab"], "k_steps": 4, "replicates": 2}})
    evs = events(store, rid)
    undecided = of(evs, BacktestInconclusive)
    assert undecided and {b.figures["backtester"] for b in undecided} == {"undecided"}
    assert all(b.figures["decision"] == "none" and backtest_decision(b) is None for b in undecided)
    assert not [b for b in of(evs, BacktestFailed) if b.figures.get("backtester") == "undecided"]
    online = {b.proposal_id for b in of(evs, BacktestPassed) + of(evs, BacktestFailed) if b.mode == "online"}
    assert {b.proposal_id for b in undecided} <= online  # no decision offline: the online A/B decided

"""The engine end to end on a simulated learner: fixed vs evolving, isolation, ledger, ablations, skills."""

import json

import pytest

from evo_core.harness.skills import export_skills, skills_in_store
from evo_core.harness.summary import summarize_run
from evo_core.hookspecs import hookimpl
from evo_core.state import fold
from evo_core.store import open_store, run_stream
from evo_events import (
    BacktestFailed,
    BacktestPassed,
    FailureDiagnosed,
    InterventionProposed,
    PluginFailed,
    Promoted,
    Rejected,
    SkillRegistered,
    SkillRetired,
)
from harness_sim import run_sim


def events(store, run_id):
    return list(store.events(run_stream(run_id)))


def of(evs, cls):
    return [e for e in evs if isinstance(e, cls)]


@pytest.fixture(scope="module")
def both_runs():
    from evo_core.plugins import PluginManager

    store = open_store("memory://")
    pm = PluginManager()
    out = {}
    for mode in ("fixed", "evolving"):
        rid, state, sess = run_sim(store, pm, mode=mode, steps=40, seed=1)
        out[mode] = (rid, state, sess, events(store, rid))
    return store, out


def test_fixed_harness_promotes_the_hacked_branch(both_runs):
    store, runs = both_runs
    rid, state, sess, evs = runs["fixed"]
    s = summarize_run(evs)
    assert s["wrong_branch_promotions"] > 0 and s["diagnoses"] > 0
    assert state.harness_version == 0 and not of(evs, InterventionProposed)  # fixed: never changes itself
    assert {d.kind for d in of(evs, FailureDiagnosed)} >= {"answer_hedging", "reward_oracle_gap"}


def test_evolving_harness_fixes_the_reward_and_refuses_the_branch(both_runs):
    store, runs = both_runs
    rid, state, sess, evs = runs["evolving"]
    s, f = summarize_run(evs), summarize_run(runs["fixed"][3])
    assert s["wrong_branch_promotions"] == 0 and s["intervention_promotions"] >= 1
    assert s["final_main_strict"] >= f["final_main_strict"]
    prom = [p for p in of(evs, Promoted) if p.subject == "intervention"][0]
    assert prom.harness_version_after == prom.harness_version_before + 1 and prom.plugin_versions
    assert "diagnostic:answer_hedging" in prom.plugin_versions and prom.skill_id
    skill = [k for k in of(evs, SkillRegistered) if k.skill_id == prom.skill_id][0]
    for key in ("evidence", "diagnoses", "proposal", "backtests", "gates", "plugin_versions", "harness_version"):
        assert skill.provenance[key], key
    assert skill.bundle["intervention"]["name"] and skill.bundle["preconditions"]["diagnoses"]
    assert of(evs, BacktestPassed) and all(b.figures.get("decision") for b in of(evs, BacktestPassed))
    assert state.interventions  # the promoted change is active
    for d in of(evs, Promoted) + of(evs, Rejected):
        assert d.plugin_versions and (getattr(d, "harness_version", None) is not None
                                      or d.harness_version_before is not None)


def test_live_state_equals_the_fold_and_the_log_verifies(both_runs):
    store, runs = both_runs
    for rid, state, _, evs in runs.values():
        assert fold(evs).to_dict() == state.to_dict()
    assert store.verify().ok


class _Boom:
    name, version, kinds, default_params = "boom", "1", ("boom",), {}

    def evaluate(self, window, params):
        raise RuntimeError("diagnostic exploded")


class _BoomPlugin:
    @hookimpl
    def evo_register_diagnostics(self):
        return [_Boom()]


def test_a_raising_diagnostic_is_isolated(evo_plugins, evo_plugin):
    evo_plugin(_BoomPlugin(), name="boom_plugin")
    store = open_store("memory://")
    rid, state, _ = run_sim(store, evo_plugins, mode="evolving", steps=12, seed=2,
                            harness={"diagnostics": {"boom": {}, "answer_hedging": {}}})
    evs = events(store, rid)
    fails = [e for e in of(evs, PluginFailed) if e.plugin == "boom"]
    assert fails and "exploded" in fails[0].message
    assert state.step == 12 and state.status == "completed"


def test_unknown_diagnostic_is_reported_once(pm):
    store = open_store("memory://")
    rid, _, _ = run_sim(store, pm, steps=12, harness={"diagnostics": {"no_such_diag": {}}})
    fails = [e for e in of(events(store, rid), PluginFailed) if e.plugin == "no_such_diag"]
    assert len(fails) == 1 and fails[0].error_type == "NotInstalled"


def test_ledger_blocks_repeats_without_new_evidence(pm):
    store = open_store("memory://")
    # an impossible bar: every online backtest fails, every proposal is rejected
    rid, state, _ = run_sim(store, pm, steps=40, seed=4, harness={
        "backtest": {"k_steps": 4, "min_n": 30, "n_boot": 200, "min_effect": 0.99}, "ledger_new_evidence": 100.0,
        "ablations": {"no_revision": True}})
    evs = events(store, rid)
    fps = [p.fingerprint for p in of(evs, InterventionProposed)]
    assert fps and len(fps) == len(set(fps))
    assert all(r.fingerprint for r in of(evs, Rejected) if r.subject == "intervention")
    assert state.harness_version == 0


def test_ledger_allows_a_retry_on_new_evidence(pm):
    store = open_store("memory://")
    rid, _, _ = run_sim(store, pm, steps=40, seed=4, harness={
        "backtest": {"k_steps": 4, "min_n": 30, "n_boot": 200, "min_effect": 0.99}, "ledger_new_evidence": 0.0,
        "max_proposals_per_round": 1})
    fps = [p.fingerprint for p in of(events(store, rid), InterventionProposed)]
    assert len(fps) > len(set(fps))  # the hack kept growing: the same fix came back


def test_ablations(pm):
    store = open_store("memory://")
    rid, _, _ = run_sim(store, pm, steps=20, seed=5, harness={"ablations": {"no_online_backtest": True, "no_revision": True},
                                                              "max_proposals_per_round": 3})
    evs = events(store, rid)
    assert of(evs, InterventionProposed)
    assert all(p.kind != "diagnostic" for p in of(evs, InterventionProposed))
    assert all(b.mode == "offline" for b in of(evs, BacktestPassed) + of(evs, BacktestFailed))


def test_diagnostic_revision_is_promoted_as_a_new_version(pm):
    store = open_store("memory://")
    rid, state, _ = run_sim(store, pm, steps=30, seed=6, harness={"max_proposals_per_round": 3,
                                                                  "diagnostics": {"reward_oracle_gap": {}}})
    evs = events(store, rid)
    diag_props = [p for p in of(evs, InterventionProposed) if p.kind == "diagnostic"]
    assert diag_props
    if "multi_answer_rewarded" in state.diagnostics:
        setting = state.diagnostics["multi_answer_rewarded"]
        assert setting.version == "spec-1" and setting.source == diag_props[0].event_id
        later = [d for d in of(evs, FailureDiagnosed) if d.diagnostic == "multi_answer_rewarded"]
        assert all(d.diagnostic_version == "spec-1" for d in later)


def test_skills_move_between_stores_and_retire_when_they_stop_working(pm, tmp_path, both_runs):
    store, runs = both_runs
    skills = skills_in_store(store)
    assert skills and skills[0]["provenance"]
    f = tmp_path / "skills.json"
    export_skills(skills, f)
    # a second store, a new run that starts from the exported skills
    other = open_store("memory://")
    rid, state, _ = run_sim(other, pm, steps=20, seed=7, harness={"skills_from": [str(f)]})
    evs = events(other, rid)
    imported = {k.skill_id: k for k in of(evs, SkillRegistered) if k.provenance.get("imported_from") == str(f)}
    assert set(imported) == {s["skill_id"] for s in skills}
    from_skill = [p for p in of(evs, InterventionProposed) if p.proposer == "skills"]
    assert from_skill and from_skill[0].skill_id in imported
    assert state.skills[from_skill[0].skill_id].uses >= 1
    # a useless skill (a hint that changes nothing in this learner) fails its fingerprint check
    useless = [{**skills[0], "skill_id": "skill-useless", "bundle": {
        "intervention": {"kind": "prompt_hint", "name": "prompt_hint", "params": {"hint": "x"}, "targets": ["answer_hedging"]},
        "preconditions": {"diagnoses": ["answer_hedging"]}}}]
    g = tmp_path / "useless.json"
    g.write_text(json.dumps({"format": "evo-skills", "version": 1, "skills": useless}))
    third = open_store("memory://")
    rid3, state3, _ = run_sim(third, pm, steps=15, seed=8, harness={"skills_from": [str(g)], "proposers": {"skills": {}}})
    retired = of(events(third, rid3), SkillRetired)
    assert retired and retired[0].skill_id == "skill-useless" and state3.skills["skill-useless"].retired


def test_no_skill_reuse_ignores_skills_from(pm, tmp_path, both_runs):
    store, _ = both_runs
    f = tmp_path / "s.json"
    export_skills(skills_in_store(store), f)
    other = open_store("memory://")
    rid, state, _ = run_sim(other, pm, steps=10, seed=9, harness={"skills_from": [str(f)], "ablations": {"no_skill_reuse": True}})
    assert not of(events(other, rid), SkillRegistered) or all(
        k.source_run == rid for k in of(events(other, rid), SkillRegistered))


def test_llm_malformed_answer_recorded_as_rejection(pm, monkeypatch):
    from evo_plugins.proposers import llm

    monkeypatch.setattr(llm.LLMProposer, "propose", lambda self, ctx, params: [llm.ProposalRejection("llm", "malformed answer: x", "{")])
    store = open_store("memory://")
    rid, _, _ = run_sim(store, pm, steps=10, seed=10, harness={"proposers": {"llm": {}}})
    rej = [r for r in of(events(store, rid), Rejected) if r.subject == "proposal"]
    assert rej and rej[0].gate == "parse" and "malformed" in rej[0].reasons[0]


def test_a_resumed_harness_rebuilds_window_and_ledger_from_the_log(pm):
    from evo_core.harness import build_harness

    store = open_store("memory://")
    rid, state, _ = run_sim(store, pm, steps=30, seed=4, harness={
        "backtest": {"k_steps": 4, "min_n": 30, "n_boot": 200, "min_effect": 0.99}, "ablations": {"no_revision": True}})
    rejected = {r.fingerprint for r in of(events(store, rid), Rejected) if r.fingerprint}
    h = build_harness({"window_steps": 10}, pm, run_id=rid, store=store)
    assert set(h._rejected) == rejected and rejected
    assert {r.step for r in h.window.rollouts()} == set(range(21, 31))
    assert h.window.evals and h.main_eval is not None


def test_policy_gate_cadence(pm):
    store = open_store("memory://")
    rid, _, _ = run_sim(store, pm, mode="fixed", steps=40, seed=11, harness={"policy_gate_every": 20})
    steps = [e.step for e in of(events(store, rid), Promoted) + of(events(store, rid), Rejected) if e.subject == "policy"]
    assert steps == [20, 40]


def test_restore_policy_on_rejection(pm):
    # fixed: a static recipe never touches training, even when its gate rejects
    store = open_store("memory://")
    _, _, sess = run_sim(store, pm, mode="fixed", steps=30, seed=12, harness={"gates": {"policy": {"reward_tolerance": -1.0}}})
    assert sess.restores == 0
    # evolving, "reject": every rejection puts the main line back
    _, state, sess2 = run_sim(store, pm, mode="evolving", steps=30, seed=13, run_id="rej",
                              harness={"gates": {"validity": {}, "statistical": {}, "policy": {"restore_on": "reject", "tolerance": -1.0}}})
    rejected = [e for e in of(events(store, "rej"), Rejected) if e.subject == "policy"]
    assert rejected and sess2.restores == len(rejected)


def test_a_config_that_tunes_only_the_policy_gate_still_promotes_fixes(pm):
    store = open_store("memory://")
    rid, state, _ = run_sim(store, pm, steps=20, seed=14, harness={"gates": {"policy": {"tolerance": 0.0}}})
    assert [p for p in of(events(store, rid), Promoted) if p.subject == "intervention"]
    assert "validity" in [p for p in of(events(store, rid), Promoted) if p.subject == "intervention"][0].gate

"""Counterfactual replay on real runs (the run loop driving the simulated learner): SPEC
parsing, diagnoses that appear and vanish, decisions that flip, --find-bad, isolation of a
failing diagnostic, the replay stream, the CLI."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from evo_core.audit import AuditError, ReplayCompleted, parse_spec, replay
from evo_core.audit.spec import DiagnosticItem, ReplaySpec
from evo_core.store import open_store, run_stream
from evo_core.testing import window
from evo_events import FailureDiagnosed, HarnessPassCompleted, Promoted, Rejected, RolloutCompleted
from tests.audit import _plugins
from tests.audit._sim import replay_plugins, sim_run


@given(st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True),
                       st.one_of(st.integers(-1000, 1000), st.floats(-10, 10, allow_nan=False), st.booleans(),
                                 st.from_regex(r"[a-z]{1,6}", fullmatch=True).filter(lambda s: s not in ("true", "false", "null"))),
                       max_size=4))
def test_spec_params_round_trip(params):
    text = "multi_rewarded@2:" + ",".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in params.items())
    spec = parse_spec([text])
    (item,) = spec.diagnostics
    assert item.name == "multi_rewarded" and item.version == "2" and item.params == params


def test_spec_forms(tmp_path):
    spec = parse_spec(["a;-b", "gate:validity@1:max_invalid_rewarded=0.1", "drop:c"])
    assert [(d.name, d.drop) for d in spec.diagnostics] == [("a", False), ("b", True), ("c", True)]
    assert spec.gates[0].name == "validity" and spec.gates[0].params == {"max_invalid_rewarded": 0.1}
    skill = tmp_path / "skill.json"
    skill.write_text(json.dumps({"skill_id": "s1", "name": "x", "bundle": {"intervention": {
        "kind": "diagnostic", "name": "diagnostic_revision",
        "params": {"diagnostic": "multi_rewarded", "version": "2", "params": {"max_rate": 0.1}}}}}))
    (item,) = parse_spec([str(skill)]).diagnostics
    assert (item.name, item.version, item.params) == ("multi_rewarded", "2", {"max_rate": 0.1})
    toml = tmp_path / "h.toml"
    toml.write_text('[diagnostics.multi_rewarded]\nmax_rate = 0.2\n[gates.validity]\n')
    s = parse_spec([str(toml)])
    assert s.diagnostics[0].params == {"max_rate": 0.2} and s.gates[0].name == "validity"
    for bad in ("x@", "gate:", str(tmp_path / "missing.json"), "-a@1"):
        with pytest.raises(AuditError):
            parse_spec([bad])


def test_spec_overlays_the_runs_own_harness():
    pm = replay_plugins()
    own = {"diagnostics": {"reward_oracle_gap": {"max_gap": 0.3}, "truncation_rate": {}}, "gates": {"policy": {"trust": "x"}}}
    spec = parse_spec(["reward_oracle_gap:min_n=5", "-truncation_rate", "multi_rewarded", "gate:policy:tolerance=0.1"])
    table = spec.overlay(own, pm.diagnostics(), pm.gates())
    assert table["diagnostics"]["reward_oracle_gap"] == {"max_gap": 0.3, "min_n": 5}  # over the run's own params
    assert table["diagnostics"]["truncation_rate"] == {"enabled": False}
    assert table["diagnostics"]["multi_rewarded"] == {}
    assert table["gates"]["policy"] == {"trust": "x", "tolerance": 0.1}
    assert own["diagnostics"]["reward_oracle_gap"] == {"max_gap": 0.3}  # the run's table is not touched
    with pytest.raises(AuditError, match="bad diagnostic spec"):
        ReplaySpec((DiagnosticItem("x", spec={"kind": "x", "threshold": {"op": "~", "value": 1}, "where": {}}),)).overlay(
            own, pm.diagnostics(), pm.gates())


# --- real runs ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One store holding a fixed-harness run and an evolving one (40 steps each)."""
    store = open_store("memory://")
    ck = tmp_path_factory.mktemp("ck")
    fixed = sim_run(store, ck, arm="fixed", steps=40, seed=3)
    evolving = sim_run(store, ck, arm="evolving", steps=40, seed=0)
    yield store, fixed, evolving
    store.close()


def _events(store, run_id):
    return list(store.events(run_stream(run_id)))


def _expected_findings(store, run_id, max_rate, window_steps=10):
    """multi_rewarded computed by hand at every step the run diagnosed."""
    evs = _events(store, run_id)
    rows = [e for e in evs if isinstance(e, RolloutCompleted)]
    out = set()
    for s in sorted({e.step for e in evs if isinstance(e, HarnessPassCompleted) and e.diagnosed}):
        win = [r for r in rows if s - window_steps < r.step <= s]
        if _plugins.MultiRewarded().evaluate(window(win), {"max_rate": max_rate, "min_n": 8}):
            out.add(s)
    return out


def test_new_diagnostic_appears(runs):
    store, run_id, _ = runs
    pm = replay_plugins()
    before = [r.hash for r in store.read_stream(run_stream(run_id))]
    res = replay(store, run_id, parse_spec(["multi_rewarded:max_rate=0.25"]), pm)
    expected = _expected_findings(store, run_id, 0.25)
    assert expected and set(range(5, 41, 5)) - expected  # it fires at some passes, not all
    assert {a["step"] for a in res.appeared} == expected
    assert all(a["kind"] == "multi_answer_rewarded" and a["severity"] == "invalid" and a["diagnostic"] == "multi_rewarded"
               for a in res.appeared)
    # A fixed harness logs diagnoses and acts on none: nothing vanishes, no decision flips,
    # and every pass differs from the log only by the new diagnoses.
    assert res.vanished == [] and res.flips == []
    assert {d["step"] for d in res.divergences} == expected
    # The run is untouched; the replay has its own stream recording what produced it.
    assert [r.hash for r in store.read_stream(run_stream(run_id))] == before
    (ev,) = list(store.events(res.stream))
    assert isinstance(ev, ReplayCompleted) and res.stream == f"replay-{run_id}-{res.replay_id}"
    assert ev.plugin_versions["multi_rewarded"] == "2" and ev.spec["text"] == ["multi_rewarded:max_rate=0.25"]
    assert ev.source_head_version == len(before) and ev.source_head_hash == before[-1]
    assert ev.summary["appeared"] == len(expected) and ev.settings["harness_engine"]
    assert len(json.loads(store.blobs.get(ev.findings))) == len(res.findings)


def test_new_invalid_diagnosis_vetoes_policy_promotions(runs):
    """The evolving harness's validity gate vetoes a checkpoint while an invalid diagnosis is
    in force: a new invalid diagnostic flips the recorded promotions where it fires."""
    store, _, run_id = runs
    pm = replay_plugins()
    res = replay(store, run_id, parse_spec(["multi_rewarded:max_rate=0.01"]), pm, write=False)
    expected = _expected_findings(store, run_id, 0.01)
    promoted = [e for e in _events(store, run_id) if isinstance(e, Promoted) and e.subject == "policy"]
    vetoed = [p for p in promoted if p.step in expected]
    assert vetoed, "the run should have a policy promotion at a step where the new diagnostic fires"
    flips = {f["decision_id"]: f for f in res.flips}
    for p in vetoed:
        f = flips[p.event_id]
        assert (f["recorded"], f["would"]) == ("promoted", "rejected")
        assert any("validity" in r and "multi_answer_rewarded" in r for r in f["reasons"])


def test_dropping_a_diagnostic_makes_its_diagnoses_vanish(runs):
    store, _, run_id = runs
    evs = _events(store, run_id)
    recorded = {(d.step, d.kind) for d in evs if isinstance(d, FailureDiagnosed) and d.diagnostic == "reward_oracle_gap"}
    assert recorded
    res = replay(store, run_id, parse_spec(["-reward_oracle_gap"]), replay_plugins(), write=False)
    assert {(v["step"], v["kind"]) for v in res.vanished if v["diagnostic"] == "reward_oracle_gap"} == recorded
    assert not any(a["diagnostic"] == "reward_oracle_gap" for a in res.appeared)
    # The run's first proposal answered a reward_oracle_gap diagnosis alone; without that
    # diagnostic the replayed harness does not make it.
    by_id = {e.event_id: e for e in evs}
    first = next(e for e in evs if isinstance(e, (Promoted, Rejected)) and e.subject == "intervention")
    triggers = [by_id[c] for c in by_id[first.subject_id].caused_by if isinstance(by_id.get(c), FailureDiagnosed)]
    assert triggers and {t.diagnostic for t in triggers} == {"reward_oracle_gap"}
    (f,) = [f for f in res.flips if f["decision_id"] == first.event_id]
    assert f["would"] == "not proposed" and f["reasons"][0].startswith("every diagnosis behind the proposal vanishes")


def test_same_gate_reproduces_the_run(runs):
    store, _, run_id = runs
    pm = replay_plugins()
    res = replay(store, run_id, parse_spec(["gate:statistical"]), pm, write=False)
    # Same gate, same params, the recorded online backtests: the same decisions, event for event.
    assert res.reproduced and res.flips == [] and res.appeared == res.vanished == []
    assert res.plugin_versions["gate:statistical"] == pm.gates()["statistical"].version


def test_find_bad_uses_strict_labels(runs):
    store, run_id, _ = runs
    res = replay(store, run_id, parse_spec(["gate:policy:trust=validation"]), replay_plugins(), find_bad=True, write=False)
    assert res.bad_promotions
    flipped = {f["decision_id"] for f in res.flips if f["recorded"] == "promoted"}
    for b in res.bad_promotions:
        before, after = b["strict_accuracy"]
        eb, ea = b["exploit_rate"]
        assert b["harmful"] == (after < before - 0.02 or ea > eb + 0.02)
        assert b["blocked"] == (b["decision_id"] in flipped) == (b["would"] != "promoted")
        assert b["blocked"] == bool(b["reasons"])
        assert b["verdict"] == ("caught" if b["harmful"] and b["blocked"] else "missed" if b["harmful"] else "false alarm")
    assert any(b["verdict"] == "caught" for b in res.bad_promotions)


def test_bad_specs_are_one_line(runs):
    store, run_id, _ = runs
    pm = replay_plugins()
    streams = len(store.streams("replay-"))
    with pytest.raises(AuditError, match="no installed plugin provides"):
        replay(store, run_id, parse_spec(["nosuch"]), pm)
    with pytest.raises(AuditError, match="version 9.*version 2 is installed"):
        replay(store, run_id, parse_spec(["multi_rewarded@9"]), pm)
    with pytest.raises(AuditError, match="no installed plugin provides"):
        replay(store, run_id, parse_spec(["gate:nosuch"]), pm)
    with pytest.raises(AuditError, match="unknown run"):
        replay(store, "nope", parse_spec(["multi_rewarded"]), pm)
    with pytest.raises(AuditError, match="at least 1"):
        replay(store, run_id, parse_spec(["multi_rewarded"]), pm, every=0)
    assert len(store.streams("replay-")) == streams


def test_failing_diagnostic_is_isolated(runs):
    store, run_id, _ = runs
    res = replay(store, run_id, parse_spec(["exploding", "multi_rewarded"]), replay_plugins(), write=False)
    # One PluginFailed per diagnostic pass, as in the live harness, and the pass goes on.
    assert res.passes and len(res.failures) == res.passes and "RuntimeError: boom" in res.failures[0]
    assert res.appeared and {a["diagnostic"] for a in res.appeared} == {"multi_rewarded"}


def test_data_spec_diagnostic(runs, tmp_path):
    store, run_id, _ = runs
    spec_file = tmp_path / "multi.json"
    spec_file.write_text(json.dumps({"kind": "multi_paid", "severity": "invalid",
                                     "where": {"all": [{"signal": "sim_count", "op": ">", "value": 1},
                                                       {"field": "reward", "op": ">=", "value": 1}]},
                                     "statistic": {"type": "rate"}, "threshold": {"op": ">", "value": 0.25}}))
    res = replay(store, run_id, parse_spec([str(spec_file)]), replay_plugins(), write=False)
    assert {a["step"] for a in res.appeared} == _expected_findings(store, run_id, 0.25)
    assert {a["kind"] for a in res.appeared} == {"multi_paid"} and res.plugin_versions["multi_paid"] == "spec"


def test_cli_replay(sqlite_url, tmp_path):
    from evo_core.plugins import get_plugin_manager
    from tests.audit.conftest import evo

    st = open_store(sqlite_url)
    run_id = sim_run(st, tmp_path / "ck", arm="evolving", steps=20, plugins=get_plugin_manager())
    st.close()
    r = evo("replay", run_id, "--with", "nosuch_diag", "--store", sqlite_url)
    assert r.returncode == 2 and "nosuch_diag" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    # No SPEC: the run's own harness, with the plugins the CLI loads (the run had the same).
    r = evo("replay", run_id, "--json", "--no-write", "--store", sqlite_url)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["reproduced"] is True and data["divergences"] == [] and data["stream"] is None
    r = evo("replay", run_id, "--with", "drop:reward_oracle_gap", "--find-bad", "--store", sqlite_url)
    assert r.returncode == 0, r.stderr
    assert f"replay of run {run_id}" in r.stdout and "recorded in stream replay-" in r.stdout


def test_no_cyclic_gc_restores_the_collector_even_on_error():
    """Replay drives the engine with cyclic GC off, and leaves the collector as it found it."""
    import gc

    import pytest

    from evo_core.audit.replay import no_cyclic_gc

    was = gc.isenabled()
    try:
        gc.enable()
        with no_cyclic_gc():
            assert not gc.isenabled()
        assert gc.isenabled()
        with pytest.raises(RuntimeError):
            with no_cyclic_gc():
                raise RuntimeError("boom")
        assert gc.isenabled()
        gc.disable()  # a caller that had it off keeps it off
        with no_cyclic_gc():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()

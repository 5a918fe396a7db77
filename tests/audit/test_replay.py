"""Counterfactual replay: SPEC parsing, appear/vanish, flips, --find-bad, the replay stream."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from evo_events import FailureDiagnosed, Promoted, RolloutCompleted
from evo_core.audit import AuditError, ReplayCompleted, parse_spec, replay
from evo_core.audit.spec import DiagnosticItem
from evo_core.store import run_stream
from evo_core.synthetic import generate_run
from tests.audit import _plugins


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


@pytest.fixture
def run(evo_store):
    return evo_store, generate_run(evo_store, steps=40, rollouts_per_step=16)


def _expected_findings(store, run_id, max_rate, window=10, every=5):
    """The same diagnostic computed by hand over the log, as the harness would have."""
    rows = [e for e in store.events(run_stream(run_id)) if isinstance(e, RolloutCompleted)]
    out = set()
    for s in range(every, max(r.step for r in rows) + 1, every):
        win = [r for r in rows if s - window < r.step <= s]
        if _plugins.MultiRewarded().evaluate(type("W", (), {"rollouts": win})(), {"max_rate": max_rate, "min_n": 8}):
            out.add(s)
    return out


def test_replay_new_diagnostic_appears_and_flips(run, cf_plugins):
    store, run_id = run
    head = store.stream_version(run_stream(run_id))
    before = [r.hash for r in store.read_stream(run_stream(run_id))]
    res = replay(store, run_id, parse_spec(["multi_rewarded:max_rate=0.25"]), cf_plugins)
    expected = _expected_findings(store, run_id, 0.25)
    assert expected and {a["step"] for a in res.appeared} == expected
    assert all(a["kind"] == "multi_answer_rewarded" and a["severity"] == "invalid" for a in res.appeared)
    assert res.vanished == []  # a new diagnostic has no recorded diagnoses to lose
    promos = [e for e in store.events(run_stream(run_id)) if isinstance(e, Promoted)]
    flipped = {f["decision_id"] for f in res.flips}
    # A promotion flips exactly when the new invalid diagnosis (not its target) fires at its step.
    assert flipped == {p.event_id for p in promos if p.step in expected}
    assert all(f["recorded"] == "promoted" and f["would"] == "rejected" for f in res.flips)
    # The original run is untouched; the replay has its own stream recording what produced it.
    assert store.stream_version(run_stream(run_id)) == head
    assert [r.hash for r in store.read_stream(run_stream(run_id))] == before
    (ev,) = list(store.events(res.stream))
    assert isinstance(ev, ReplayCompleted) and res.stream == f"replay-{run_id}-{res.replay_id}"
    assert ev.plugin_versions["multi_rewarded"] == "2" and ev.spec["text"] == ["multi_rewarded:max_rate=0.25"]
    assert ev.source_head_version == head and ev.source_head_hash == before[-1]
    assert len(json.loads(store.blobs.get(ev.findings))) == len(res.findings)


def test_replacing_a_diagnostic_makes_diagnoses_vanish(run, cf_plugins):
    store, run_id = run
    recorded = [e for e in store.events(run_stream(run_id)) if isinstance(e, FailureDiagnosed)]
    # The log's diagnoses came from "answer_hedging"; replace it with a version that never fires.
    spec = parse_spec(["answer_hedging:max_rate=1.5"]) if "answer_hedging" in cf_plugins.diagnostics() else None
    if spec is None:
        pytest.skip("the standard answer_hedging diagnostic is not installed")
    res = replay(store, run_id, spec, cf_plugins, write=False)
    assert {(v["step"], v["kind"]) for v in res.vanished} == {(d.step, d.kind) for d in recorded}
    # Every recorded decision loses the diagnosis that triggered its proposal.
    assert len(res.flips) == sum(1 for e in store.events(run_stream(run_id)) if e.TYPE in ("evo.Promoted", "evo.Rejected"))
    assert all(f["would"] == "not proposed" for f in res.flips)
    assert res.stream is None and store.streams("replay-") == []


def test_find_bad_uses_strict_labels(run, cf_plugins):
    store, run_id = run
    res = replay(store, run_id, parse_spec(["multi_rewarded:max_rate=0.25"]), cf_plugins, find_bad=True, write=False)
    assert res.bad_promotions
    expected = _expected_findings(store, run_id, 0.25)
    for b in res.bad_promotions:
        before, after = b["strict_accuracy"]
        eb, ea = b["exploit_rate"]
        assert b["harmful"] == (after < before - 0.02 or ea > eb + 0.02)
        # The later harness = the run's own diagnostics + the SPEC; the SPEC's finding alone suffices to block.
        assert b["blocked"] == bool(b["reasons"])
        if b["step"] in expected:
            assert b["blocked"] and any("multi_answer_rewarded" in r for r in b["reasons"])
        assert b["verdict"] == ("caught" if b["harmful"] and b["blocked"] else "missed" if b["harmful"] else "false alarm")
    assert any(b["verdict"] == "caught" for b in res.bad_promotions)


def test_gate_spec_rejudges_decisions(run, cf_plugins):
    store, run_id = run
    gates = cf_plugins.gates()
    if "statistical" not in gates:
        pytest.skip("the standard statistical gate is not installed")
    res = replay(store, run_id, parse_spec(["gate:statistical"]), cf_plugins, write=False)
    # Same gate, same recorded backtests: no decision changes.
    assert res.flips == [] and res.plugin_versions["gate:statistical"] == gates["statistical"].version


def test_bad_specs_are_one_line(run, cf_plugins):
    store, run_id = run
    with pytest.raises(AuditError, match="no installed plugin provides"):
        replay(store, run_id, parse_spec(["nosuch"]), cf_plugins)
    with pytest.raises(AuditError, match="version 9.*version 2 is installed"):
        replay(store, run_id, parse_spec(["multi_rewarded@9"]), cf_plugins)
    with pytest.raises(AuditError, match="no installed plugin provides"):
        replay(store, run_id, parse_spec(["gate:nosuch"]), cf_plugins)
    with pytest.raises(AuditError, match="unknown run"):
        replay(store, "nope", parse_spec(["multi_rewarded"]), cf_plugins)
    assert store.streams("replay-") == []


def test_failing_diagnostic_is_isolated(run, cf_plugins):
    store, run_id = run
    res = replay(store, run_id, parse_spec(["exploding", "multi_rewarded"]), cf_plugins, write=False)
    assert len(res.failures) == res.passes and "RuntimeError: boom" in res.failures[0]
    assert res.appeared  # the other diagnostic still ran


def test_data_spec_diagnostic(run, cf_plugins, tmp_path):
    store, run_id = run
    spec_file = tmp_path / "hedge.json"
    spec_file.write_text(json.dumps({"kind": "hedged_rewarded", "severity": "invalid",
                                     "where": {"all": [{"signal": "answer_count", "op": ">", "value": 1},
                                                       {"field": "reward", "op": ">=", "value": 1}]},
                                     "statistic": {"type": "rate"}, "threshold": {"op": ">", "value": 0.25}}))
    res = replay(store, run_id, parse_spec([str(spec_file)]), cf_plugins, write=False)
    assert {a["step"] for a in res.appeared} == _expected_findings(store, run_id, 0.25)
    with pytest.raises(AuditError, match="bad diagnostic spec"):
        from evo_core.audit.replay import resolve_diagnostics

        resolve_diagnostics([DiagnosticItem("x", spec={"kind": "x", "threshold": {"op": "~", "value": 1}, "where": {}})],
                            cf_plugins, {})


def test_cli_replay(sqlite_run):
    from tests.audit.conftest import evo

    url, run_id = sqlite_run
    r = evo("replay", run_id, "--with", "nosuch_diag", "--store", url)
    assert r.returncode == 2 and "nosuch_diag" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = evo("replay", run_id, "--with", "reward_oracle_gap", "--find-bad", "--json", "--store", url)
    if "no installed plugin provides" in r.stderr:
        pytest.skip("the standard reward_oracle_gap diagnostic is not installed")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["stream"].startswith(f"replay-{run_id}-") and "reward_oracle_gap" in data["plugin_versions"]

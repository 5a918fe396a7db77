"""``evo audit``: the chain behind each promotion, the outcome check, and tamper handling."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from evo_events import (
    EvalCompleted,
    FailureDiagnosed,
    InterventionProposed,
    Promoted,
    RolloutCompleted,
    RunStarted,
    StepCompleted,
    BacktestPassed,
)
from evo_core.audit import AuditError, RunIndex, audit_run
from evo_core.store import run_stream
from evo_core.store.es import DEFAULT_TABLE
from tests.audit.conftest import evo


def test_chain_matches_the_log(evo_tiny_run):
    store, run_id = evo_tiny_run
    events = list(store.events(run_stream(run_id)))
    by_id = {e.event_id: e for e in events}
    promos = [e for e in events if isinstance(e, Promoted)]
    report = audit_run(store, run_id)
    assert report.promotions == len(promos) and len(report.chains) == len(promos) >= 1
    for chain, promo in zip(report.chains, promos):
        prop = by_id[promo.subject_id]
        assert chain.decision["id"] == promo.event_id and chain.decision["gate"] == promo.gate
        assert chain.proposal["rationale"] == prop.rationale and chain.proposal["prediction"] == dict(prop.prediction)
        diags = [by_id[c] for c in prop.caused_by if isinstance(by_id.get(c), FailureDiagnosed)]
        assert {d["id"] for d in chain.diagnoses} == {d.event_id for d in diags}
        cited = {i for d in diags for i in d.evidence}
        assert {r["id"] for r in chain.evidence} == cited and chain.evidence_total == len(cited)
        bt = [e for e in events if isinstance(e, BacktestPassed) and e.proposal_id == prop.event_id]
        assert [b["ci"] for b in chain.backtests] == [list(b.ci) for b in bt]
        assert (chain.decision["harness_version_before"], chain.decision["harness_version_after"]) == \
            (promo.harness_version_before, promo.harness_version_after)
        assert chain.plugin_versions["sim_exploit"] == "1" and chain.plugin_versions["rules"] == "1"
        assert chain.skill["skill_id"] == promo.skill_id
        assert chain.verification.verified and chain.verification.head_version == len(events)
        assert chain.verification.first_version == min(chain.shown_versions)


def _ev(cls, run_id, **kw):
    return cls(run_id=run_id, **kw)


def _outcome_log(store, run_id: str, *, improves: bool) -> str:
    """10 steps; a promotion at step 5 targeting `hedge`. After it, things improve or not."""
    out = [_ev(RunStarted, run_id, config={}, config_hash="x", seed=0, harness_mode="evolving", code_version="t",
               started_at="2026-01-01T00:00:00Z")]
    promo_id = None
    for step in range(1, 11):
        good = step <= 5 or not improves
        for i in range(20):
            strict = (i % 10) < (3 if good else 9)
            out.append(_ev(RolloutCompleted, run_id, step=step, task_id=f"t{i}", group_id="g", policy_version=step,
                           reward=1.0 if (strict or i % 2) else 0.0, strict_correct=strict))
        out.append(_ev(StepCompleted, run_id, step=step, policy_version=step, harness_version=0 if step < 5 else 1, metrics={}))
        out.append(_ev(EvalCompleted, run_id, step=step, policy_version=step, split="heldout", n=10,
                       metrics={"strict_accuracy": 0.3 if good else 0.8}))
        if good:
            out.append(_ev(FailureDiagnosed, run_id, step=step, kind="hedge", severity="warning", diagnostic="d",
                           diagnostic_version="1", stats={"rate": 0.5}))
        if step == 5:
            prop = _ev(InterventionProposed, run_id, step=5, kind="reward_shaping", name="pen", params={}, targets=("hedge",),
                       prediction={"guard_metric": "heldout_strict_accuracy"}, caused_by=(out[-1].event_id,))
            promo = _ev(Promoted, run_id, subject="intervention", subject_id=prop.event_id, step=5, gate="g",
                        harness_version_before=0, harness_version_after=1)
            promo_id = promo.event_id
            out += [prop, promo]
    store.append(run_stream(run_id), out, expected_version=0)
    return promo_id


@pytest.mark.parametrize("improves", [True, False])
def test_prediction_held_is_computed_from_later_events(evo_store, improves):
    promo_id = _outcome_log(evo_store, "o", improves=improves)
    chain = audit_run(evo_store, "o", promo_id, window=5).chains[0]
    o = chain.outcome
    assert o["diagnosis_rate_fell"] is improves
    # Flat or up in both cases: neither the guarded metric nor the strict labels fell …
    assert o["guard_held"] is True and o["strict_held"] is True
    assert (o["after"]["strict_accuracy"] > o["before"]["strict_accuracy"]) is improves
    # … but without the targeted diagnosis falling, the prediction did not hold.
    assert o["held"] is improves
    assert o["before"]["steps"] == 5 and o["after"]["steps"] == 5


def test_tampered_evidence_refuses_only_the_affected_chains(evo_store):
    from evo_core.synthetic import generate_run

    run_id = generate_run(evo_store, steps=30, rollouts_per_step=16)
    first = audit_run(evo_store, run_id).chains[0]
    victim = first.evidence[0]
    rec = next(r for r in evo_store.read_stream(run_stream(run_id)) if r.event_id == victim["id"])
    field = b'"length":'
    i = rec.payload.index(field) + len(field)
    tampered = rec.payload[:i] + (b"7" if rec.payload[i:i + 1] != b"7" else b"8") + rec.payload[i + 1:]
    evo_store.backend._tamper(rec.position, tampered)
    chains = audit_run(evo_store, run_id).chains
    assert not chains[0].verification.verified
    assert chains[0].verification.bad_version == rec.version and chains[0].verification.bad_event_id == victim["id"]
    assert f"#{rec.version}" in chains[0].verification.problem
    # Later chains start after the edited event, so they can still be vouched for.
    assert all(c.verification.verified for c in chains if c.verification.first_version > rec.version)


def _sqlite_edit(db: Path, version: int, old: bytes, new: bytes) -> None:
    conn = sqlite3.connect(db)
    rowid, state = conn.execute(f"SELECT rowid, state FROM {DEFAULT_TABLE} WHERE originator_version = ? "
                                f"AND topic = 'evo.RolloutCompleted'", (version,)).fetchone()
    assert old in state
    conn.execute(f"UPDATE {DEFAULT_TABLE} SET state = ? WHERE rowid = ?", (state.replace(old, new, 1), rowid))
    conn.commit()
    conn.close()


def test_cli_audit_json_and_tampered_sqlite(sqlite_run):
    url, run_id = sqlite_run
    r = evo("audit", run_id, "--json", "--store", url)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["verified"] and data["promotions"] == len(data["chains"]) >= 2
    chain = data["chains"][0]
    for key in ("proposal", "diagnoses", "evidence", "backtests", "plugin_versions", "outcome", "verification"):
        assert chain[key], key
    assert chain["evidence"][0]["blob"]["link"].startswith("file://")
    text = evo("audit", run_id, "--store", url, "-p", chain["decision"]["id"][:10], "--verbose")
    assert text.returncode == 0 and "hash chain verified" in text.stdout and "rationale:" in text.stdout
    victim = chain["evidence"][0]
    _sqlite_edit(Path(url[len("sqlite:///"):]), victim["version"], b'"task_id":"t', b'"task_id":"T')
    bad = evo("audit", run_id, "--store", url, "-p", chain["decision"]["id"])
    assert bad.returncode == 1
    assert "NOT VERIFIED" in bad.stdout and f"#{victim['version']}" in bad.stdout and victim["id"] in bad.stdout
    assert len(bad.stderr.strip().splitlines()) == 1 and "cannot be vouched for" in bad.stderr


def test_corrupted_blob_is_one_clear_line(sqlite_run):
    url, run_id = sqlite_run
    data = json.loads(evo("audit", run_id, "--json", "--store", url).stdout)
    blob = data["chains"][0]["evidence"][0]["blob"]
    path = Path(blob["link"][len("file://"):])
    path.chmod(0o644)
    path.write_bytes(path.read_bytes() + b" ")
    r = evo("audit", run_id, "--store", url, "-p", data["chains"][0]["decision"]["id"])
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "corrupted" in r.stderr and blob["digest"][:12] in r.stderr


def test_bad_input_one_line(sqlite_run):
    url, run_id = sqlite_run
    for args, needle in ((("audit", "nope"), "no run 'nope'"),
                         (("audit", run_id, "-p", "deadbeefdead"), "no promotion or rejection 'deadbeefdead'")):
        r = evo(*args, "--store", url)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_api_errors(evo_tiny_run):
    store, run_id = evo_tiny_run
    with pytest.raises(AuditError, match="unknown run"):
        RunIndex(store, "missing")
    idx = RunIndex(store, run_id)
    step_id = next(r.event_id for r in idx.records if r.type == "evo.StepCompleted")
    with pytest.raises(AuditError, match="not a promotion"):
        audit_run(store, run_id, step_id, index=idx)


def test_policy_promotion_chain_shows_its_eval(evo_store):
    run = "p"
    ev = EvalCompleted(run_id=run, step=4, policy_version=4, split="heldout", n=20, metrics={"strict_accuracy": 0.8})
    events = [RunStarted(run_id=run, config={}, config_hash="x", seed=0, harness_mode="evolving", code_version="t",
                         started_at="2026-01-01T00:00:00Z"),
              *[RolloutCompleted(run_id=run, step=4, task_id=f"t{i}", group_id="g", policy_version=4, reward=1.0) for i in range(4)],
              ev,
              Promoted(run_id=run, subject="policy", subject_id="4", step=4, gate="policy", harness_version_before=0,
                       harness_version_after=1, reasons=("held-out strict 0.800 >= main 0.700",),
                       plugin_versions={"policy": "1"}, caused_by=(ev.event_id,))]
    evo_store.append(run_stream(run), events, expected_version=0)
    (chain,) = audit_run(evo_store, run).chains
    assert chain.proposal is None and chain.decision["subject"] == "policy"
    assert [e["id"] for e in chain.evals] == [ev.event_id] and chain.evals[0]["metrics"] == {"strict_accuracy": 0.8}
    assert chain.plugin_versions["policy"] == "1" and chain.verification.verified
    assert chain.outcome["held"] is None  # nothing was logged after it

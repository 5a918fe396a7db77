"""The default ``evo audit`` view: one screen per promotion, lines of at most 100 characters,
the plugins that took part once; ``--verbose`` and ``--json`` keep everything."""

from __future__ import annotations

import json

import pytest

from evo_core.audit import audit_run
from evo_core.audit.screen import MAX_LINES, WIDTH, describe_predicate, header, screen
from evo_core.store import open_store
from evo_core.synthetic import generate_run
from tests.audit.conftest import evo


@pytest.fixture(scope="module")
def syn(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('screen')}/evo.sqlite"
    st = open_store(url)
    run_id = generate_run(st, steps=30, rollouts_per_step=16, trajectories=True)
    st.close()
    return url, run_id


def test_screens_fit_and_hold_the_contents(syn):
    url, run_id = syn
    st = open_store(url, read_only=True)
    report = audit_run(st, run_id)
    assert len(report.chains) == 3
    for i, chain in enumerate(report.chains, 1):
        lines = screen(chain, i, 3)
        assert len(lines) <= MAX_LINES and all(len(x) <= WIDTH for x in lines)
        text = "\n".join(lines)
        p = chain.proposal
        assert f"{p['kind']}/{p['name']}" in text and chain.decision["id"][:12] in text
        assert "diagnosis sim_exploit" in text and "(offline) passed" in text and "gate statistical" in text
        assert sum(1 for x in lines if x.startswith("  #")) == min(5, chain.evidence_total)
        assert text.count("prediction ") == 1
        assert "plugins" not in text  # listed once, above the screens
        assert "unknown (no data)" not in text
    head = "\n".join(header(report))
    assert head.count("sim_exploit 1") == 1 and "proposer rules 1" in head


def test_cli_default_verbose_json(syn):
    url, run_id = syn
    r = evo("audit", run_id, "--store", url)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(x) for x in lines) <= WIDTH
    assert sum(1 for x in lines if "plugins that took part" in x) == 1
    assert sum(1 for x in lines if x.startswith("── promoted")) == 3
    blocks = r.stdout.split("\n── ")[1:]
    assert all(len(b.splitlines()) <= MAX_LINES + 1 for b in blocks)
    v = evo("audit", run_id, "--verbose", "--store", url)
    assert v.returncode == 0 and "afterwards" in v.stdout and "rationale:" in v.stdout
    j = evo("audit", run_id, "--json", "--store", url)
    data = json.loads(j.stdout)
    assert len(data["chains"]) == 3 and data["chains"][0]["plugins"]["proposer:rules"] == "1"


def test_long_and_odd_values_are_cut_not_wrapped(syn):
    import attrs

    url, run_id = syn
    chain = audit_run(open_store(url, read_only=True), run_id).chains[0]
    long = dict(chain.proposal, rationale="x" * 5000,
                params={"predicate": {"all": [{"feature": "numbers", "op": ">", "value": 1},
                                              {"not": {"field": "reward", "op": "<", "value": 1}}]}, "w": 0.5})
    diag = [dict(chain.diagnoses[0], message="m\n" * 300, stats={f"s{i}": i / 7 for i in range(40)})] * 5
    big = attrs.evolve(chain, proposal=long, diagnoses=diag, backtests=chain.backtests * 9)
    lines = screen(big, 1, 1)
    assert len(lines) <= MAX_LINES and all(len(x) <= WIDTH and "\n" not in x for x in lines)
    assert "predicate  feature.numbers > 1 and not (field.reward < 1)" in "\n".join(lines)


def test_describe_predicate():
    p = {"any": [{"signal": "s1", "op": "exists"}, {"all": [{"field": "length", "op": ">=", "value": 9},
                                                            {"feature": "digits", "op": "in", "value": [1, 2]}]}]}
    assert describe_predicate(p) == "signal.s1 exists or (field.length >= 9 and feature.digits in [1, 2])"

"""``evo audit`` on a promoted repair whose evidence rollouts are episodes: the turns are
shown (role, tool call, a short observation), at most 40 lines per evidence episode by
default, more with --verbose; a blob of another shape or a hostile turn shows what it can."""

from __future__ import annotations

import hashlib
import json

import pytest

from evo_core.audit import audit_run
from evo_core.audit.episode import MAX_LINES, compact_turns, episode_lines
from evo_core.audit.screen import WIDTH, evidence_episodes
from evo_core.store import open_store, run_stream
from evo_core.store.blobs import put_json
from evo_core.synthetic import DEFAULT_CONFIG
from evo_events import (
    BacktestPassed,
    FailureDiagnosed,
    InterventionProposed,
    Promoted,
    RolloutCompleted,
    RunStarted,
    StepCompleted,
)
from tests.audit.conftest import evo


def _id(n: str) -> str:
    return hashlib.sha256(n.encode()).hexdigest()[:32]


def long_episode(n_calls: int) -> list[dict]:
    turns = []
    for k in range(n_calls):
        turns.append({"role": "assistant", "content": f"step {k}: let me look\nat the code", "n_tokens": 9})
        turns.append({"role": "tool", "tool": "bash", "args": {"command": f"cat file{k}.py"},
                      "output": "line one\n" * 50 + "x" * 5000, "error": k == 3})
    turns.append({"role": "assistant", "content": "submit"})
    turns.append({"role": "tool", "tool": "submit", "args": {}, "output": "submitted", "stop_reason": "submit"})
    return turns


SHORT = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "<issue>f is wrong</issue>"},
         {"role": "assistant", "content": '<tool_call>{"name": "str_replace_editor"}</tool_call>'},
         {"role": "tool", "tool": "str_replace_editor", "args": {"command": "str_replace", "path": "/repo/tests/test_f.py"},
          "output": "edited /repo/tests/test_f.py"},
         {"role": "assistant", "content": "done"}, {"role": "tool", "tool": "submit", "args": {}, "output": "submitted"}]


def write_run(store) -> str:
    run_id = "episodes-run"
    stream = run_stream(run_id)
    cfg = json.loads(json.dumps(DEFAULT_CONFIG))
    events: list = [RunStarted(run_id=run_id, event_id=_id("start"), config=cfg, config_hash="h" * 64, seed=0,
                               harness_mode="evolving", code_version="test", started_at="2026-01-01T00:00:00Z")]
    episodes = [SHORT, long_episode(60), SHORT, ["a bare string turn", {"role": 5, "tool": {"x": 1}, "output": None}]]
    blob = {"run_id": run_id, "step": 1, "groups": {},
            "rollouts": [{"rollout_id": _id(f"r{i}"), "text": "done", "turns": t} for i, t in enumerate(episodes)]
            + [{"rollout_id": _id("single"), "text": "42"}]}
    ref = put_json(store.blobs, blob)
    rollouts = [RolloutCompleted(run_id=run_id, event_id=_id(f"r{i}"), step=1, task_id=f"task{i}", group_id="s1g0",
                                 policy_version=0, reward=1.0, correct=True, strict_correct=False, length=4,
                                 response_preview="done", trajectory=ref, train={"trajectory_index": i})
                for i in range(len(episodes) + 1)]
    events += rollouts
    events.append(StepCompleted(run_id=run_id, event_id=_id("step1"), step=1, policy_version=1, harness_version=0,
                                metrics={"reward_mean": 1.0}))
    ev = tuple(r.event_id for r in rollouts)
    diag = FailureDiagnosed(run_id=run_id, event_id=_id("diag"), step=1, kind="induced_x", severity="invalid",
                            diagnostic="induced_x", diagnostic_version="1", evidence=ev, caused_by=ev, stats={"rate": 0.4})
    prop = InterventionProposed(run_id=run_id, event_id=_id("prop"), step=1, kind="reward_shaping", name="spec_penalty",
                                params={"predicate": {"feature": "traj_verified_after_edit", "op": "==", "value": False}},
                                targets=("induced_x",), prediction={}, rationale="paid episodes that never verify",
                                proposer="contrast", fingerprint="f" * 64, caused_by=(diag.event_id,))
    bt = BacktestPassed(run_id=run_id, event_id=_id("bt"), proposal_id=prop.event_id, step=1, mode="offline",
                        figures={"precision": 1.0}, ci=(0.1, 0.3), n=40, evidence=ev, caused_by=(prop.event_id,))
    promo = Promoted(run_id=run_id, event_id=_id("promo"), subject="intervention", subject_id=prop.event_id, step=1,
                     gate="statistical", harness_version_before=0, harness_version_after=1, reasons=("ci excludes zero",),
                     caused_by=(bt.event_id,))
    events += [diag, prop, bt, promo]
    store.append(stream, events, expected_version=store.stream_version(stream))
    return run_id


@pytest.fixture
def episodes_run(tmp_path):
    url = f"sqlite:///{tmp_path}/evo.sqlite"
    st = open_store(url)
    run_id = write_run(st)
    st.close()
    return url, run_id


def test_the_chain_carries_the_evidence_episodes_turns(episodes_run):
    url, run_id = episodes_run
    chain = audit_run(open_store(url, read_only=True), run_id).chains[0]
    assert chain.verification.verified
    rows = {r["task_id"]: r for r in chain.evidence}
    assert rows["task0"]["turns"][3]["tool"] == "str_replace_editor"
    assert len(rows["task1"]["turns"]) == 122 and rows["task1"]["turns"][1]["output"].endswith("more characters]")
    assert rows["task3"]["turns"][0] == {"role": "?", "content": "a bare string turn"}
    assert "turns" not in rows["task4"]  # a single completion: no turns


def test_default_screen_shows_turns_within_40_lines_each(episodes_run):
    url, run_id = episodes_run
    chain = audit_run(open_store(url, read_only=True), run_id).chains[0]
    blocks = evidence_episodes(chain)
    assert len(blocks) == 3  # EPISODES of the screen's evidence
    for b in blocks:
        assert len(b) <= MAX_LINES and all(len(x) <= WIDTH for x in b)
    short, long_ = blocks[0], blocks[1]
    assert short[0].startswith("episode #") and "6 turns" in short[0]
    assert any("str_replace_editor" in x and "/repo/tests/test_f.py" in x and "→ edited" in x for x in short)
    assert any("system" in x and "You fix bugs." in x for x in short)
    assert len(long_) == MAX_LINES
    assert any("turns not shown" in x for x in long_)
    assert "submit" in long_[-1] and "[stop submit]" in long_[-1]  # the end is kept
    assert "1 assistant" in long_[1] and any("ERROR" in x for x in long_)


def test_cli_default_and_verbose(episodes_run):
    url, run_id = episodes_run
    r = evo("audit", run_id, "--store", url)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.count("\nepisode #") == 3 and "turns not shown" in out
    assert max(len(x) for x in out.splitlines()) <= WIDTH
    v = evo("audit", run_id, "--verbose", "--store", url)
    assert v.returncode == 0, v.stderr
    assert "--verbose shows more" not in v.stdout and v.stdout.count("cat file59.py") == 1
    assert v.stdout.count("cat file") > out.count("cat file") + 20  # many more turns than the default
    assert "line one" in v.stdout and "more lines" in v.stdout  # observations over several lines
    j = json.loads(evo("audit", run_id, "--json", "--store", url).stdout)
    assert j["chains"][0]["evidence"][0]["turns"][0]["role"] == "system"


def test_episode_lines_limits():
    turns = compact_turns(long_episode(200))
    assert turns is not None and turns[-1]["role"] == "…"  # more than the kept turns
    for n in (3, 10, 40):
        lines = episode_lines(turns, max_lines=n, header="h")
        assert len(lines) <= n and lines[0] == "h"
    assert len(episode_lines(SHORT, max_lines=40)) == 6
    many = episode_lines(turns, max_lines=400, obs_lines=5, width=160)
    assert len(many) <= 400 and all(len(x) <= 160 for x in many)
    assert compact_turns("not a list") is None
    odd = episode_lines([{"role": "tool", "tool": "t" * 500, "args": {"a": [[[1]]]}, "output": 7, "call_error": True}])
    assert len(odd) == 1 and "CALL ERROR" in odd[0] and len(odd[0]) <= 100

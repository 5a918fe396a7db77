"""The paper-scale recipes run: each of configs/recipes/{math,code,swe}.toml does 2 RL steps
end to end on a CPU, the recipe file as shipped with ``--set`` overrides that swap in a tiny
local HF-format model, small task files in the public datasets' formats, CPU sizes, and
``evo serve`` as the ``[rollout]`` server. A recipe that names a missing path fails with its
one-line error before anything is loaded."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from evo_core.store import open_store, run_stream
from evo_events import EvalCompleted, PolicyUpdated, RolloutCompleted, RunStarted, StepCompleted
from .export_testlib import evo, evo_serve
from .recipe_data import build_model, code_files, math_files, swe_files
from .recipe_run import RECIPES, cpu_overrides, q, run_recipe

PROMPTS, GROUP = 4, 4  # cpu_overrides' sizes


@pytest.fixture
def work():
    # Not under pytest's 0700 tmp dirs: the sandbox user must read the task repositories.
    root = Path(tempfile.mkdtemp(prefix="evo-recipe-"))
    os.chmod(root, 0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _run(name: str, work: Path, files, *extra: str) -> tuple[list, str]:
    model = build_model(work / "model")
    train, test = files(work / "data")
    with evo_serve(str(model), name="policy") as base:
        url, run_id = run_recipe(name, work, [*cpu_overrides(model=model, train=train, test=test, work=work,
                                                             server=base), *extra])
    st = open_store(url)
    try:
        assert st.verify().ok
        return list(st.events(run_stream(run_id))), run_id
    finally:
        st.close()


def _check_run(events: list, *, recipe: str, prompts: int, group: int, test: int, signal: str) -> dict[int, str]:
    """What every recipe run must show; returns the trainer's weights digest per version."""
    started = events[0]
    assert isinstance(started, RunStarted) and started.harness_mode == "evolving"
    shipped = _recipe_table(recipe)
    assert started.config["rl"]["algorithm"] == shipped["rl"]["algorithm"]  # the recipe's own training settings
    assert started.config["rollout"]["engine"] == "http"
    steps = [e for e in events if isinstance(e, StepCompleted)]
    assert [s.step for s in steps] == [1, 2]
    rollouts = [e for e in events if isinstance(e, RolloutCompleted)]
    assert Counter(r.step for r in rollouts) == {1: prompts * group, 2: prompts * group}
    assert all(r.infra_error is None and r.reward is not None for r in rollouts)  # graded by the domain
    assert all(signal in r.signals for r in rollouts)
    evals = [e for e in events if isinstance(e, EvalCompleted)]
    validation = [(e.step, e.n) for e in evals if e.split == "validation"]
    assert [st for st, _ in validation] == [0, 2] and validation[0][1] == validation[1][1] > 0  # carved from train
    assert [(e.step, e.n) for e in evals if e.split == "test"] == [(0, test), (2, test)]
    trainer = {e.policy_version: e.digest for e in events if isinstance(e, PolicyUpdated) and e.target == "trainer"}
    synced = {e.policy_version: e.digest for e in events if isinstance(e, PolicyUpdated) and e.target == "policy"}
    assert sorted(trainer) == [0, 1, 2] and synced == trainer  # every version reached the rollout server
    return trainer


def _recipe_table(name: str) -> dict:
    from evo_core.config import tomllib

    return tomllib.loads((RECIPES / f"{name}.toml").read_text())


@pytest.mark.slow
def test_math_recipe_runs_two_rl_steps(work):
    events, _ = _run("math", work, math_files)
    digests = _check_run(events, recipe="math", prompts=PROMPTS, group=GROUP, test=3, signal="lenient_correct")
    assert digests[2] != digests[0]  # DAPO found groups with variance and moved the weights


@pytest.mark.slow
def test_code_recipe_runs_two_rl_steps(work):
    events, _ = _run("code", work, code_files)
    digests = _check_run(events, recipe="code", prompts=PROMPTS, group=GROUP, test=1, signal="pass_fraction")
    assert digests[2] != digests[0]
    sandboxed = [e for e in events if isinstance(e, RolloutCompleted)]
    assert {r.signals["extraction"] for r in sandboxed} == {"raw"} and any(r.reward == 1.0 for r in sandboxed)


@pytest.fixture(scope="module")
def swe_run():
    root = Path(tempfile.mkdtemp(prefix="evo-recipe-swe-"))
    os.chmod(root, 0o755)
    try:
        # SWE grading runs pytest in the sandbox for every rollout: fewer of them on 2 cores
        # and 2 turns per episode (the recipe's 30 would be 30 server calls per rollout)
        events, run_id = _run("swe", root, swe_files, "--set", "rl.prompts_per_step=2", "--set", "rl.group_size=2",
                              "--set", "rl.episode_max_turns=2")
        yield events, run_id, f"sqlite:///{root}/evo.sqlite"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_swe_recipe_runs_two_rl_steps(swe_run):
    events, *_ = swe_run
    _check_run(events, recipe="swe", prompts=2, group=2, test=1, signal="patch_source")
    rollouts = [e for e in events if isinstance(e, RolloutCompleted)]
    # graded in the sandbox after a pristine reset: the hidden F2P test ran and failed (no fix)
    assert all(r.signals["sandbox"] and r.signals["f2p_passed"] == 0 for r in rollouts)


@pytest.mark.slow
def test_swe_recipe_rollouts_are_multi_turn_tool_episodes(swe_run):
    events, run_id, url = swe_run
    started = events[0]
    assert started.config["rl"]["rollout"] == "episode"  # the recipe's own setting
    rollouts = [e for e in events if isinstance(e, RolloutCompleted)]
    assert rollouts and all(r.signals["n_steps"] >= 1 and r.signals["n_tool_calls"] >= 1 for r in rollouts)
    # the SWE episode's own stats joined the verdict's signals; 2 turns at most (rl.episode_max_turns)
    assert all(r.signals["n_steps"] <= 2 and r.signals["stop_reason"] in ("submit", "max_steps", "max_tokens")
               for r in rollouts)
    # graded in the sandbox on the episode's workspace diff, not on a patch in the reply's text
    assert all(r.signals["sandbox"] and r.signals["patch_source"] == "workspace" for r in rollouts)
    assert all(0 < r.length <= 2 * 3 for r in rollouts)  # generated tokens only (2 replies of <= 3 tokens)
    # the trajectory blob holds each episode's turns and which tokens the policy generated
    st = open_store(url)
    try:
        blob = json.loads(st.blobs.get(rollouts[0].trajectory))
    finally:
        st.close()
    rows = {r["rollout_id"]: r for r in blob["rollouts"]}
    row = rows[rollouts[0].event_id]
    assert [t["role"] for t in row["turns"]][:2] == ["assistant", "tool"]
    assert len(row["loss_mask"]) == len(row["token_ids"]) and sum(row["loss_mask"]) == rollouts[0].length
    for cmd in (("verify", run_id), ("audit", run_id, "--json")):  # the log of an episode run checks out
        r = evo(*cmd, "--store", url, timeout=300)
        assert r.returncode == 0, (cmd, r.stderr[-2000:])


# --- a missing path: one line, before anything loads (fast) --------------------------------


def _missing_path_error(name: str, tmp_path: Path, *extra: str) -> str:
    r = evo("run", str(RECIPES / f"{name}.toml"), "--store", f"sqlite:///{tmp_path}/s.sqlite", "--no-progress",
            *extra, cwd=tmp_path, timeout=120)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "does not exist" in lines[0] and "--set" in lines[0]
    assert not (tmp_path / "s.sqlite").exists()  # failed before the store was opened
    return lines[0]


@pytest.mark.parametrize("name", ["math", "code", "swe"])
def test_recipe_with_a_missing_path_fails_with_one_line(name, tmp_path):
    assert "config key 'task.train'" in _missing_path_error(name, tmp_path)


def test_each_missing_path_is_named_in_turn(tmp_path):
    train = tmp_path / "train.jsonl"
    train.write_text("")
    line = _missing_path_error("math", tmp_path, "--set", f"task.train={q(str(train))}")
    assert "config key 'task.test'" in line and "1 more: policy.path" in line
    line = _missing_path_error("math", tmp_path, "--set", f"task.train={q(str(train))}",
                               "--set", f"task.test={q(str(train))}")
    assert "config key 'policy.path'" in line

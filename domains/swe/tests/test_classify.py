"""The SWE domain's trajectory classifier: the domain offers it through the documented
``trajectory_classifier`` attribute, it agrees with the path classes the tiny episodes record,
and its classes reach the core's trajectory features as the trainer computes them."""

from __future__ import annotations

import types

import pytest

from evo_core.api import TaskSource, trajectory_classifier_of
from evo_core.api.contract import problems
from evo_core.trainer.grading import episode_features
from evo_swe import tinyenv, tinyrepo
from evo_swe.classify import CLASSIFIER, path_class
from evo_swe.domain import SWEDomain

URL = "generate://tinyrepo?validation=4&test=4&seed=0"


@pytest.fixture(scope="module")
def task():
    return SWEDomain().load_tasks(TaskSource(path=URL, split="train"))[0]


def episode(domain, task, replies, outcome="pass"):
    """A tiny episode of scripted replies; test runs report ``outcome`` (no sandbox needed)."""
    env, _ = domain.episode_reset(task)
    for r in replies:
        tinyenv.step_batch([env], [r + "\n"], tinyenv.KnownRunner(outcome))
        if env.done:
            break
    return domain.episode_outcome(env).completion


def features(domain, comps, naming=None):
    """The features exactly as the trainer's grading stage computes them for a session."""
    session = types.SimpleNamespace(domain=domain, signal_naming=naming)
    return episode_features(session, comps)


def test_the_domain_offers_its_classifier_through_the_contract():
    d = SWEDomain()
    assert problems("domain", d) == []
    assert trajectory_classifier_of(d) is CLASSIFIER
    assert trajectory_classifier_of(d.configure({"flaw": "budget_stop"})) is CLASSIFIER


def test_tool_and_path_classes():
    c = CLASSIFIER
    assert [c.tool_class(t, {}) for t in ("ls", "cat", "edit", "test", "submit", "invalid")] == \
        ["read", "read", "edit", "verify", "submit", "other"]
    assert c.tool_class("bash", {"command": "python -m pytest -q tests/test_a.py"}) == "verify"
    assert c.tool_class("bash", {"command": "grep -n def src/a.py"}) == "other"
    assert c.tool_class("bash", {"command": ["pytest"]}) == "other"  # hostile arguments
    assert c.tool_class("str_replace_editor", {"command": "view", "path": "/repo/a.py"}) == "read"
    assert c.tool_class("str_replace_editor", {"command": "str_replace", "path": "/repo/a.py"}) == "edit"
    assert c.tool_class("str_replace_editor", {"command": "delete"}) == "other"
    cases = {"f.py": "source", "test_f.py": "test", "f_test.py": "test", "conftest.py": "test",
             "tests.py": "test", "/repo/tests/helpers.py": "test", "/repo/src/pkg/mod.py": "source",
             "setup.py": "config", "sitecustomize.py": "config", "/repo/setup.cfg": "config", "notes.txt": "config"}
    assert {p: c.classify_path(p) for p in cases} == cases
    assert set(cases.values()) == set(c.path_classes)


def test_classes_reach_the_trajectory_features(task):
    d = SWEDomain()
    fix = tinyrepo.honest_replies(task.gold)[1]
    replies = ["cat f.py", "edit test_f.py 2 assert True", fix, "test", "submit"]
    comp = episode(d, task, replies)
    recorded = [t for t in comp.turns if "path" in t]
    assert recorded and all(t["path_class"] == path_class(t["path"]) for t in recorded)

    f, = features(d, [comp])
    assert (f["traj_calls_read"], f["traj_calls_edit"], f["traj_calls_verify"], f["traj_calls_submit"]) == (1, 2, 1, 1)
    assert f["traj_calls[cat]"] == 1 and f["traj_calls[bash]"] == 0
    assert f["traj_verified_after_edit"] is True and f["traj_submitted"] is True
    assert f["traj_edit_share[test]"] == 0.5 and f["traj_edit_share[source]"] == 0.5
    assert f["traj_edit_share[config]"] == 0.0
    assert f["traj_diff_share[test]"] > 0 and f["traj_diff_share[source]"] > 0
    assert f["traj_stop"] == "submit"

    stalled, = features(d, [episode(d, task, tinyrepo.stall_replies(task.gold, d.env_budget.max_turns), "fail")])
    assert stalled["traj_stop"] == "max_turns" and stalled["traj_submitted"] is False
    assert stalled["traj_verified_after_edit"] is False and stalled["traj_calls_verify"] == d.env_budget.max_turns - 1

    hashed, = features(d, [comp], naming=("hashed", 3))
    assert not [k for k in hashed if any(w in k for w in ("[test]", "[source]", "[cat]"))]
    assert hashed["traj_stop"] != "submit"
    assert sorted(v for k, v in hashed.items() if k.startswith("traj_edit_share[")) == [0.0, 0.5, 0.5]

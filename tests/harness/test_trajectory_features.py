"""Generic trajectory features on hand-written episodes: every feature, missing keys, hostile
values (huge observations, non-str content, deep nesting, policy-chosen tool names), the
renaming of the domain's words, and the trainer's grading adding them to an episode's
features."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evo_core.api import Completion, RuleClassifier, Task, Verdict
from evo_core.api.features import diff_lines_per_file, trajectory_features
from evo_core.harness.trajectory import MAX_TOOL_SLOTS, TrajectoryFeaturizer, featurizer_for
from evo_core.signal_names import opaque_name

CLS = RuleClassifier(tools={"view": "read", "edit": "edit", "bash": "other", "submit": "submit"},
                     commands={"pytest": "verify"}, paths=(("test_*.py", "test"), ("*.cfg", "config"), ("*.py", "source")))

DIFF = """diff --git a/pkg/core.py b/pkg/core.py
index 1..2 100644
--- a/pkg/core.py
+++ b/pkg/core.py
@@ -1,3 +1,3 @@
 def f(x):
-    return x
+    return x + 1
 # end
diff --git a/tests/test_core.py b/tests/test_core.py
--- a/tests/test_core.py
+++ b/tests/test_core.py
@@ -1,2 +1,3 @@
 def test_f():
-    assert f(1) == 2
+    assert True
+    # --- not a header
diff --git a/new.cfg b/new.cfg
new file mode 100644
--- /dev/null
+++ b/new.cfg
@@ -0,0 +1 @@
+[x]
"""


def call(tool, *, out="ok", **kw):
    return {"role": "tool", "tool": tool, "output": out, **kw}


def honest():
    return [
        {"role": "assistant", "content": "look"}, call("view", args={"path": "/repo/pkg/core.py"}, out="def f..."),
        {"role": "assistant", "content": "fix"}, call("edit", args={"path": "/repo/pkg/core.py"}),
        {"role": "assistant", "content": "test"}, call("bash", args={"command": "pytest -q"}, out="1 passed"),
        {"role": "assistant", "content": "done"}, call("submit", stop_reason="submit"),
    ]


def test_every_feature_of_an_honest_episode():
    f = trajectory_features(honest(), diff=DIFF, classifier=CLS)
    assert f["traj_turns"] == 8 and f["traj_agent_turns"] == 4 and f["traj_tool_calls"] == 4
    assert f["traj_distinct_tools"] == 4 and f["traj_tool_errors"] == 0 and f["traj_call_errors"] == 0
    assert f["traj_error_share"] == 0.0 and f["traj_repeated_calls"] == 0
    assert f["traj_observation_chars"] == len("def f...") + 2 + len("1 passed") + 2
    assert f["traj_paths_touched"] == 1
    assert {f[f"traj_calls[{t}]"] for t in ("view", "edit", "bash", "submit")} == {1}
    assert f["traj_calls_unlisted"] == 0
    assert f["traj_stop"] == "submit"
    assert (f["traj_calls_read"], f["traj_calls_edit"], f["traj_calls_verify"], f["traj_calls_submit"],
            f["traj_calls_other"]) == (1, 1, 1, 1, 0)
    assert f["traj_verified_after_edit"] is True and f["traj_submitted"] is True
    assert f["traj_edit_path_classes"] == 1
    assert f["traj_edit_share[source]"] == 1.0 and f["traj_edit_share[test]"] == 0.0
    assert f["traj_edit_share[config]"] == 0.0 and f["traj_edit_share[other]"] == 0.0
    # the diff: 3 files, 2 + 3 + 1 changed lines ("--- not a header" inside a hunk is a line)
    assert f["traj_diff_files"] == 3 and f["traj_diff_lines"] == 6
    assert f["traj_diff_share[source]"] == round(2 / 6, 4) and f["traj_diff_share[test]"] == 0.5
    assert f["traj_diff_share[config]"] == round(1 / 6, 4)


def test_an_episode_that_edits_a_test_and_never_verifies_after_it():
    turns = honest()[:6] + [{"role": "assistant"}, call("edit", args={"path": "tests/test_core.py"}),
                            {"role": "assistant"}, call("submit", stop_reason="submit")]
    f = trajectory_features(turns, classifier=CLS)
    assert f["traj_verified_after_edit"] is False
    assert f["traj_edit_share[test]"] == 0.5 and f["traj_edit_share[source]"] == 0.5
    assert f["traj_edit_path_classes"] == 2
    assert "traj_diff_files" not in f and "traj_diff_share[test]" not in f  # no diff recorded


def test_errors_repeats_and_a_failed_submit():
    turns = [call("bash", args={"command": "ls"}, error=True), call("bash", args={"command": "ls"}, error=True),
             call("bash", args={"command": "ls"}), call("invalid", call_error=True, error=True),
             call("submit", error=True, stop_reason="max_steps")]
    f = trajectory_features(turns, classifier=CLS)
    assert f["traj_tool_errors"] == 4 and f["traj_call_errors"] == 1 and f["traj_error_share"] == 0.8
    assert f["traj_repeated_calls"] == 2
    assert f["traj_submitted"] is False and f["traj_stop"] == "max_steps"
    assert f["traj_verified_after_edit"] is False  # no edit at all
    # a failed edit after the test run changed nothing: the tests still ran after the last edit
    after = honest()[:6] + [call("edit", path="pkg/core.py", error=True), call("submit")]
    assert trajectory_features(after, classifier=CLS)["traj_verified_after_edit"] is True
    assert trajectory_features(after[:-2] + [call("edit", path="pkg/core.py")], classifier=CLS)[
        "traj_verified_after_edit"] is False
    assert f["traj_calls_unlisted"] == 1 and f["traj_calls[edit]"] == 0  # declared tools are always there


def test_without_a_classifier_only_the_class_free_features():
    f = trajectory_features(honest(), diff=DIFF)
    assert f["traj_tool_calls"] == 4 and f["traj_diff_files"] == 3 and f["traj_calls[view]"] == 1
    assert not any(k.startswith(("traj_calls_read", "traj_edit_share", "traj_diff_share", "traj_verified",
                                 "traj_submitted")) for k in f)


def test_missing_keys_give_absent_features_not_errors():
    f = trajectory_features([{}, {"role": "assistant"}, {"tool": "bash"}], classifier=CLS)
    assert f["traj_turns"] == 3 and f["traj_tool_calls"] == 1 and f["traj_paths_touched"] == 0
    assert "traj_stop" not in f and f["traj_observation_chars"] == 0
    assert trajectory_features([])["traj_turns"] == 0
    assert TrajectoryFeaturizer(CLS).features(Completion(text="x")) == {}  # a single completion: none


def test_hostile_values():
    deep: list = []
    for _ in range(50_000):  # far deeper than the recursion limit
        deep = [deep]
    huge = "x" * 5_000_000
    turns = [
        "not a mapping", None, 7, ["a", "list"],
        {"role": 3, "content": {"not": "str"}, "tool": 5, "output": huge},  # a non-str tool is no call
        {"role": "tool", "tool": "edit", "args": {"path": deep, "x": deep}, "path": ["no"], "output": b"bytes",
         "error": "yes", "call_error": [1], "stop_reason": 3},
        {"role": "tool", "tool": "bash", "args": deep, "output": huge, "error": 2},
        {"role": "tool", "tool": "view", "args": {"path": "p" * 100_000}},
    ]
    f = trajectory_features(turns, classifier=CLS, diff="@@ garbage\n+++\n" + huge)
    assert f["traj_turns"] == 8 and f["traj_tool_calls"] == 3
    assert f["traj_observation_chars"] == 2 * len(huge)
    assert f["traj_tool_errors"] == 1  # only a real true value counts: "yes" and [1] do not
    assert f["traj_calls_edit"] == 1 and f["traj_edit_path_classes"] == 0  # an edit without a usable path
    assert "traj_stop" not in f and f["traj_diff_lines"] == 0


def test_policy_chosen_tool_names_are_bounded():
    names = [f"tool {i}\n[{'y' * 500}]" for i in range(40)]
    f = trajectory_features([call(n) for n in names for _ in range(2)] + [call(names[0])])
    slots = [k for k in f if k.startswith("traj_calls[")]
    assert len(slots) == MAX_TOOL_SLOTS and all(len(k) <= 60 and "\n" not in k for k in slots)
    assert f["traj_calls_unlisted"] == 2 * (40 - MAX_TOOL_SLOTS)
    assert sum(f[k] for k in slots) + f["traj_calls_unlisted"] == 81


def test_many_turns_are_read_up_to_the_bound():
    f = trajectory_features([call("bash")] * 5000)
    assert f["traj_turns"] == 5000 and f["traj_tool_calls"] == 512


def test_the_domains_words_are_renamed_under_hashed_names():
    plain = trajectory_features(honest(), diff=DIFF, classifier=CLS)
    hashed = trajectory_features(honest(), diff=DIFF, classifier=CLS, naming="hashed", seed=5)
    words = ("view", "edit", "bash", "submit", "test", "source", "config", "other")
    # the core's own vocabulary (tool classes, counts) keeps its names; the domain's words do not
    assert hashed["traj_calls_verify"] == 1 and hashed["traj_verified_after_edit"] is True
    assert hashed[f"traj_edit_share[{opaque_name('source', 5)}]"] == 1.0
    assert hashed[f"traj_calls[{opaque_name('view', 5)}]"] == 1 and hashed["traj_stop"] == opaque_name("submit", 5)
    assert not [k for k in hashed if "[" in k and any(w in k.split("[", 1)[1] for w in words)]
    assert not [k for k in plain if "[" in k and not any(w in k.split("[", 1)[1] for w in words)]
    assert len(plain) == len(hashed)
    other_seed = trajectory_features(honest(), classifier=CLS, naming="hashed", seed=6)
    assert not set(k for k in hashed if "[" in k) & set(k for k in other_seed if "[" in k)
    with pytest.raises(ValueError, match="signal_names"):
        trajectory_features(honest(), naming="short")


class BadClassifier:
    def __init__(self, tool="edit", path="test"):
        self.tool, self.path = tool, path

    def tool_class(self, tool, args):
        return self.tool

    def classify_path(self, path):
        return self.path


@pytest.mark.parametrize("bad, match", [(BadClassifier(tool="write"), "tool_class"),
                                        (BadClassifier(path=""), "classify_path"),
                                        (BadClassifier(path=None), "classify_path")])
def test_a_classifier_outside_its_contract_is_a_clear_error(bad, match):
    with pytest.raises(ValueError, match=match):
        trajectory_features([call("edit", path="a.py")], classifier=bad)


def test_a_domain_classifier_without_the_methods_is_refused():
    class D:
        name = "d"
        trajectory_classifier = object()

    with pytest.raises(TypeError, match="trajectory_classifier"):
        featurizer_for(D())
    with pytest.raises(ValueError, match="tool classes"):
        RuleClassifier(tools={"x": "write"})


def test_path_classes_are_cached():
    seen = []

    class Counting(BadClassifier):
        def classify_path(self, path):
            seen.append(path)
            return "source"

    fz = TrajectoryFeaturizer(Counting())
    for _ in range(20):
        fz.of_turns([call("edit", path="a.py"), call("edit", path="b.py")])
    assert seen == ["a.py", "b.py"]


def test_diff_parsing():
    assert diff_lines_per_file(DIFF) == {"pkg/core.py": 2, "tests/test_core.py": 3, "new.cfg": 1}
    plain = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert diff_lines_per_file(plain) == {"x.py": 2}
    rename = "diff --git a/old.py b/new.py\nrename from old.py\nrename to new.py\n"
    assert diff_lines_per_file(rename) == {"new.py": 0}
    assert diff_lines_per_file("") == {}


turn_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
                           max_leaves=10)
turn = st.dictionaries(st.sampled_from(["role", "content", "tool", "args", "path", "output", "error", "call_error",
                                        "stop_reason", "n_tokens", "other"]), turn_values, max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.lists(turn | turn_values, max_size=12), st.none() | st.text(max_size=200))
def test_never_crashes_on_arbitrary_turns(turns, diff):
    f = trajectory_features(turns, diff=diff, classifier=CLS)
    assert f["traj_turns"] == len(turns) and 0.0 <= f["traj_error_share"] <= 1.0
    assert all(isinstance(v, (bool, int, float, str)) for v in f.values())


# --- the trainer's grading ------------------------------------------------------------------

class EpisodeDomain:
    name = "episodic"
    trajectory_classifier = CLS

    def verify(self, task, completion):
        return Verdict(reward=1.0, correct=True)

    def oracle(self, task, completion):
        return Verdict(reward=1.0, correct=True)


class FakeSession:
    def __init__(self, naming=None):
        self.domain, self.reward, self.verifier_batch = EpisodeDomain(), "verifier", None
        self.features_s, self.id_salt = 0.0, "t"
        if naming:
            self.signal_naming = naming


@pytest.mark.parametrize("naming", [None, ("hashed", 3)])
def test_grading_adds_trajectory_features_to_episodes_only(naming):
    from evo_core.trainer.grading import graded
    from evo_core.trainer.protocols import Sample

    task = Task(task_id="t1", prompt="fix it")
    rng = random.Random(0)
    comps = [Completion(text="done", turns=tuple(honest()), workspace_diff=DIFF),
             Completion(text="done", turns=tuple(honest()[:4]) + (call("submit"),))]
    groups = [[Sample(prompt="p", text="done", token_ids=tuple(rng.randrange(9) for _ in range(4))) for _ in comps]]
    s = FakeSession(naming)
    items, _ = graded(s, [task], groups, 1, 0, [comps], [[{}, {}]])
    a, b = items[0].features, items[1].features
    assert a["chars"] == 4 and a["traj_tool_calls"] == 4 and b["traj_verified_after_edit"] is False
    source = "source" if naming is None else opaque_name("source", 3)
    assert a[f"traj_edit_share[{source}]"] == 1.0
    assert s.trajectory_features is not None and s.features_s > 0
    single, _ = graded(s, [task], groups, 2, 0)  # no episodes: response features only
    assert not any(k.startswith("traj_") for k in single[0].features)


def test_the_domain_contract_checks_the_classifier():
    from evo_core.api.contract import problems

    class D:
        name, version = "d", "1"
        load_tasks = verify = oracle = staticmethod(lambda *a: None)

    assert problems("domain", D()) == []
    D.trajectory_classifier = CLS
    assert problems("domain", D()) == []
    D.trajectory_classifier = object()
    assert problems("domain", D()) == ["'trajectory_classifier' must have tool_class(tool, args) and classify_path(path) "
                                       "(evo_core.api.TrajectoryClassifier)"]


def test_a_failing_classifier_stops_grading_like_a_raising_verifier():
    from evo_core.trainer.grading import graded
    from evo_core.trainer.protocols import Sample, VerifierFailed

    s = FakeSession()
    s.domain.trajectory_classifier = BadClassifier(tool="write")
    comps = [Completion(text="x", turns=(call("edit", path="a.py"),))]
    with pytest.raises(VerifierFailed, match="episodic.*trajectory features failed.*tool_class"):
        graded(s, [Task(task_id="t", prompt="p")], [[Sample(prompt="p", text="x")]], 1, 0, [comps], [[{}]])

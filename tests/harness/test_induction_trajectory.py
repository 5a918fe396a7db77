"""Induction over trajectory features, exactly as over response features: on synthetic episodes
whose paid-but-rejected ones differ from the honest ones only in what they did (not in their
final text), it finds a trajectory predicate under renamed words; and the two-condition search
pairs a trajectory condition with a response condition when neither alone separates."""

from __future__ import annotations

import random

from evo_core.api import RuleClassifier
from evo_core.api.specs import compile_predicate
from evo_core.harness.features import features_for_group
from evo_core.harness.trajectory import TrajectoryFeaturizer
from evo_core.signal_names import opaque_name
from evo_core.testing import rollout
from evo_plugins.proposers.induction import induce

CLS = RuleClassifier(tools={"view": "read", "edit": "edit", "bash": "other", "submit": "submit"},
                     commands={"pytest": "verify"}, paths=(("test_*.py", "test"), ("*.py", "source")))


def episode(rng: random.Random, *, edits_test: bool, verifies: bool = True) -> list[dict]:
    """An episode of 3 to 6 calls; whether it edits a test file and runs the tests after its
    last edit are set, the rest is random (so no other feature separates)."""
    turns: list[dict] = []
    for _ in range(rng.randint(0, 2)):
        turns += [{"role": "assistant"}, {"role": "tool", "tool": "view", "args": {"path": f"pkg/m{rng.randrange(3)}.py"},
                                          "output": "x" * rng.randrange(50)}]
    if rng.random() < 0.5:
        turns += [{"role": "assistant"}, {"role": "tool", "tool": "bash", "args": {"command": "pytest -q"}, "output": "F"}]
    target = f"tests/test_m{rng.randrange(3)}.py" if edits_test else f"pkg/m{rng.randrange(3)}.py"
    turns += [{"role": "assistant"}, {"role": "tool", "tool": "edit", "args": {"path": target}, "output": "ok"}]
    if verifies:
        turns += [{"role": "assistant"}, {"role": "tool", "tool": "bash", "args": {"command": "pytest -q"}, "output": "."}]
    return turns + [{"role": "assistant"}, {"role": "tool", "tool": "submit", "stop_reason": "submit"}]


def audited(rows: list[tuple[list[dict], float, bool, str]], fz: TrajectoryFeaturizer) -> list:
    out = []
    for i, (turns, reward, strict, text) in enumerate(rows):
        feats = {**features_for_group([text], "fix the bug", [len(text)], [False])[0], **fz.of_turns(turns)}
        out.append(rollout(i, step=1 + i // 40, text=text, reward=reward, strict=strict, features=feats))
    return out


def test_induces_a_trajectory_predicate_under_hashed_words():
    rng = random.Random(0)
    rows = []
    for _ in range(240):
        hack = rng.random() < 0.3
        right = rng.random() < 0.7
        # the final text is the same for every episode: only the trajectory tells them apart
        rows.append((episode(rng, edits_test=hack), 1.0 if hack or right else 0.0, (not hack) and right, "submitted"))
    fz = TrajectoryFeaturizer(CLS, naming="hashed", seed=11)
    ind, report = induce(audited(rows, fz))
    assert ind is not None, report
    assert len(ind.conditions) == 1 and ind.conditions[0].ref in {
        ("feature", f"traj_edit_share[{opaque_name('test', 11)}]"),
        ("feature", f"traj_edit_share[{opaque_name('source', 11)}]")}, ind.describe()
    assert ind.holdout.precision == 1.0 and ind.holdout.recall == 1.0
    assert "feature.chars" not in ind.considered  # the text never varies
    # the predicate is a plain DSL predicate over the logged features: it flags exactly the hacks
    pred = compile_predicate(ind.predicate)
    for r, (turns, *_rest) in zip(audited(rows, fz), rows):
        assert pred(r) == any(t.get("args", {}).get("path", "").startswith("tests/") for t in turns)


def test_pairs_a_trajectory_condition_with_a_response_condition():
    """The hack: no test run after the last edit AND a long final message. Each alone also
    covers honest episodes the oracle accepts; together they separate."""
    rng = random.Random(1)
    rows = []
    for _ in range(400):
        verifies, long = rng.random() < 0.5, rng.random() < 0.5
        hack = (not verifies) and long
        text = ("all tests pass, trust me " * 3 if long else "fixed").strip()
        rows.append((episode(rng, edits_test=False, verifies=verifies), 1.0, not hack, text))
    ind, report = induce(audited(rows, TrajectoryFeaturizer(CLS)))
    assert ind is not None, report
    kinds = sorted(c.ref[1].startswith("traj_") for c in ind.conditions)
    assert kinds == [False, True], ind.describe()
    traj = next(c for c in ind.conditions if c.ref[1].startswith("traj_"))
    assert traj.ref[1] == "traj_verified_after_edit" and traj.value is False, ind.describe()
    assert ind.holdout.precision >= 0.95 and ind.holdout.recall >= 0.95


def test_the_contrast_proposer_proposes_a_repair_over_a_trajectory_feature():
    """The standard proposer, end to end: an invalid diagnosis and the audited episodes give a
    data-only spec and repairs whose predicate names a (renamed) trajectory feature."""
    from evo_core.api.specs import evaluate_spec
    from evo_plugins.proposers import ContrastProposer
    from tests.harness.test_proposers import ctx, diag

    rng = random.Random(2)
    rows = []
    for _ in range(200):
        hack = rng.random() < 0.3
        right = rng.random() < 0.7
        rows.append((episode(rng, edits_test=hack), 1.0 if hack or right else 0.0, (not hack) and right, "submitted"))
    logged = audited(rows, TrajectoryFeaturizer(CLS, naming="hashed", seed=7))
    props = ContrastProposer().propose(ctx([diag("reward_oracle_gap")], logged), {})
    assert props and props[0].name == "spec_penalty"
    pred = props[0].params["predicate"]
    assert pred["feature"].startswith("traj_edit_share[s_"), pred
    spec = props[0].diagnostic["spec"]
    assert evaluate_spec(spec, logged).fired
    assert props[0].prediction["holdout_precision"] == 1.0

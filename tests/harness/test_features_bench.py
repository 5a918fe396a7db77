"""benchmarks/features.py runs on a few synthetic episodes and reports every figure (the
figures themselves are measured by running it, never asserted here)."""

from benchmarks.features import episode, measure
import random


def test_the_benchmark_reports_each_arm():
    out = measure(rollouts=16, turns=10, repeats=1)
    for arm in ("trajectory", "trajectory_hashed", "trajectory_no_classifier"):
        assert out[f"{arm}_us_per_rollout"] > 0 and out[f"{arm}_ratio"] > 0
    assert out["response_us_per_rollout"] > 0 and out["features"] > 20


def test_a_synthetic_episode_has_the_turns_asked_for():
    turns, reply, diff = episode(random.Random(0), 10)
    assert len(turns) == 10 and turns[-1]["tool"] == "submit" and reply and diff.count("diff --git") == 2

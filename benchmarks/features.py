"""The cost of the generic features per rollout: an episode's trajectory features against the
response features, in one process.

    python -m benchmarks.features [--rollouts 1024] [--turns 10] [--repeats 3] [--out PATH]

Synthetic episodes of ``--turns`` turns (half the policy's replies of ~200 characters, half
tool results of ~2,000; a look, edits, a test run, a submit) with a two-file diff, in groups of
8, as the trainer grades them (``evo_core.trainer.grading``). Prints one JSON object:

- ``response_us_per_rollout``: ``features_for_group`` (response, task and group features of
  each episode's final reply, the text the trainer passes) per rollout;
- ``response_transcript_us_per_rollout``: the same over each episode's whole transcript
  (read up to its first 4,000 characters, as for any long response): what reading the episode
  as text would cost;
- ``trajectory_us_per_rollout`` / ``trajectory_hashed_us_per_rollout`` /
  ``trajectory_no_classifier_us_per_rollout``: the trajectory features with a rule classifier
  (plain and hashed names) and without one, one featurizer for the run (its caches warm as a
  session's are);
- ``*_ratio``: each trajectory cost over ``response_us_per_rollout`` (and over the
  transcript's response cost).

Each figure is the best of ``--repeats`` passes. Ratios come from one process on one machine;
absolute figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any, Callable

from evo_core.api import RuleClassifier
from evo_core.harness.features import features_for_group
from evo_core.harness.trajectory import TrajectoryFeaturizer

GROUP = 8
CLASSIFIER = RuleClassifier(tools={"view": "read", "edit": "edit", "bash": "other", "submit": "submit"},
                            commands={"pytest": "verify"},
                            paths=(("test_*.py", "test"), ("*.cfg", "config"), ("*.py", "source")))


def _text(rng: random.Random, n: int) -> str:
    words = ("def", "return", "x", "assert", "==", "self", "import", "1", "None", "for", "in", "(", ")", ":")
    out, size = [], 0
    while size < n:
        w = rng.choice(words)
        out.append(w + ("\n" if rng.random() < 0.1 else " "))
        size += len(out[-1])
    return "".join(out)[:n]


def episode(rng: random.Random, turns: int) -> tuple[list[dict[str, Any]], str, str]:
    """(turns, final reply, diff) of one synthetic episode."""
    plan = ["view", "edit", "bash", "edit", "bash", "view", "edit", "bash"]
    out: list[dict[str, Any]] = []
    reply = ""
    calls = max(1, turns // 2)
    for k in range(calls):
        reply = _text(rng, 200)
        out.append({"role": "assistant", "content": reply, "n_tokens": 60})
        tool = "submit" if k == calls - 1 else plan[k % len(plan)]
        path = f"/repo/{'tests/test_core' if rng.random() < 0.2 else 'pkg/core'}.py"
        args = {"command": "pytest -q"} if tool == "bash" else ({} if tool == "submit" else {"path": path})
        out.append({"role": "tool", "tool": tool, "args": args, "output": _text(rng, 2000),
                    "error": rng.random() < 0.1, "call_error": False,
                    **({"stop_reason": "submit"} if tool == "submit" else {})})
    diff = "".join(f"diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n@@ -1,4 +1,4 @@\n" + "-a\n+b\n c\n" * 3
                   for p in ("pkg/core.py", "tests/test_core.py"))
    return out, reply, diff


def best(fn: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def measure(rollouts: int = 1024, turns: int = 10, repeats: int = 3, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    eps = [episode(rng, turns) for _ in range(rollouts)]
    groups = [eps[i:i + GROUP] for i in range(0, len(eps), GROUP)]
    prompt = "<issue>\nf(1) should be 2\n</issue>\nFix the issue, then call submit."

    def response() -> None:
        for g in groups:
            features_for_group([r for _, r, _ in g], prompt, [60] * len(g), [False] * len(g))

    def transcript() -> None:
        for g in groups:
            texts = ["".join(str(t.get("content") or t.get("output") or "") for t in turns_) for turns_, _, _ in g]
            features_for_group(texts, prompt, [60] * len(g), [False] * len(g))

    def trajectory(fz: TrajectoryFeaturizer) -> Callable[[], None]:
        def run() -> None:
            for turns_, _, diff in eps:
                fz.of_turns(turns_, diff=diff)
        return run

    per = 1e6 / rollouts
    resp = best(response, repeats) * per
    trans = best(transcript, repeats) * per
    out: dict[str, Any] = {"rollouts": rollouts, "turns": turns, "repeats": repeats,
                           "response_us_per_rollout": round(resp, 2),
                           "response_transcript_us_per_rollout": round(trans, 2)}
    arms = {"trajectory": TrajectoryFeaturizer(CLASSIFIER),
            "trajectory_hashed": TrajectoryFeaturizer(CLASSIFIER, naming="hashed", seed=1),
            "trajectory_no_classifier": TrajectoryFeaturizer(None)}
    for name, fz in arms.items():
        cost = best(trajectory(fz), repeats) * per
        out[f"{name}_us_per_rollout"] = round(cost, 2)
        out[f"{name}_ratio"] = round(cost / resp, 3)
        out[f"{name}_over_transcript_ratio"] = round(cost / trans, 3)
    out["features"] = len(arms["trajectory"].of_turns(eps[0][0], diff=eps[0][2]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rollouts", type=int, default=1024)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.rollouts < 1 or args.turns < 2 or args.repeats < 1:
        ap.error("--rollouts and --repeats must be at least 1, --turns at least 2")
    result = measure(args.rollouts, args.turns, args.repeats)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()

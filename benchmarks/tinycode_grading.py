"""Grading time per rollout for the code flaw's tasks (``generate://tinycode``), one by one
against the batch path (``CodeDomain.verify_batch`` / ``oracle_batch``).

    python -m benchmarks.tinycode_grading --json

A training step's rollouts (``--prompts`` × ``--group``, default 32 × 8 = 256) are
synthesised the way a tiny policy writes them: the genuine one-liner with the right constant,
the same with a wrong constant, the planted hack (the visible output printed), and broken
text (a syntax error), in the shares given below, so a group holds duplicates as a sampled
group does. Each figure is wall time on the real sandbox pool (``LocalSandbox``, one worker
per CPU), divided by the number of rollouts:

- ``verify_one_ms``: the training verifier (the visible example), ``verify`` per rollout;
- ``verify_batch_ms``: the same rollouts through ``verify_batch`` on a fresh grader (nothing
  remembered), then ``verify_batch_warm_ms`` on a second, different step (a fresh sample of
  the same mix on other tasks; runs remembered from the first step still count);
- ``oracle_one_ms`` / ``oracle_batch_ms``: the strict oracle (every test), one by one / batched;
- ``eval_ms``: an evaluation's grading (``--eval-items`` prompts × 5 samples, oracle and
  verifier), batched, per graded completion.

Verdicts of the two paths are compared (``agree``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MIX = {"genuine": 0.45, "wrong_constant": 0.35, "hack": 0.1, "broken": 0.1}


def rollouts(tasks, group: int, rng: random.Random):
    from evo_core.api import Completion

    out = []
    for t in tasks:
        for _ in range(group):
            kind = rng.choices(list(MIX), weights=list(MIX.values()))[0]
            if kind == "genuine":
                text = t.meta["solution"]
            elif kind == "wrong_constant":
                text = t.meta["solution"][:-2] + str(rng.choice([k for k in range(1, 10) if k != t.meta["k"]])) + ")"
            elif kind == "hack":
                text = t.meta["hack"]
            else:
                text = "print(int(inpu" + rng.choice(["t(", "t()+", "("])
            out.append((t, Completion(text=text)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--eval-items", type=int, default=600)
    ap.add_argument("--workers", type=int, default=0, help="sandbox workers (default: one per CPU)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from evo_code import CodeGrader
    from evo_code.domain import CodeDomain
    from evo_core.api import TaskSource
    from evo_core.sandbox import LocalSandbox

    rng = random.Random(args.seed)
    src = "generate://tinycode?ops=add,sub&validation=200&test=400&seed=0"
    train = CodeDomain().load_tasks(TaskSource(path=src, split="train"))
    held = (CodeDomain().load_tasks(TaskSource(path=src, split="validation"))
            + CodeDomain().load_tasks(TaskSource(path=src, split="test")))[: args.eval_items]
    rng.shuffle(train)
    step1 = rollouts(train[: args.prompts], args.group, rng)
    step2 = rollouts(train[args.prompts: 2 * args.prompts], args.group, rng)
    evals = rollouts(held, 5, rng)
    n = len(step1)
    res: dict = {"rollouts_per_step": n, "mix": MIX, "cpus": os.cpu_count()}
    with LocalSandbox(args.workers or None) as sb:
        res["workers"] = sb.size

        def timed(fn, pairs):
            t0 = time.perf_counter()
            out = fn(pairs)
            return out, (time.perf_counter() - t0) * 1000 / len(pairs)

        one = CodeDomain(CodeGrader(sb))
        v1, res["verify_one_ms"] = timed(lambda ps: [one.verify(t, c) for t, c in ps], step1)
        o1, res["oracle_one_ms"] = timed(lambda ps: [one.oracle(t, c) for t, c in ps], step1)
        batch = CodeDomain(CodeGrader(sb))  # a fresh grader: nothing remembered
        vb, res["verify_batch_ms"] = timed(batch.verify_batch, step1)
        ob, res["oracle_batch_ms"] = timed(batch.oracle_batch, step1)
        _, res["verify_batch_warm_ms"] = timed(batch.verify_batch, step2)
        fresh = CodeDomain(CodeGrader(sb))
        t0 = time.perf_counter()
        fresh.oracle_batch(evals)
        fresh.verify_batch(evals)
        res["eval_ms"] = (time.perf_counter() - t0) * 1000 / len(evals)
        res["eval_completions"] = len(evals)
        res["eval_s"] = (time.perf_counter() - t0)
        res["agree"] = ([(v.reward, v.signals["status"]) for v in v1] == [(v.reward, v.signals["status"]) for v in vb]
                        and [(v.reward, v.signals["status"]) for v in o1] == [(v.reward, v.signals["status"]) for v in ob])
        res["speedup_verify"] = res["verify_one_ms"] / res["verify_batch_ms"]
        res["speedup_oracle"] = res["oracle_one_ms"] / res["oracle_batch_ms"]
        res["batch_stats"] = dict(batch.grader.batch_stats)
        res["step_verify_s"] = res["verify_batch_ms"] * n / 1000
    res = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in res.items()}
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:24} {v}")
    return 0 if res["agree"] else 1


if __name__ == "__main__":
    sys.exit(main())

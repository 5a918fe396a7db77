"""Math verification throughput: the worker pool versus in-process math-verify, same run.

    python -m benchmarks.math_verify --json [--n 300] [--workers 2]

Both sides do the same work per item: parse the gold answer, parse the candidate, and
``verify(gold, candidate)``. In-process is plain math-verify on the main thread (its own
``signal.alarm`` timeouts). The pool runs it in warm worker processes with a hard
wall-clock timeout per job. Two disjoint item sets are crossed (in-process A + pool B,
then pool A + in-process B) so that neither side profits from sympy's parse caches.

It also checks that a pathological answer (a power tower sympy evaluates eagerly) times
out in the pool — soft (worker alarm) and hard (parent kill) — and shows what in-process
math-verify does with it: returns False, i.e. scores an infrastructure failure as wrong.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import time
from typing import Any

# Run as ``python -m benchmarks.math_verify``: this file is named like the library it
# measures, and as a module its folder is not on the import path, so ``import math_verify``
# finds the library.
from evo_math.grading import grade_many
from evo_math.pool import TIMEOUT, VerifierPool, VerifyJob

PATHOLOGICAL = "9^{9^{9^{9}}}"


def make_items(n: int, seed: int, kind: str = "mixed") -> list[tuple[str, str]]:
    """(gold, candidate) pairs of the kinds a math grader meets, about half correct.
    ``integers`` is the AIME-like case (cheap for sympy, so IPC overhead shows most)."""
    rng = random.Random(f"{kind}:{seed}")
    out: list[tuple[str, str]] = []
    for i in range(n):
        a, b = rng.randint(2, 997), rng.randint(2, 997)
        right = rng.random() < 0.5
        shape = 0 if kind == "integers" else i % 7
        if shape == 0:
            gold, cand = str(a * b), str(a * b if right else a * b + 1)
        elif shape == 1:
            gold, cand = f"\\frac{{{a}}}{{{b}}}", (f"\\dfrac{{{2 * a}}}{{{2 * b}}}" if right else f"\\frac{{{b}}}{{{a}}}")
        elif shape == 2:
            gold, cand = f"{a / 8:.3f}".rstrip("0").rstrip("."), (f"\\frac{{{a}}}{{8}}" if right else f"\\frac{{{a + 1}}}{{8}}")
        elif shape == 3:
            gold, cand = f"{a}\\sqrt{{{b}}}", (f"\\sqrt{{{a * a * b}}}" if right else f"{a}\\sqrt{{{b + 1}}}")
        elif shape == 4:
            gold = f"x^2+{a + b}x+{a * b}"
            cand = f"(x+{a})(x+{b})" if right else f"(x+{a})(x+{b + 1})"
        elif shape == 5:
            gold, cand = f"({a},{a + b}]", (f"({a}, {a + b}]" if right else f"[{a}, {a + b}]")
        else:
            gold, cand = f"\\{{{a},{b}\\}}", (f"\\{{{b}, {a}\\}}" if right else f"\\{{{a}, {b + 1}\\}}")
        out.append((gold, cand))
    return out


def inprocess(items: list[tuple[str, str]]) -> tuple[float, list[bool]]:
    from math_verify import parse, verify

    from evo_math.worker import extraction_config

    cfg = extraction_config()  # the workers' configuration: the same work on both sides
    t0 = time.perf_counter()
    res = [verify(parse("\\boxed{" + g + "}", cfg), parse("\\boxed{" + c + "}", cfg)) for g, c in items]
    return time.perf_counter() - t0, res


def through_pool(pool: VerifierPool, items: list[tuple[str, str]]) -> tuple[float, list[bool]]:
    jobs = [VerifyJob(g, (c,), 1) for g, c in items]
    t0 = time.perf_counter()
    res = pool.map(jobs)
    dt = time.perf_counter() - t0
    bad = [r for r in res if not r.ok]
    if bad:
        raise SystemExit(f"benchmark item failed in the pool: {bad[0]}")
    return dt, [r.match[0] for r in res]


def pathological_checks(workers: int, timeout_s: float) -> dict[str, Any]:
    from math_verify import parse, verify

    out: dict[str, Any] = {"input": PATHOLOGICAL, "timeout_s": timeout_s}
    normal = [VerifyJob(str(i), (str(i),), 1) for i in range(20)]
    for label, soft in (("soft", True), ("hard", False)):
        with VerifierPool(workers, timeout_s=timeout_s, grace_s=0.5, soft_timeout=soft) as pool:
            pool.wait_ready()
            t0 = time.perf_counter()
            res = pool.map([VerifyJob("3", (PATHOLOGICAL,), 1)] + normal)
            dt = time.perf_counter() - t0
            out[label] = {
                "status": res[0].status,
                "hard_kill": res[0].hard_timeout,
                "batch_seconds": round(dt, 3),
                "others_ok": all(r.ok and r.match == (True,) for r in res[1:]),
                "timed_out": res[0].status == TIMEOUT and dt < timeout_s + 0.5 + 3.0,
            }
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    t0 = time.perf_counter()
    verdict = verify(parse("\\boxed{3}"), parse("\\boxed{" + PATHOLOGICAL + "}"), timeout_seconds=max(1, int(timeout_s)))
    out["inprocess"] = {"returned": verdict, "seconds": round(time.perf_counter() - t0, 3),
                        "note": "math-verify swallows its own timeout and answers False (a wrong-answer score)"}
    out["ok"] = all(out[k]["timed_out"] and out[k]["others_ok"] for k in ("soft", "hard")) and out["hard"]["hard_kill"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--n", type=int, default=200, help="mixed items per set (two sets are crossed; integers: 4x)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=5.0, help="per-job timeout in the throughput runs")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    inprocess([("1", "1"), ("\\frac12", "0.5")])  # import and warm math-verify in this process
    t0 = time.perf_counter()
    pool = VerifierPool(args.workers, timeout_s=args.timeout)
    pool.wait_ready()
    startup = time.perf_counter() - t0
    workloads: dict[str, Any] = {}
    with pool:
        for kind, n in (("mixed", args.n), ("integers", 4 * args.n)):
            set_a, set_b = make_items(n, args.seed, kind), make_items(n, args.seed + 1, kind)
            t_in_a, r_in_a = inprocess(set_a)
            t_pool_b, r_pool_b = through_pool(pool, set_b)
            t_pool_a, r_pool_a = through_pool(pool, set_a)
            t_in_b, r_in_b = inprocess(set_b)
            # The trainer's per-rollout pattern: one job per call, no batching.
            seq_items = make_items(max(20, n // 3), args.seed + 2, kind)
            t0 = time.perf_counter()
            for g, c in seq_items:
                pool.verify(VerifyJob(g, (c,), 1))
            t_seq = time.perf_counter() - t0
            in_rate = 2 * n / (t_in_a + t_in_b)
            pool_rate = 2 * n / (t_pool_a + t_pool_b)
            workloads[kind] = {
                "items": 2 * n,
                "inprocess_per_s": round(in_rate, 1),
                "pool_per_s": round(pool_rate, 1),
                "pool_vs_inprocess": round(pool_rate / in_rate, 3),
                "pool_sequential_per_s": round(len(seq_items) / t_seq, 1),
                "sequential_vs_inprocess": round(len(seq_items) / t_seq / in_rate, 3),
                "same_answers": r_in_a == r_pool_a and r_in_b == r_pool_b,
            }
        # End to end: extraction + planning + pool, as the domain grades rollouts.
        responses = [(g, f"Reasoning... so the answer is $\\boxed{{{c}}}$.") for g, c in make_items(args.n, args.seed + 3)]
        t0 = time.perf_counter()
        grade_many(responses, pool)
        t_grade = time.perf_counter() - t0
        stats = dict(pool.stats)

    worst = min(w["pool_vs_inprocess"] for w in workloads.values())
    result: dict[str, Any] = {
        "benchmark": "math_verify",
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "inprocess_per_s": workloads["mixed"]["inprocess_per_s"],
        "pool_per_s": workloads["mixed"]["pool_per_s"],
        "pool_vs_inprocess": worst,  # the worse of the two workloads
        "target_ratio": 0.5,
        "meets_target": worst >= 0.5,
        "workloads": workloads,
        "grade_end_to_end_per_s": round(args.n / t_grade, 1),
        "pool_startup_s": round(startup, 3),
        "same_answers": all(w["same_answers"] for w in workloads.values()),
        "pool_stats": stats,
    }
    result["pathological"] = pathological_checks(args.workers, 1.0)
    result["ok"] = bool(result["meets_target"] and result["same_answers"] and result["pathological"]["ok"])
    if args.json:
        print(json.dumps(result))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="math verification throughput")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for k, v in result.items():
            table.add_row(k, json.dumps(v) if isinstance(v, dict) else str(v))
        Console().print(table)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

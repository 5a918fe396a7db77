"""Timings of the SWE domain's moving parts on this machine, as JSON.

    python domains/swe/benchmarks/swe_timing.py --json

Builds the fixture task (minilib, a broken ``median``), then measures: the first
environment build, a cached env lookup, pristine grading of the gold and the empty patch,
one ``bash`` round trip through the sandbox (tree shipped in and back), and task generation.
Ratios are within one run; absolute seconds depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _test_fixtures():
    """The test suite's generated repository (``tests/conftest.py``), loaded by path so the
    benchmark times exactly what the tests grade, without touching ``sys.path``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("evo_swe_test_fixtures", HERE.parent / "tests" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    fx = _test_fixtures()
    HIDDEN_TEST_PATCH, MINILIB, make_repo = fx.HIDDEN_TEST_PATCH, fx.MINILIB, fx.make_repo
    from evo_core.sandbox import LocalSandbox
    from evo_swe.executor import TreeExecutor
    from evo_swe.generator import TaskGenerator
    from evo_swe.grading import Grader
    from evo_swe.repo import git
    from evo_swe.tasks import parse_row
    from evo_swe.workspace import Workspace

    root = Path(tempfile.mkdtemp(prefix="evo-swe-bench-"))
    os.chmod(root, 0o755)
    sb = LocalSandbox()
    try:
        repo, clean = make_repo(root / "repo")
        base = git(["rev-parse", "HEAD"], cwd=repo).stdout.decode().strip()
        task = parse_row(dict(
            instance_id="bench", repo=str(repo), base_commit=base, problem_statement="median", test_patch=HIDDEN_TEST_PATCH,
            patch=git(["diff", "HEAD", clean], cwd=repo).stdout.decode(),
            FAIL_TO_PASS=["tests/test_hidden.py::test_median_pair"], PASS_TO_PASS=["tests/test_stats.py::test_mean"]))
        g = Grader(cache_dir=root / "cache", executor=TreeExecutor(sb))
        t = time.perf_counter(); g.pristine(task); g.env(task); first_env = time.perf_counter() - t
        t = time.perf_counter(); g.env(task); cached_env = time.perf_counter() - t
        gold, empty = [], []
        for _ in range(args.repeats):
            t = time.perf_counter(); assert g.grade(task, task.patch).resolved; gold.append(time.perf_counter() - t)
            t = time.perf_counter(); assert g.grade(task, "").resolved is False; empty.append(time.perf_counter() - t)
        env, _ = g.env(task)
        bash = []
        with Workspace.create(g.pristine(task), env, g.executor) as ws:
            for _ in range(args.repeats * 2):
                t = time.perf_counter(); ws.bash("true"); bash.append(time.perf_counter() - t)
        t = time.perf_counter()
        tasks = TaskGenerator(g).generate(MINILIB, root / "gen", max_tasks=3, seed=0)
        gen_s = time.perf_counter() - t
        out = {
            "env_first_build_s": round(first_env, 3),
            "env_cached_lookup_s": round(cached_env, 4),
            "grade_gold_median_s": round(statistics.median(gold), 3),
            "grade_empty_median_s": round(statistics.median(empty), 3),
            "bash_roundtrip_median_s": round(statistics.median(bash), 3),
            "generated_tasks": len(tasks),
            "generate_s": round(gen_s, 2),
            "cached_env_speedup_vs_build": round(first_env / max(cached_env, 1e-6), 1),
        }
        print(json.dumps(out, indent=None if args.json else 2))
    finally:
        sb.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

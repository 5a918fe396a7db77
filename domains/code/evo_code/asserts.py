"""Assert-style grading (HumanEval ``check(candidate)``, MBPP asserts), round by round.

The problem's tests run in their own sandbox run *without* the candidate
(``_harness_driver.py``); every ``candidate(...)`` they make is answered from a memo of
values the candidate returned in a separate sandbox run (``_harness_call.py``). A round
runs the driver, collects the calls it could not answer, and runs the candidate on them;
the memo grows until a driver run needs nothing new. So the asserts only ever compare
plain values decoded in the test process.

Budget: each round's candidate run is capped by what is left; when nothing is left, one
last driver run (``finalize``) writes the verdict down, counting every call still unknown
as ``budget_exhausted`` (that run is trusted test code, bounded by ``driver_wall_s``).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional, Protocol

from evo_code.budget import GradingBudget
from evo_code.candidate_calls import DRIVER_HARNESS, classify_call, run_calls
from evo_code.problem import (
    BUDGET_EXHAUSTED,
    COMPILE_ERROR,
    INFRA_ERROR,
    MEMORY_LIMIT,
    PASS,
    RUNTIME_ERROR,
    SKIPPED,
    TIMEOUT,
    WRONG_ANSWER,
    CodeProblem,
    TestOutcome,
)
from evo_core.api.sandbox import Limits, RunRequest, Sandbox


class _Grader(Protocol):
    """What assert grading needs of ``evo_code.grader.CodeGrader`` (typed here, so that the
    grader and this module do not import each other)."""

    config: Any
    sandbox: Sandbox
    limits: Callable[[float], Limits]


def grade_asserts(
    grader: _Grader, problem: CodeProblem, solution: str, tl: float, scope: str, compile_msg: Optional[str],
    budget: GradingBudget, rule: Optional[str],
) -> list[TestOutcome]:
    suite = problem.asserts
    if suite is None or not problem.fn_name:
        raise ValueError(f"problem {problem.problem_id}: assert tests need an assert suite and an entry point")
    asserts = list(suite.asserts) + (list(suite.hidden_asserts) if scope == "all" else [])
    n_whole = len(asserts) if suite.mode == "asserts" else 1  # steps known before the driver runs
    if compile_msg:
        return [TestOutcome(index=i, outcome=COMPILE_ERROR, public=True, detail=compile_msg) for i in range(n_whole)]
    base = {
        "mode": suite.mode,
        "test": suite.test,
        "asserts": asserts,
        "setup": suite.setup,
        "fixture": suite.fixture,
        "solution_classes": list(suite.solution_classes),
        "check_fn": suite.check_fn,
        "entry_point": problem.fn_name,
        "seed": grader.config.test_seed,
        "early_exit": rule,
    }
    infra = lambda detail: [TestOutcome(index=0, outcome=INFRA_ERROR, detail=detail, ran=False)]  # noqa: E731
    memo: dict[str, dict[str, Any]] = {}
    drv_lim = grader.limits(grader.config.driver_wall_s)
    rounds = 0
    while True:
        finalize = budget.spent()
        req = dict(base, memo=list(memo.items()), finalize=finalize)
        dres = grader.sandbox.run(RunRequest(code=DRIVER_HARNESS, stdin=json.dumps(req), limits=drv_lim))
        if dres.infra_error:
            return infra(dres.infra_error)
        try:
            out = json.loads(dres.stdout)
        except json.JSONDecodeError:
            return infra(f"test driver failed (exit {dres.exit_code}, timed_out={dres.timed_out}): {dres.stderr[-300:]}")
        if out.get("error"):
            return infra(f"the problem's test code does not run: {out['error']}")
        if out["final"]:
            return [_step_outcome(i, s) for i, s in enumerate(out["results"])]
        needed = out["needed"]
        if finalize or not needed:
            return infra("tests depend on values that never resolve")
        if rounds >= grader.config.max_assert_rounds:
            return infra(f"assert tests did not settle in {grader.config.max_assert_rounds} rounds")
        rounds += 1
        calls = [{"args": n["args"], "kwargs": n["kwargs"]} for n in needed]
        # Stopping at a timeout never changes a verdict: the step that made the call fails
        # (CandidateTimeout is a BaseException), and calls after it are asked for again.
        run = run_calls(grader.sandbox, grader.limits, solution, problem.fn_name, calls, tl, budget,
                        stop_on="timeout" if rule else None,
                        fixture=suite.fixture if out.get("fixture_in_candidate") else "")
        if run.result.infra_error:
            return infra(run.result.infra_error)
        if run.load_error is not None:
            oc, _, detail, _ = classify_call(run, 0, tl, budget, compare=False)
            if oc == BUDGET_EXHAUSTED:
                continue  # the next driver run finalizes
            return [TestOutcome(index=i, outcome=oc, public=True, detail=detail) for i in range(n_whole)]
        for j, n in enumerate(needed):
            oc, t, detail, ran = classify_call(run, j, tl, budget, compare=False)
            if oc == PASS:
                memo[n["key"]] = {"ok": run.records[j]["ok"], "t": t}
            elif oc == TIMEOUT:
                memo[n["key"]] = {"timeout": True, "t": t}
            elif oc == WRONG_ANSWER:
                memo[n["key"]] = {"bad_value": detail, "t": t}
            elif oc == BUDGET_EXHAUSTED:
                if ran:
                    memo[n["key"]] = {"budget": True, "t": t}
            elif oc != SKIPPED:  # a skipped call is simply asked for again
                memo[n["key"]] = {"exc": oc, "msg": detail, "t": t}


def _step_outcome(i: int, s: dict[str, Any]) -> TestOutcome:
    oc = s["outcome"]
    if oc == "test_error":  # e.g. the test's arithmetic fails on what the candidate returned
        oc = WRONG_ANSWER
    if oc == RUNTIME_ERROR and "MemoryError" in s.get("msg", ""):
        oc = MEMORY_LIMIT
    detail = (s.get("step", "") + (" -> " + s["msg"] if s.get("msg") else ""))[:500]
    return TestOutcome(index=i, outcome=oc, runtime=float(s.get("t", 0.0)), public=True, detail=detail,
                       ran=bool(s.get("ran", True)))

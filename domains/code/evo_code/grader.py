"""Grade a solution against a problem's tests, running the candidate only in the sandbox.

- stdio: one sandbox run per test (fresh forked process each, warm pool); the grader
  compares stdout (LiveCodeBench rules, ``compare.py``).
- call: sandbox runs of the candidate-side harness, which reports the *returned values*
  as tagged JSON (plain builtins only); the grader compares (``candidate_calls.py``).
- assert: HumanEval / MBPP asserts run in a separate sandbox run that never contains the
  candidate; candidate calls are answered from values the candidate returned in its own
  sandbox run, round by round (``asserts.py``).

So the candidate never sees an expected output, never runs in the process that
compares, and cannot end the test early, skip it, or print its way to a pass. The verdict
never rests on an exit code alone: stdio needs exit 0 *and* matching output.

Bounded grading: stdio and call tests run in chunks that grow (the pool's width first,
then twice as many each time), each run capped by the problem's wall budget
(``budget.py``); under pass/fail scoring grading stops after the first failing test
(``early_exit``), and the tests left are ``skipped``.

An infrastructure failure anywhere (sandbox died, driver could not run) gives
``Verdict.infra`` — no reward — never a 0/1.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Optional, Sequence

import attrs
import structlog

from evo_code.asserts import grade_asserts
from evo_code.budget import GradingBudget
from evo_code.candidate_calls import classify_call, run_calls, short
from evo_code.compare import stdout_matches
from evo_code.problem import (
    ASSERT,
    BUDGET_EXHAUSTED,
    CALL,
    COMPILE_ERROR,
    COMPLETE,
    EARLY_EXIT_AFTER_FAILURE,
    EARLY_EXIT_AFTER_TIMEOUT,
    INFRA_ERROR,
    MEMORY_LIMIT,
    NOT_RUN,
    OUTCOMES,
    PASS,
    RUNTIME_ERROR,
    SKIPPED,
    STDIO,
    TIMEOUT,
    WRONG_ANSWER,
    CodeProblem,
    TestCase,
    TestOutcome,
)
from evo_code.signals import hardcode_signals
from evo_core.api import Verdict
from evo_core.api.sandbox import ExecResult, Limits, RunRequest, Sandbox

log = structlog.get_logger("evo.code")

SCORINGS = ("pass_fail", "fraction")
EARLY_EXITS = ("auto", "first_failure", "first_timeout", "never")
_NOT_A_RESULT = (SKIPPED, NOT_RUN, BUDGET_EXHAUSTED)  # outcomes that say nothing about correctness
_MAX_PER_WORKER = 16  # stdio: tests one worker runs in a chunk, at most
_FIRST_CALL_CHUNK = 4  # call: tests in the first harness run (the visible ones fit in one)
_MAX_BATCH_TESTS = 16  # grade_many: stdio problems with at most this many tests in scope go in the batch
_RUN_CACHE_SIZE = 50_000  # grade_many: finished runs remembered by (program, stdin, limits)
_RUN_CACHE_MAX_OUT = 4096  # ... when their output is at most this many characters


def _positive_or_none(_inst: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"GradeConfig.{attribute.name} must be a positive number of seconds or None (no budget), got {value!r}")


def _one_of(choices: Sequence[str]) -> Callable[[Any, attrs.Attribute, Any], None]:
    def check(_inst: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value not in choices:
            raise ValueError(f"GradeConfig.{attribute.name} must be one of {', '.join(choices)}; got {value!r}")

    return check


@attrs.frozen(kw_only=True)
class GradeConfig:
    default_time_limit_s: float = 4.0  # per test, when neither a reference nor the dataset says
    k_reference: float = 3.0  # time limit = k x the reference solution's slowest test
    min_time_limit_s: float = 1.0
    max_time_limit_s: float = 20.0
    calibrate: bool = True  # measure the reference solution where one exists
    memory_mb: int = 1024
    float_tol: Optional[float] = None  # None: LiveCodeBench's exact decimal comparison
    public_k: int = 3  # visible tests when the format marks none public
    output_bytes: int = 1 << 20
    max_assert_rounds: int = 8
    driver_wall_s: float = 30.0
    # Wall seconds for grading one solution on one problem (every test in scope); a
    # calibrated reference raises it to k_reference x the reference's own total. None: no budget.
    budget_s: Optional[float] = attrs.field(default=60.0, validator=_positive_or_none)
    calibration_budget_s: Optional[float] = attrs.field(default=600.0, validator=_positive_or_none)
    # pass_fail: reward 1 when every test passes, else 0. fraction: reward = share passed.
    scoring: str = attrs.field(default="pass_fail", validator=_one_of(SCORINGS))
    # auto: first_failure under pass_fail (the verdict is decided), never under fraction.
    # first_timeout: stop after a timed-out test (the tests left count as failed).
    early_exit: str = attrs.field(default="auto", validator=_one_of(EARLY_EXITS))
    test_seed: int = 0  # seeds `random` in the assert-test driver, step by step

    def __attrs_post_init__(self) -> None:
        if self.scoring == "fraction" and self.early_exit == "first_failure":
            raise ValueError("GradeConfig.early_exit='first_failure' would change a fraction score; "
                             "use 'first_timeout', 'never' or 'auto' with scoring='fraction'")

    def exit_rule(self) -> Optional[str]:
        """``first_failure``, ``first_timeout`` or None (run every test)."""
        if self.early_exit == "auto":
            return "first_failure" if self.scoring == "pass_fail" else None
        return None if self.early_exit == "never" else self.early_exit


@attrs.frozen
class _Limits:
    """(per-test seconds, where it came from, the reference's total run time or None)."""

    seconds: float
    source: str
    reference_total_s: Optional[float] = None


class CodeGrader:
    """Thread-safe. Holds a sandbox (a ``LocalSandbox`` by default, created lazily)."""

    def __init__(self, sandbox: Optional[Sandbox] = None, config: GradeConfig = GradeConfig()) -> None:
        self._sandbox = sandbox
        self._own_sandbox = sandbox is None
        self.config = config
        self._limits_cache: dict[str, _Limits] = {}
        self._lock = threading.Lock()
        # grade_many: results of finished runs (see _cacheable), by (program, stdin, limits)
        self._runs: "OrderedDict[tuple[Any, ...], ExecResult]" = OrderedDict()
        self._runs_lock = threading.Lock()
        self.batch_stats = {"runs": 0, "cached": 0, "deduplicated": 0, "solutions": 0}

    @property
    def sandbox(self) -> Sandbox:
        with self._lock:
            if self._sandbox is None:
                from evo_core.api.sandbox import LocalSandbox

                self._sandbox = LocalSandbox()
            return self._sandbox

    def close(self) -> None:
        if self._own_sandbox and self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

    # -- time limits and budget ----------------------------------------------------------
    def time_limit(self, problem: CodeProblem) -> tuple[float, str]:
        """(per-test seconds, where it came from): k x reference runtime, else the
        dataset's limit, else the default. Cached per problem id."""
        lim = self._calibrated(problem)
        return lim.seconds, lim.source

    def budget_s(self, problem: CodeProblem) -> Optional[float]:
        """The wall budget for one solution: ``budget_s``, raised to k_reference x the
        reference's total grading time where a calibrated reference exists."""
        return self._budget_for(self._calibrated(problem))

    def _budget_for(self, lim: _Limits) -> Optional[float]:
        base = self.config.budget_s
        if base is None or lim.reference_total_s is None:
            return base
        return max(base, self.config.k_reference * lim.reference_total_s)

    def _calibrated(self, problem: CodeProblem) -> _Limits:
        cached = self._limits_cache.get(problem.problem_id)
        if cached:
            return cached
        cfg = self.config
        result = _Limits(problem.time_limit_s or cfg.default_time_limit_s, "dataset" if problem.time_limit_s else "default")
        if cfg.calibrate and problem.reference:
            generous = max(cfg.max_time_limit_s, result.seconds)
            budget = GradingBudget(cfg.calibration_budget_s)
            if problem.kind == ASSERT:  # runtime of a step = the candidate time of its calls
                tests = grade_asserts(self, problem, problem.reference, generous, "all", _compile_error(problem.reference),
                                      budget, "first_failure")
            else:
                tests = self._run_tests(problem, problem.reference, list(enumerate(problem.tests)), generous, budget,
                                        "first_failure")
            if tests and all(t.outcome == PASS for t in tests):
                slowest = max(t.runtime for t in tests)
                tl = min(cfg.max_time_limit_s, max(cfg.min_time_limit_s, cfg.k_reference * slowest))
                result = _Limits(tl, "reference", budget.elapsed())
            elif any(t.outcome == INFRA_ERROR for t in tests):
                return result  # infra trouble: try again next time
            elif budget.ran_out:
                log.warning("reference solution ran past the calibration budget; not calibrating", problem=problem.problem_id)
                result = _Limits(result.seconds, result.source + "+reference_over_budget")
            elif tests:
                log.warning("reference solution fails its own tests; not calibrating", problem=problem.problem_id)
                result = _Limits(result.seconds, result.source + "+reference_failed")
        self._limits_cache[problem.problem_id] = result
        return result

    def limits(self, wall: float) -> Limits:
        return Limits(
            wall_seconds=wall,
            cpu_seconds=max(1.0, wall),
            memory_mb=self.config.memory_mb,
            processes=64,
            output_bytes=self.config.output_bytes,
        )

    # -- grading -------------------------------------------------------------------------
    def grade(self, problem: CodeProblem, solution: str, scope: str = "all") -> Verdict:
        """``scope="public"``: the visible tests only (training verifier);
        ``"all"``: every test including hidden ones (strict oracle)."""
        if scope not in ("public", "all"):
            raise ValueError(f"scope must be 'public' or 'all', got {scope!r}")
        t0 = time.monotonic()
        lim = self._calibrated(problem)
        tl, tl_source = lim.seconds, lim.source
        self.sandbox  # noqa: B018 - start the pool before the budget's clock does
        budget = GradingBudget(self._budget_for(lim))
        rule = self.config.exit_rule()
        compile_msg = _compile_error(solution)
        if problem.kind == ASSERT:
            tests = grade_asserts(self, problem, solution, tl, scope, compile_msg, budget, rule)
        else:
            chosen = problem.public_tests(self.config.public_k) if scope == "public" else problem.tests
            indexed = [(problem.tests.index(t) if scope == "public" else i, t) for i, t in enumerate(chosen)]
            if compile_msg:
                tests = [TestOutcome(index=i, outcome=COMPILE_ERROR, public=t.public, detail=compile_msg) for i, t in indexed]
            else:
                tests = self._run_tests(problem, solution, indexed, tl, budget, rule)
        return self._verdict(problem, solution, tests, tl, tl_source, scope, budget, time.monotonic() - t0)

    # -- many solutions at once -----------------------------------------------------------
    def batchable(self, problem: CodeProblem, scope: str = "all") -> bool:
        """Whether ``grade_many`` grades this problem in its batch: stdio, at most
        ``_MAX_BATCH_TESTS`` tests in scope, all of which fit the problem's budget even if
        every one runs to its time limit (so the batch needs no budget of its own)."""
        if problem.kind != STDIO:
            return False
        n = len(self._scoped(problem, scope))
        if not 0 < n <= _MAX_BATCH_TESTS:
            return False
        lim = self._calibrated(problem)
        budget = self._budget_for(lim)
        return budget is None or n * (lim.seconds + 0.5) <= budget

    def _scoped(self, problem: CodeProblem, scope: str) -> list[tuple[int, TestCase]]:
        if scope == "public":
            return [(problem.tests.index(t), t) for t in problem.public_tests(self.config.public_k)]
        return list(enumerate(problem.tests))

    def grade_many(self, jobs: Sequence[tuple[CodeProblem, str]], scope: str = "all") -> list[Verdict]:
        """Verdicts for many (problem, solution) pairs, as ``grade`` gives them, in a few
        pool round trips instead of one or more per solution.

        Every (solution, test) is still its own sandbox run: a fresh forked, confined child
        that sees only its own program and stdin; outputs are compared here, in the
        grading process. What is shared: identical (solution, stdin, limits) runs in one
        call run once, and finished runs whose outcome cannot depend on load (exit status
        and output, not a timeout, memory kill or sandbox failure; output under 4 KB) are
        remembered, so a program graded again on the same input is not re-run (the
        verifier's visible test is one of the oracle's tests). Each solution's first test
        runs first; the rest run only when the exit rule lets grading go on, as ``grade``'s
        early exit does. Problems ``batchable`` refuses are graded one by one with ``grade``.
        """
        if scope not in ("public", "all"):
            raise ValueError(f"scope must be 'public' or 'all', got {scope!r}")
        t0 = time.monotonic()
        out: list[Optional[Verdict]] = [None] * len(jobs)
        todo = []
        for j, (problem, solution) in enumerate(jobs):
            if self.batchable(problem, scope):
                todo.append(j)
            else:
                out[j] = self.grade(problem, solution, scope)
        if not todo:
            return out  # type: ignore[return-value]
        self.sandbox  # noqa: B018 - start the pool
        rule = self.config.exit_rule()
        compiled: dict[str, Optional[str]] = {}
        tests: dict[int, list[TestOutcome]] = {}
        first: list[tuple[int, int, TestCase]] = []
        for j in todo:
            problem, solution = jobs[j]
            if solution not in compiled:
                compiled[solution] = _compile_error(solution)
            indexed = self._scoped(problem, scope)
            msg = compiled[solution]
            if msg:
                tests[j] = [TestOutcome(index=i, outcome=COMPILE_ERROR, public=t.public, detail=msg) for i, t in indexed]
            else:
                tests[j] = []
                first.append((j, *indexed[0]))
        for j, got in self._run_batch(jobs, first).items():
            tests[j] += got
        rest: list[tuple[int, int, TestCase]] = []
        for j, _i, _t in first:
            indexed = self._scoped(jobs[j][0], scope)[1:]
            trigger = _exit_trigger(tests[j], rule)
            if trigger is not None:
                tests[j] += [TestOutcome(index=i, outcome=SKIPPED, public=t.public, ran=False,
                                         detail=f"not run: early exit after test {trigger.index} ({trigger.outcome})")
                             for i, t in indexed]
            elif tests[j][0].outcome == INFRA_ERROR:
                tests[j] += [TestOutcome(index=i, outcome=NOT_RUN, public=t.public, ran=False) for i, t in indexed]
            else:
                rest += [(j, i, t) for i, t in indexed]
        for j, got in self._run_batch(jobs, rest).items():
            tests[j] += got
        elapsed = time.monotonic() - t0
        for j in todo:
            problem, solution = jobs[j]
            lim = self._calibrated(problem)
            budget = GradingBudget(self._budget_for(lim), started=t0)
            out[j] = self._verdict(problem, solution, sorted(tests[j], key=lambda t: t.index), lim.seconds, lim.source,
                                   scope, budget, elapsed)
        with self._runs_lock:
            self.batch_stats["solutions"] += len(todo)
        return out  # type: ignore[return-value]

    def _run_batch(self, jobs: Sequence[tuple[CodeProblem, str]],
                   wanted: Sequence[tuple[int, int, TestCase]]) -> dict[int, list[TestOutcome]]:
        """Run (job, test index, test) triples: remembered results first, then one
        ``run_many`` over the distinct runs left. Outcomes are classified per test here."""
        keyed = []
        for j, i, t in wanted:
            problem, solution = jobs[j]
            tl = self._calibrated(problem).seconds
            lim = self.limits(tl + 0.5)
            keyed.append((j, i, t, tl, (solution, str(t.input), lim)))
        results: dict[tuple[Any, ...], ExecResult] = {}
        with self._runs_lock:
            for *_, key in keyed:
                hit = self._runs.get(key)
                if hit is not None:
                    self._runs.move_to_end(key)
                    results[key] = hit
            self.batch_stats["cached"] += sum(1 for *_, key in keyed if key in results)
        missing = list(dict.fromkeys(key for *_, key in keyed if key not in results))
        if missing:
            ran = self.sandbox.run_many([RunRequest(code=code, stdin=stdin, limits=lim) for code, stdin, lim in missing])
            with self._runs_lock:
                self.batch_stats["runs"] += len(missing)
                self.batch_stats["deduplicated"] += sum(1 for *_, key in keyed if key not in results) - len(missing)
                for key, r in zip(missing, ran):
                    results[key] = r
                    if _cacheable(r, key[2]):
                        self._runs[key] = attrs.evolve(r, stderr=r.stderr[-300:], isolation={})
                        self._runs.move_to_end(key)
                while len(self._runs) > _RUN_CACHE_SIZE:
                    self._runs.popitem(last=False)
        out: dict[int, list[TestOutcome]] = {}
        for j, i, t, tl, key in keyed:
            r = results[key]
            oc, detail = _classify_stdio(r, t, tl, self.config.float_tol)
            out.setdefault(j, []).append(TestOutcome(index=i, outcome=oc, runtime=r.wall_time, public=t.public, detail=detail))
        return out

    def _verdict(self, problem, solution, tests, tl, tl_source, scope, budget: GradingBudget, elapsed) -> Verdict:
        counts = {o: 0 for o in OUTCOMES}
        for t in tests:
            counts[t.outcome] = counts.get(t.outcome, 0) + 1
        counts = {k: v for k, v in counts.items() if v}
        n_pass = counts.get(PASS, 0)
        first_fail = next((t for t in tests if t.outcome not in (PASS, *_NOT_A_RESULT)), None)
        first_fail = first_fail or next((t for t in tests if t.outcome != PASS), None)
        signals: dict[str, Any] = {
            "kind": problem.kind,
            "source_format": problem.source_format,
            "scope": scope,
            "scoring": self.config.scoring,
            "n_tests": len(tests),
            "n_executed": sum(1 for t in tests if t.ran),
            "n_passed": n_pass,
            "pass_fraction": (n_pass / len(tests)) if tests else 0.0,
            "outcomes": [t.outcome for t in tests],
            "outcome_counts": counts,
            "stop_reason": _stop_reason(tests),
            "runtime_max": max((t.runtime for t in tests), default=0.0),
            "runtime_total": sum(t.runtime for t in tests),
            "time_limit_s": tl,
            "time_limit_source": tl_source,
            "budget_s": budget.limit_s,
            "grading_wall_s": elapsed,
            "solution_chars": len(solution),
            **hardcode_signals(solution, problem, self.config.public_k),
        }
        if first_fail is not None:
            signals["first_failure"] = {"index": first_fail.index, "outcome": first_fail.outcome, "detail": first_fail.detail[:300]}
        details = {"tests": [t.to_json() for t in tests], "problem_id": problem.problem_id}
        infra = [t for t in tests if t.outcome == INFRA_ERROR]
        if infra:
            return attrs.evolve(Verdict.infra(infra[0].detail or "sandbox failure", **signals), details=details)
        if not tests:
            return attrs.evolve(Verdict.infra("problem has no tests in this scope", **signals), details=details)
        ok = n_pass == len(tests)
        reward = (n_pass / len(tests)) if self.config.scoring == "fraction" else (1.0 if ok else 0.0)
        return Verdict(reward=reward, correct=ok, signals=signals, details=details)

    def _run_tests(self, problem: CodeProblem, solution: str, indexed: Sequence[tuple[int, TestCase]], tl: float,
                   budget: GradingBudget, rule: Optional[str]) -> list[TestOutcome]:
        if not indexed:
            return []
        if problem.kind == STDIO:
            width = max(1, int(getattr(self.sandbox, "size", 1) or 1))
            full = tl + 0.5

            def size(n_done: int, n_chunks: int) -> int:  # tests per worker: 1, 2, 4, ... while the budget covers them
                per_worker = min(_MAX_PER_WORKER, 1 << n_chunks)
                left = budget.remaining()
                if left < per_worker * full:
                    per_worker = max(1, int(left // full))
                return width * per_worker

            return self._chunked(indexed, size, lambda chunk: self._stdio(solution, chunk, tl, budget, width), budget, rule)
        if problem.kind == CALL:
            if not problem.fn_name:
                raise ValueError(f"problem {problem.problem_id}: call-based tests need fn_name")
            return self._chunked(indexed, lambda n_done, n_chunks: _FIRST_CALL_CHUNK << n_chunks,
                                 lambda chunk: self._calls(problem, solution, chunk, tl, budget, rule), budget, rule)
        raise ValueError(f"problem {problem.problem_id}: unknown kind {problem.kind!r}")

    def _chunked(self, indexed: Sequence[tuple[int, TestCase]], size: Callable[[int, int], int],
                 run: Callable[[Sequence[tuple[int, TestCase]]], list[TestOutcome]], budget: GradingBudget,
                 rule: Optional[str]) -> list[TestOutcome]:
        """Run the tests chunk by chunk; stop at the first failure the rule allows, when the
        budget is spent, or at an infrastructure error (no verdict either way)."""
        out: list[TestOutcome] = []
        n_chunks = 0
        while len(out) < len(indexed):
            rest = indexed[len(out):]
            if budget.spent():
                return out + [TestOutcome(index=i, outcome=BUDGET_EXHAUSTED, public=t.public, ran=False,
                                          detail="not started: the grading budget ran out") for i, t in rest]
            got = run(rest[: size(len(out), n_chunks)])
            out += got
            n_chunks += 1
            left = indexed[len(out):]
            if any(t.outcome == INFRA_ERROR for t in got):
                return out + [TestOutcome(index=i, outcome=NOT_RUN, public=t.public, ran=False) for i, t in left]
            trigger = _exit_trigger(got, rule)
            if trigger is not None and left:
                return out + [TestOutcome(index=i, outcome=SKIPPED, public=t.public, ran=False,
                                          detail=f"not run: early exit after test {trigger.index} ({trigger.outcome})")
                              for i, t in left]
        return out

    # stdio ---------------------------------------------------------------------------------
    def _stdio(self, solution: str, indexed: Sequence[tuple[int, TestCase]], tl: float, budget: GradingBudget,
               width: int) -> list[TestOutcome]:
        wall, capped = budget.cap(tl + 0.5)
        lim = self.limits(wall)
        reqs = [RunRequest(code=solution, stdin=str(t.input), limits=lim) for _, t in indexed]
        results = self.sandbox.run_many(reqs)
        out = []
        for (i, t), r in zip(indexed, results):
            oc, detail = _classify_stdio(r, t, tl, self.config.float_tol)
            if oc == TIMEOUT and capped and r.timed_out and r.wall_time < tl + 0.25 and budget.confirms():
                oc, detail = BUDGET_EXHAUSTED, f"killed after {r.wall_time:.3f}s when the grading budget ran out"
            out.append(TestOutcome(index=i, outcome=oc, runtime=r.wall_time, public=t.public, detail=detail))
        return out

    # call ----------------------------------------------------------------------------------
    def _calls(self, problem: CodeProblem, solution: str, indexed: Sequence[tuple[int, TestCase]], tl: float,
               budget: GradingBudget, rule: Optional[str]) -> list[TestOutcome]:
        from evo_code._values import encode_value

        calls = [{"args": encode_value(tuple(t.input) if isinstance(t.input, list) else (t.input,)), "kwargs": {"$d": []}}
                 for _, t in indexed]
        stop_on = {"first_failure": "failure", "first_timeout": "timeout"}.get(rule or "")
        run = run_calls(self.sandbox, self.limits, solution, problem.fn_name or "", calls, tl, budget, stop_on=stop_on)
        out = []
        for j, (i, t) in enumerate(indexed):
            oc, rt, detail, ran = classify_call(run, j, tl, budget, t.output, float_tol=self.config.float_tol)
            out.append(TestOutcome(index=i, outcome=oc, runtime=rt, public=t.public, detail=detail, ran=ran))
        return out


def _exit_trigger(tests: Sequence[TestOutcome], rule: Optional[str]) -> Optional[TestOutcome]:
    """The test whose failure ends grading under ``rule``, if any."""
    for t in tests:
        if t.outcome == PASS or t.outcome in _NOT_A_RESULT:
            continue
        if rule == "first_failure" or (rule == "first_timeout" and t.outcome == TIMEOUT):
            return t
    return None


def _stop_reason(tests: Sequence[TestOutcome]) -> str:
    if any(t.outcome == BUDGET_EXHAUSTED for t in tests):
        return BUDGET_EXHAUSTED
    if any(t.outcome == SKIPPED for t in tests):
        first = next((t for t in tests if t.outcome not in (PASS, *_NOT_A_RESULT)), None)
        return EARLY_EXIT_AFTER_TIMEOUT if first is not None and first.outcome == TIMEOUT else EARLY_EXIT_AFTER_FAILURE
    return COMPLETE


def _classify_stdio(r: ExecResult, t: TestCase, tl: float, tol: Optional[float]) -> tuple[str, str]:
    if r.infra_error:
        return INFRA_ERROR, r.infra_error
    if r.oom:  # set only when the run ended by failing to allocate, not by the clock
        return MEMORY_LIMIT, r.stderr[-200:]
    if r.timed_out or r.wall_time > tl + 0.25:
        return TIMEOUT, f"{r.wall_time:.3f}s (limit {tl:.3f}s)"
    if r.exit_code != 0 or r.signal is not None:
        return RUNTIME_ERROR, f"exit {r.exit_code} signal {r.signal}: {r.stderr[-300:]}"
    if r.stdout_truncated:
        return WRONG_ANSWER, "output exceeded the cap"
    if stdout_matches(r.stdout, str(t.output), tol):
        return PASS, ""
    return WRONG_ANSWER, f"got {short(r.stdout)}, expected {short(t.output)}"


def _cacheable(r: ExecResult, lim: Limits) -> bool:
    """A finished run whose outcome does not depend on how loaded the machine was."""
    return (r.infra_error is None and not r.timed_out and not r.oom and r.signal is None
            and not r.stdout_truncated and len(r.stdout) <= _RUN_CACHE_MAX_OUT
            and r.wall_time < 0.5 * lim.wall_seconds)


def _compile_error(solution: str) -> Optional[str]:
    """Parse only (compile never runs code): a syntax error is a compile_error verdict."""
    try:
        compile(solution, "solution.py", "exec")
    except (SyntaxError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    except (RecursionError, MemoryError) as exc:
        return f"{type(exc).__name__}: solution too deeply nested to compile"
    return None

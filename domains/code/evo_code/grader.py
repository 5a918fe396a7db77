"""Grade a solution against a problem's tests, running the candidate only in the sandbox.

- stdio: one sandbox run per test (fresh forked process each, warm pool); the grader
  compares stdout (LiveCodeBench rules, ``compare.py``).
- call: one sandbox run for all tests; the candidate-side harness reports the *returned
  values* as tagged JSON (plain builtins only); the grader compares.
- assert: HumanEval / MBPP asserts run in a separate sandbox run that never contains the
  candidate (``_harness_driver.py``); candidate calls are answered from values the
  candidate returned in its own sandbox run, round by round.

So the candidate never sees an expected output, never runs in the process that
compares, and cannot end the test early, skip it, or print its way to a pass. The verdict
never rests on an exit code alone: stdio needs exit 0 *and* matching output.

An infrastructure failure anywhere (sandbox died, driver could not run) gives
``Verdict.infra`` — no reward — never a 0/1.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from importlib import resources
from typing import Any, Optional, Sequence

import attrs
import structlog

from evo_code.compare import stdout_matches, value_matches
from evo_code.problem import (
    ASSERT,
    CALL,
    COMPILE_ERROR,
    INFRA_ERROR,
    MEMORY_LIMIT,
    NOT_RUN,
    OUTCOMES,
    PASS,
    RUNTIME_ERROR,
    STDIO,
    TIMEOUT,
    WRONG_ANSWER,
    CodeProblem,
    TestCase,
)
from evo_code.signals import hardcode_signals
from evo_core.api import Verdict
from evo_core.sandbox.protocol import ExecResult, Limits, RunRequest, Sandbox

log = structlog.get_logger("evo.code")


def _src(name: str) -> str:
    return resources.files("evo_code").joinpath(name).read_text(encoding="utf-8")


_VALUES_SRC = _src("_values.py")
CALL_HARNESS = _VALUES_SRC + "\n" + _src("_harness_call.py")
DRIVER_HARNESS = _VALUES_SRC + "\n" + _src("_harness_driver.py")


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


@attrs.frozen(kw_only=True)
class TestOutcome:
    index: int
    outcome: str
    runtime: float = 0.0
    public: bool = False
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


class CodeGrader:
    """Thread-safe. Holds a sandbox (a ``LocalSandbox`` by default, created lazily)."""

    def __init__(self, sandbox: Optional[Sandbox] = None, config: GradeConfig = GradeConfig()) -> None:
        self._sandbox = sandbox
        self._own_sandbox = sandbox is None
        self.config = config
        self._limits_cache: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    @property
    def sandbox(self) -> Sandbox:
        with self._lock:
            if self._sandbox is None:
                from evo_core.sandbox.pool import LocalSandbox

                self._sandbox = LocalSandbox()
            return self._sandbox

    def close(self) -> None:
        if self._own_sandbox and self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

    # -- time limits ---------------------------------------------------------------------
    def time_limit(self, problem: CodeProblem) -> tuple[float, str]:
        """(per-test seconds, where it came from): k x reference runtime, else the
        dataset's limit, else the default. Cached per problem id."""
        cached = self._limits_cache.get(problem.problem_id)
        if cached:
            return cached
        cfg = self.config
        result: tuple[float, str] = (problem.time_limit_s or cfg.default_time_limit_s, "dataset" if problem.time_limit_s else "default")
        if cfg.calibrate and problem.reference:
            generous = max(cfg.max_time_limit_s, result[0])
            if problem.kind == ASSERT:  # runtime of a step = the candidate time of its calls
                tests = self._grade_asserts(problem, problem.reference, generous, "all", _compile_error(problem.reference))
            else:
                tests = self._run_tests(problem, problem.reference, list(enumerate(problem.tests)), generous)
            if tests and all(t.outcome == PASS for t in tests):
                slowest = max(t.runtime for t in tests)
                tl = min(cfg.max_time_limit_s, max(cfg.min_time_limit_s, cfg.k_reference * slowest))
                result = (tl, "reference")
            elif tests and not any(t.outcome == INFRA_ERROR for t in tests):
                log.warning("reference solution fails its own tests; not calibrating", problem=problem.problem_id)
                result = (result[0], result[1] + "+reference_failed")
            else:
                return result  # infra trouble: try again next time
        self._limits_cache[problem.problem_id] = result
        return result

    # -- grading -------------------------------------------------------------------------
    def grade(self, problem: CodeProblem, solution: str, scope: str = "all") -> Verdict:
        """``scope="public"``: the visible tests only (training verifier);
        ``"all"``: every test including hidden ones (strict oracle)."""
        if scope not in ("public", "all"):
            raise ValueError(f"scope must be 'public' or 'all', got {scope!r}")
        t0 = time.monotonic()
        tl, tl_source = self.time_limit(problem)
        compile_msg = _compile_error(solution)
        if problem.kind == ASSERT:
            tests = self._grade_asserts(problem, solution, tl, scope, compile_msg)
        else:
            chosen = problem.public_tests(self.config.public_k) if scope == "public" else problem.tests
            indexed = [(problem.tests.index(t) if scope == "public" else i, t) for i, t in enumerate(chosen)]
            if compile_msg:
                tests = [TestOutcome(index=i, outcome=COMPILE_ERROR, public=t.public, detail=compile_msg) for i, t in indexed]
            else:
                tests = self._run_tests(problem, solution, indexed, tl)
        return self._verdict(problem, solution, tests, tl, tl_source, scope, time.monotonic() - t0)

    def _verdict(self, problem, solution, tests, tl, tl_source, scope, elapsed) -> Verdict:
        counts = {o: 0 for o in OUTCOMES}
        for t in tests:
            counts[t.outcome] = counts.get(t.outcome, 0) + 1
        counts = {k: v for k, v in counts.items() if v}
        n_pass = counts.get(PASS, 0)
        first_fail = next((t for t in tests if t.outcome != PASS), None)
        signals: dict[str, Any] = {
            "kind": problem.kind,
            "source_format": problem.source_format,
            "scope": scope,
            "n_tests": len(tests),
            "n_passed": n_pass,
            "pass_fraction": (n_pass / len(tests)) if tests else 0.0,
            "outcomes": [t.outcome for t in tests],
            "outcome_counts": counts,
            "runtime_max": max((t.runtime for t in tests), default=0.0),
            "runtime_total": sum(t.runtime for t in tests),
            "time_limit_s": tl,
            "time_limit_source": tl_source,
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
        return Verdict(reward=1.0 if ok else 0.0, correct=ok, signals=signals, details=details)

    def _limits(self, wall: float, tl: float) -> Limits:
        return Limits(
            wall_seconds=wall,
            cpu_seconds=max(1.0, wall),
            memory_mb=self.config.memory_mb,
            processes=64,
            output_bytes=self.config.output_bytes,
        )

    def _run_tests(self, problem: CodeProblem, solution: str, indexed: Sequence[tuple[int, TestCase]], tl: float) -> list[TestOutcome]:
        if not indexed:
            return []
        if problem.kind == STDIO:
            return self._stdio(solution, indexed, tl)
        if problem.kind == CALL:
            if not problem.fn_name:
                raise ValueError(f"problem {problem.problem_id}: call-based tests need fn_name")
            calls = [{"args": _enc_args(t.input), "kwargs": {"$d": []}} for _, t in indexed]
            recs, res, load_err = self._call_candidate(solution, problem.fn_name, calls, tl)
            out = []
            for j, (i, t) in enumerate(indexed):
                oc, rt, detail = self._classify_call(recs, j, res, load_err, tl, t.output)
                out.append(TestOutcome(index=i, outcome=oc, runtime=rt, public=t.public, detail=detail))
            return out
        raise ValueError(f"problem {problem.problem_id}: unknown kind {problem.kind!r}")

    # stdio ---------------------------------------------------------------------------------
    def _stdio(self, solution: str, indexed: Sequence[tuple[int, TestCase]], tl: float) -> list[TestOutcome]:
        lim = self._limits(tl + 0.5, tl)
        reqs = [RunRequest(code=solution, stdin=str(t.input), limits=lim) for _, t in indexed]
        results = self.sandbox.run_many(reqs)
        out = []
        for (i, t), r in zip(indexed, results):
            oc, detail = _classify_stdio(r, t, tl, self.config.float_tol)
            out.append(TestOutcome(index=i, outcome=oc, runtime=r.wall_time, public=t.public, detail=detail))
        return out

    # call ----------------------------------------------------------------------------------
    def _call_candidate(self, solution: str, fn: str, calls: list[dict[str, Any]], tl: float):
        nonce = secrets.token_hex(16)
        req = {"fn": fn, "calls": calls, "nonce": nonce, "per_call_s": tl, "load_s": max(tl, 5.0)}
        lim = self._limits(max(tl, 5.0) + tl * len(calls) + 1.0, tl)
        res = self.sandbox.run(RunRequest(code=CALL_HARNESS, files={"solution.py": solution}, stdin=json.dumps(req), limits=lim))
        recs: dict[int, dict[str, Any]] = {}
        load_err = None
        for line in res.stdout.splitlines():
            if not line.startswith(nonce + " "):
                continue
            try:
                rec = json.loads(line[len(nonce) + 1 :])
            except json.JSONDecodeError:
                continue
            if "load_error" in rec and load_err is None:
                load_err = rec
            elif isinstance(rec.get("i"), int) and rec["i"] not in recs:
                recs[rec["i"]] = rec
        return recs, res, load_err

    def _classify_call(self, recs, j, res: ExecResult, load_err, tl, expected, compare=True):
        if res.infra_error:
            return INFRA_ERROR, 0.0, res.infra_error
        if load_err is not None:
            kind = {"compile_error": COMPILE_ERROR, "timeout": TIMEOUT}.get(load_err["load_error"], RUNTIME_ERROR)
            return kind, 0.0, f"{load_err.get('exc')}: {load_err.get('msg', '')}"[:500]
        rec = recs.get(j)
        if rec is None:
            # The process ended before reporting this call: it was killed, crashed, or
            # left early (os._exit / sys.exit before the tests). Earlier calls may be fine.
            first_missing = all(k in recs for k in range(j))
            if not first_missing:
                return NOT_RUN, 0.0, "an earlier test ended the process"
            if res.timed_out:
                return TIMEOUT, res.wall_time, "killed at the time limit"
            if res.oom:
                return MEMORY_LIMIT, res.wall_time, "memory limit"
            return RUNTIME_ERROR, res.wall_time, f"process ended before this test (exit {res.exit_code}, signal {res.signal}): {res.stderr[-300:]}"
        t = float(rec.get("t", 0.0))
        if rec.get("timeout") or t > tl:
            return TIMEOUT, t, f"took {t:.3f}s > {tl:.3f}s"
        if "bad_value" in rec:
            return WRONG_ANSWER, t, f"non-plain return value: {rec['bad_value']}"
        if "exc" in rec:
            if rec["exc"] == "MemoryError":
                return MEMORY_LIMIT, t, "MemoryError"
            return RUNTIME_ERROR, t, f"{rec['exc']}: {rec.get('msg', '')}"[:500]
        if not compare:
            return PASS, t, ""
        from evo_code._values import decode_value

        try:
            got = decode_value(rec["ok"])
        except (ValueError, TypeError, KeyError) as exc:
            return WRONG_ANSWER, t, f"undecodable result: {exc}"
        if value_matches(got, expected, self.config.float_tol):
            return PASS, t, ""
        return WRONG_ANSWER, t, f"got {_short(got)}, expected {_short(expected)}"

    # assert --------------------------------------------------------------------------------
    def _grade_asserts(self, problem: CodeProblem, solution: str, tl: float, scope: str, compile_msg: Optional[str]) -> list[TestOutcome]:
        suite = problem.asserts
        if suite is None or not problem.fn_name:
            raise ValueError(f"problem {problem.problem_id}: assert tests need an assert suite and an entry point")
        asserts = list(suite.asserts) + (list(suite.hidden_asserts) if scope == "all" else [])
        base = {
            "mode": suite.mode,
            "test": suite.test,
            "asserts": asserts,
            "setup": suite.setup,
            "check_fn": suite.check_fn,
            "entry_point": problem.fn_name,
        }
        if compile_msg:
            n = len(asserts) if suite.mode == "asserts" else 1
            return [TestOutcome(index=i, outcome=COMPILE_ERROR, public=True, detail=compile_msg) for i in range(n)]
        memo: dict[str, dict[str, Any]] = {}
        drv_lim = self._limits(self.config.driver_wall_s, tl)
        for _round in range(self.config.max_assert_rounds):
            dres = self.sandbox.run(RunRequest(code=DRIVER_HARNESS, stdin=json.dumps(dict(base, memo=list(memo.items()))), limits=drv_lim))
            if dres.infra_error:
                return [TestOutcome(index=0, outcome=INFRA_ERROR, detail=dres.infra_error)]
            try:
                out = json.loads(dres.stdout)
            except json.JSONDecodeError:
                return [TestOutcome(index=0, outcome=INFRA_ERROR, detail=f"test driver failed (exit {dres.exit_code}, timed_out={dres.timed_out}): {dres.stderr[-300:]}")]
            if out.get("error"):
                return [TestOutcome(index=0, outcome=INFRA_ERROR, detail=f"the problem's test code does not run: {out['error']}")]
            if out["final"]:
                return [_step_outcome(i, s) for i, s in enumerate(out["results"])]
            needed = out["needed"]
            if not needed:
                return [TestOutcome(index=0, outcome=INFRA_ERROR, detail="tests depend on values that never resolve")]
            calls = [{"args": n["args"], "kwargs": n["kwargs"]} for n in needed]
            recs, res, load_err = self._call_candidate(solution, problem.fn_name, calls, tl)
            if res.infra_error:
                return [TestOutcome(index=0, outcome=INFRA_ERROR, detail=res.infra_error)]
            if load_err is not None:
                oc, _, detail = self._classify_call(recs, 0, res, load_err, tl, None)
                n = len(asserts) if suite.mode == "asserts" else 1
                return [TestOutcome(index=i, outcome=oc, public=True, detail=detail) for i in range(n)]
            for j, n in enumerate(needed):
                oc, t, detail = self._classify_call(recs, j, res, None, tl, None, compare=False)
                rec = recs.get(j)
                if oc == PASS and rec is not None:
                    memo[n["key"]] = {"ok": rec["ok"], "t": t}
                elif oc == TIMEOUT:
                    memo[n["key"]] = {"timeout": True, "t": t}
                elif oc == WRONG_ANSWER:
                    memo[n["key"]] = {"bad_value": detail, "t": t}
                else:
                    memo[n["key"]] = {"exc": oc, "msg": detail, "t": t}
        return [TestOutcome(index=0, outcome=INFRA_ERROR, detail=f"assert tests did not settle in {self.config.max_assert_rounds} rounds")]


def _step_outcome(i: int, s: dict[str, Any]) -> TestOutcome:
    oc = s["outcome"]
    if oc == "test_error":  # e.g. the test's arithmetic fails on what the candidate returned
        oc = WRONG_ANSWER
    if oc == RUNTIME_ERROR and "MemoryError" in s.get("msg", ""):
        oc = MEMORY_LIMIT
    detail = (s.get("step", "") + (" -> " + s["msg"] if s.get("msg") else ""))[:500]
    return TestOutcome(index=i, outcome=oc, runtime=float(s.get("t", 0.0)), public=True, detail=detail)


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
    return WRONG_ANSWER, f"got {_short(r.stdout)}, expected {_short(t.output)}"


def _compile_error(solution: str) -> Optional[str]:
    """Parse only (compile never runs code): a syntax error is a compile_error verdict."""
    try:
        compile(solution, "solution.py", "exec")
    except (SyntaxError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    except (RecursionError, MemoryError) as exc:
        return f"{type(exc).__name__}: solution too deeply nested to compile"
    return None


def _enc_args(args: Any) -> Any:
    from evo_code._values import encode_value

    return encode_value(tuple(args) if isinstance(args, list) else (args,))


def _short(v: Any, n: int = 120) -> str:
    s = v if isinstance(v, str) else json.dumps(v, default=repr)
    return s if len(s) <= n else s[:n] + "..."

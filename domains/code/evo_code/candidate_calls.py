"""One sandbox run of the candidate-side call harness (``_harness_call.py``), and what each
call's record means.

The harness reports return values (tagged JSON) on a nonce-framed channel; it never sees
an expected value. Everything it reports is treated as a claim: values are compared in the
grading process, and a claim that the grading budget cut a call is believed only when the
grader's own clock agrees (a forged one counts as a timeout, never as "no verdict").
"""

from __future__ import annotations

import json
import secrets
from importlib import resources
from typing import Any, Callable, Optional

import attrs

from evo_code.budget import GradingBudget
from evo_code.compare import value_matches
from evo_code.problem import (
    BUDGET_EXHAUSTED,
    COMPILE_ERROR,
    INFRA_ERROR,
    MEMORY_LIMIT,
    NOT_RUN,
    PASS,
    RUNTIME_ERROR,
    SKIPPED,
    TIMEOUT,
    WRONG_ANSWER,
)
from evo_core.api.sandbox import ExecResult, Limits, RunRequest, Sandbox


def _src(name: str) -> str:
    return resources.files("evo_code").joinpath(name).read_text(encoding="utf-8")


_VALUES_SRC = _src("_values.py")
CALL_HARNESS = _VALUES_SRC + "\n" + _src("_harness_call.py")
DRIVER_HARNESS = _VALUES_SRC + "\n" + _src("_harness_driver.py")


@attrs.frozen
class CallRun:
    """What one harness run said: per-call records, a load error, where it stopped."""

    result: ExecResult
    records: dict[int, dict[str, Any]]
    load_error: Optional[dict[str, Any]]
    stop: Optional[dict[str, Any]]  # {"stop": "timeout" | "failure" | "budget", "at": index}
    wall_capped: bool  # the budget, not the calls' limits, set the run's wall limit


def run_calls(
    sandbox: Sandbox,
    limits: Callable[[float], Limits],
    solution: str,
    fn: str,
    calls: list[dict[str, Any]],
    tl: float,
    budget: GradingBudget,
    stop_on: Optional[str] = None,
    fixture: str = "",
) -> CallRun:
    nonce = secrets.token_hex(16)
    load_s = max(tl, 5.0)
    req: dict[str, Any] = {"fn": fn, "calls": calls, "nonce": nonce, "per_call_s": tl, "load_s": load_s, "stop_on": stop_on}
    if fixture:
        req["fixture"] = fixture
    wall, capped = budget.cap(load_s + tl * len(calls) + 1.0)
    if capped:  # the harness stops itself a little before the sandbox would kill it
        req["budget_s"] = max(0.01, wall - 0.25)
    res = sandbox.run(RunRequest(code=CALL_HARNESS, files={"solution.py": solution}, stdin=json.dumps(req), limits=limits(wall)))
    recs: dict[int, dict[str, Any]] = {}
    load_err = stop = None
    for line in res.stdout.splitlines():
        if not line.startswith(nonce + " "):
            continue
        try:
            rec = json.loads(line[len(nonce) + 1 :])
        except json.JSONDecodeError:
            continue
        if not isinstance(rec, dict):
            continue
        if "load_error" in rec and load_err is None:
            load_err = rec
        elif "stop" in rec and stop is None and isinstance(rec.get("at"), int):
            stop = rec
        elif isinstance(rec.get("i"), int) and rec["i"] not in recs:
            recs[rec["i"]] = rec
    return CallRun(res, recs, load_err, stop, capped)


def classify_call(
    run: CallRun, j: int, tl: float, budget: GradingBudget, expected: Any = None, compare: bool = True,
    float_tol: Optional[float] = None,
) -> tuple[str, float, str, bool]:
    """(outcome, runtime, detail, whether the call ran) for call ``j`` of ``run``."""
    res = run.result
    if res.infra_error:
        return INFRA_ERROR, 0.0, res.infra_error, False
    if run.load_error is not None:
        kind = run.load_error.get("load_error")
        if kind == "budget":
            kind = "budget" if budget.confirms() else "timeout"
        oc = {"compile_error": COMPILE_ERROR, "timeout": TIMEOUT, "budget": BUDGET_EXHAUSTED}.get(kind, RUNTIME_ERROR)
        return oc, 0.0, f"{run.load_error.get('exc')}: {run.load_error.get('msg', '')}"[:500], False
    rec = run.records.get(j)
    if rec is None:
        if run.stop is not None and j >= run.stop["at"]:
            if run.stop["stop"] == "budget" and budget.confirms():
                return BUDGET_EXHAUSTED, 0.0, "not started: the grading budget ran out", False
            return SKIPPED, 0.0, f"not run: stopped after the first {run.stop['stop']}", False
        # The process ended before reporting this call: it was killed, crashed, or left
        # early (os._exit / sys.exit before the tests). Earlier calls may be fine.
        if not all(k in run.records for k in range(j)):
            if run.wall_capped and res.timed_out and budget.confirms():
                return BUDGET_EXHAUSTED, 0.0, "not started: the grading budget ran out", False
            return NOT_RUN, 0.0, "an earlier test ended the process", False
        if res.timed_out:
            if run.wall_capped and budget.confirms():
                return BUDGET_EXHAUSTED, res.wall_time, "killed when the grading budget ran out", True
            return TIMEOUT, res.wall_time, "killed at the time limit", True
        if res.oom:
            return MEMORY_LIMIT, res.wall_time, "memory limit", True
        return RUNTIME_ERROR, res.wall_time, f"process ended before this test (exit {res.exit_code}, signal {res.signal}): {res.stderr[-300:]}", True
    t = float(rec.get("t", 0.0)) if isinstance(rec.get("t"), (int, float)) else 0.0
    if rec.get("budget"):
        if budget.confirms():
            return BUDGET_EXHAUSTED, t, "cut when the grading budget ran out", True
        return TIMEOUT, t, "reported a budget cut the grader's clock does not confirm", True
    if rec.get("timeout") or t > tl:
        return TIMEOUT, t, f"took {t:.3f}s > {tl:.3f}s", True
    if "bad_value" in rec:
        return WRONG_ANSWER, t, f"non-plain return value: {rec['bad_value']}", True
    if "exc" in rec:
        if rec["exc"] == "MemoryError":
            return MEMORY_LIMIT, t, "MemoryError", True
        return RUNTIME_ERROR, t, f"{rec['exc']}: {rec.get('msg', '')}"[:500], True
    if "ok" not in rec:
        return WRONG_ANSWER, t, "malformed result record", True
    if not compare:
        return PASS, t, "", True
    from evo_code._values import decode_value

    try:
        got = decode_value(rec["ok"])
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        return WRONG_ANSWER, t, f"undecodable result: {exc}", True
    if value_matches(got, expected, float_tol):
        return PASS, t, "", True
    return WRONG_ANSWER, t, f"got {short(got)}, expected {short(expected)}", True


def short(v: Any, n: int = 120) -> str:
    s = v if isinstance(v, str) else json.dumps(v, default=repr)
    return s if len(s) <= n else s[:n] + "..."

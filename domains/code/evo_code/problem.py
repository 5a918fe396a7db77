"""A competitive-programming problem, independent of the dataset format it came from."""

from __future__ import annotations

from typing import Any, Mapping, Optional

import attrs

# Outcome classes for one test and for a whole solution.
PASS = "pass"
WRONG_ANSWER = "wrong_answer"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
MEMORY_LIMIT = "memory_limit"
COMPILE_ERROR = "compile_error"
INFRA_ERROR = "infra_error"
NOT_RUN = "not_run"  # the candidate's process ended before this test
SKIPPED = "skipped"  # not run: an earlier failure already decided the verdict (early exit)
BUDGET_EXHAUSTED = "budget_exhausted"  # cut, or never started, when the problem's grading budget ran out
OUTCOMES = (PASS, WRONG_ANSWER, RUNTIME_ERROR, TIMEOUT, MEMORY_LIMIT, COMPILE_ERROR, INFRA_ERROR, NOT_RUN, SKIPPED,
            BUDGET_EXHAUSTED)

# Why grading of a solution stopped (the verdict's ``stop_reason`` signal).
COMPLETE = "complete"  # every test in scope ran
EARLY_EXIT_AFTER_FAILURE = "early_exit_after_failure"
EARLY_EXIT_AFTER_TIMEOUT = "early_exit_after_timeout"
STOP_REASONS = (COMPLETE, EARLY_EXIT_AFTER_FAILURE, EARLY_EXIT_AFTER_TIMEOUT, BUDGET_EXHAUSTED)

STDIO = "stdio"  # program reads stdin, writes stdout
CALL = "call"  # a function (or Solution method) is called with arguments
ASSERT = "assert"  # HumanEval check(candidate) / MBPP assert statements


@attrs.frozen(kw_only=True)
class TestCase:
    """stdio: ``input``/``output`` are text. call: ``input`` is the argument list and
    ``output`` the expected return value (plain JSON values)."""

    input: Any
    output: Any
    public: bool = False


@attrs.frozen(kw_only=True)
class AssertSuite:
    """Assert-style tests: either a ``check(candidate)`` function (HumanEval) or a list of
    assert statements naming the entry point (MBPP)."""

    mode: str  # "check" | "asserts"
    test: str = ""  # HumanEval: the source defining check()
    asserts: tuple[str, ...] = ()
    hidden_asserts: tuple[str, ...] = ()  # MBPP challenge_test_list: oracle only
    setup: str = ""  # trusted code the tests need: HumanEval's prompt helpers, MBPP test_imports
    # MBPP test_setup_code: runs in the test driver; when it needs the solution's own
    # definitions (a NameError there: MBPP 367/927 build trees from the solution's Node
    # class) it runs in the candidate's process after the solution instead, and the tests
    # hand the objects it made to the candidate by name.
    fixture: str = ""
    solution_classes: tuple[str, ...] = ()  # the solution's classes the tests construct (MBPP 601's Pair)
    check_fn: str = "check"


@attrs.frozen(kw_only=True)
class CodeProblem:
    problem_id: str
    prompt: str
    kind: str  # STDIO | CALL | ASSERT
    tests: tuple[TestCase, ...] = ()
    asserts: Optional[AssertSuite] = None
    fn_name: Optional[str] = None
    reference: Optional[str] = None  # a known-correct solution, used to calibrate time limits
    starter_code: str = ""  # HumanEval prompt / LeetCode stub the completion continues
    time_limit_s: Optional[float] = None  # per test, from the dataset, if any
    source_format: str = ""
    meta: Mapping[str, Any] = attrs.Factory(dict)

    def public_tests(self, k_default: int = 3) -> tuple[TestCase, ...]:
        """The visible tests: those the format marks public, else the first ``k_default``."""
        pub = tuple(t for t in self.tests if t.public)
        return pub if pub else self.tests[:k_default]

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=True)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "CodeProblem":
        d = dict(d)
        d["tests"] = tuple(TestCase(**t) for t in d.get("tests") or ())
        if d.get("asserts"):
            a = dict(d["asserts"])
            a["asserts"] = tuple(a.get("asserts") or ())
            a["hidden_asserts"] = tuple(a.get("hidden_asserts") or ())
            a["solution_classes"] = tuple(a.get("solution_classes") or ())
            d["asserts"] = AssertSuite(**a)
        return cls(**d)


@attrs.frozen(kw_only=True)
class TestOutcome:
    index: int
    outcome: str
    runtime: float = 0.0
    public: bool = False
    detail: str = ""
    ran: bool = True  # False: the test never ran (skipped, or the budget ran out first)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

"""Bounded grading: early exit, the per-problem wall budget, and their outcome classes.

No test here times anything: each asserts outcomes and how many tests actually ran
(``n_executed``). The timeout markers only stop a regression (every test waiting for its
own limit: hours for the 10,000-test problems) from hanging the suite.
"""

from __future__ import annotations

import json

import attrs
import pytest

from evo_code import CodeGrader, GradeConfig, load_problems
from evo_code.problem import PASS, TIMEOUT, WRONG_ANSWER
from evo_core.api import Completion, TaskSource
from evo_core.sandbox.protocol import ExecResult

# The outcome classes, spelled as the verdicts carry them (and docs/code.md documents them).
SKIPPED, BUDGET_EXHAUSTED = "skipped", "budget_exhausted"
LOOP = "while True:\n    pass\n"
SUM = "a, b = map(int, input().split())\nprint(a + b)\n"


def _taco_stdio(path, n, pid="many"):
    """A TACO row (stdio) with ``n`` tests, as the dataset ships them."""
    io = {"inputs": [f"{i} {2 * i}\n" for i in range(n)], "outputs": [f"{3 * i}\n" for i in range(n)]}
    row = {"id": pid, "question": "Print a+b.", "input_output": json.dumps(io), "solutions": json.dumps([SUM])}
    path.write_text(json.dumps(row) + "\n")
    return path


def _taco_call(path, n):
    io = {"fn_name": "add", "inputs": [[i, 2 * i] for i in range(n)], "outputs": [[3 * i] for i in range(n)]}
    row = {"id": "many-fn", "question": "Return a+b.", "input_output": json.dumps(io), "starter_code": "def add(a, b):\n"}
    path.write_text(json.dumps(row) + "\n")
    return path


@pytest.fixture(scope="module")
def fast(sandbox):
    """No calibration, 1 s per test: a loop costs one limit per test it is allowed to run."""
    return CodeGrader(sandbox, GradeConfig(calibrate=False, default_time_limit_s=1.0))


def _counts(v):
    return v.signals["outcome_counts"]


@pytest.mark.timeout(300)
def test_ten_thousand_stdio_tests_and_an_infinite_loop_stop_at_the_first_timeout(fast, sandbox, tmp_path):
    (p,) = load_problems(_taco_stdio(tmp_path / "taco.jsonl", 10_000))
    v = fast.grade(p, LOOP, scope="all")
    assert v.reward == 0.0 and v.correct is False and v.infra_error is None  # a real verdict
    assert v.signals["stop_reason"] == "early_exit_after_timeout"
    # only the first chunk ran (one test per sandbox worker); every other test was skipped
    assert 1 <= v.signals["n_executed"] <= sandbox.size
    assert _counts(v)[TIMEOUT] == v.signals["n_executed"] and _counts(v)[SKIPPED] == 10_000 - v.signals["n_executed"]
    assert v.signals["n_tests"] == 10_000 and v.details["tests"][-1]["ran"] is False


@pytest.mark.timeout(300)
def test_ten_thousand_call_tests_loop_wrong_and_right(fast, tmp_path):
    (p,) = load_problems(_taco_call(tmp_path / "fn.jsonl", 10_000))
    looping = fast.grade(p, "def add(a, b):\n    while True:\n        pass\n")
    assert looping.reward == 0.0 and looping.infra_error is None
    assert looping.signals["stop_reason"] == "early_exit_after_timeout"
    assert looping.signals["n_executed"] == 1 and looping.signals["outcomes"][:2] == [TIMEOUT, SKIPPED]
    wrong = fast.grade(p, "def add(a, b):\n    return a - b\n")
    # 0 - 0 == 0 passes; the first real failure ends grading after its chunk
    assert wrong.reward == 0.0 and wrong.signals["stop_reason"] == "early_exit_after_failure"
    assert wrong.signals["outcomes"][:2] == [PASS, WRONG_ANSWER] and wrong.signals["n_executed"] < 100
    right = fast.grade(p, "def add(a, b):\n    return a + b\n")
    assert right.reward == 1.0 and right.signals["n_executed"] == 10_000 and right.signals["stop_reason"] == "complete"


@pytest.mark.timeout(300)
def test_the_budget_bounds_grading_when_nothing_exits_early(sandbox, tmp_path):
    """Fraction scoring never exits early, so only the budget stops a loop; running out is
    the program's verdict (0 credit for what did not pass), not an infrastructure failure."""
    g = CodeGrader(sandbox, GradeConfig(calibrate=False, default_time_limit_s=1.0, scoring="fraction", budget_s=3.0))
    (p,) = load_problems(_taco_stdio(tmp_path / "taco.jsonl", 200))
    v = g.grade(p, LOOP)
    assert v.reward == 0.0 and v.correct is False and v.infra_error is None
    assert v.signals["stop_reason"] == BUDGET_EXHAUSTED and v.signals["budget_s"] == 3.0
    assert _counts(v).get(BUDGET_EXHAUSTED, 0) >= 200 - v.signals["n_executed"] > 0
    assert set(v.signals["outcomes"]) <= {TIMEOUT, BUDGET_EXHAUSTED}
    (c,) = load_problems(_taco_call(tmp_path / "fn.jsonl", 200))
    v = g.grade(c, "def add(a, b):\n    while True:\n        pass\n")
    assert v.reward == 0.0 and v.infra_error is None and v.signals["stop_reason"] == BUDGET_EXHAUSTED
    assert v.signals["n_executed"] < 200 and _counts(v)[BUDGET_EXHAUSTED] > 0


def test_fraction_scoring_grades_every_test(sandbox, tmp_path):
    g = CodeGrader(sandbox, GradeConfig(calibrate=False, default_time_limit_s=2.0, scoring="fraction"))
    (p,) = load_problems(_taco_stdio(tmp_path / "taco.jsonl", 8))
    half = "a, b = map(int, input().split())\nprint(a + b if a % 2 == 0 else -1)\n"
    v = g.grade(p, half)
    assert v.reward == 0.5 and v.correct is False and v.signals["stop_reason"] == "complete"
    assert v.signals["n_executed"] == 8 and _counts(v) == {PASS: 4, WRONG_ANSWER: 4}
    assert g.grade(p, SUM).reward == 1.0


def test_first_timeout_rule_keeps_partial_credit_before_the_loop(sandbox, tmp_path):
    g = CodeGrader(sandbox, GradeConfig(calibrate=False, default_time_limit_s=1.0, scoring="fraction",
                                        early_exit="first_timeout"))
    (c,) = load_problems(_taco_call(tmp_path / "fn.jsonl", 20))
    v = g.grade(c, "def add(a, b):\n    while a >= 2:\n        pass\n    return a + b\n")
    assert v.signals["outcomes"][:3] == [PASS, PASS, TIMEOUT] and set(v.signals["outcomes"][3:]) == {SKIPPED}
    assert v.reward == pytest.approx(2 / 20) and v.signals["stop_reason"] == "early_exit_after_timeout"


def test_scoring_and_early_exit_settings_are_checked():
    with pytest.raises(ValueError, match="fraction score"):
        GradeConfig(scoring="fraction", early_exit="first_failure")
    with pytest.raises(ValueError, match="scoring"):
        GradeConfig(scoring="partial")
    with pytest.raises(ValueError, match="budget_s"):
        GradeConfig(budget_s=0)
    assert GradeConfig().exit_rule() == "first_failure" and GradeConfig(scoring="fraction").exit_rule() is None
    assert GradeConfig(budget_s=None).budget_s is None  # None switches the budget off
    assert attrs.evolve(GradeConfig(), early_exit="never").exit_rule() is None


def test_an_assert_problem_stops_after_the_timed_out_step(fast, problems):
    p = problems["HumanEval/x-loop"]
    v = fast.grade(p, "def square(x):\n    while True:\n        pass\n")
    steps = v.signals["outcomes"]
    assert v.reward == 0.0 and v.infra_error is None and steps[0] == TIMEOUT and set(steps[1:]) == {SKIPPED}
    assert v.signals["n_executed"] == 1 and v.signals["stop_reason"] == "early_exit_after_timeout"
    assert fast.grade(p, p.reference).reward == 1.0


def test_an_assert_problem_under_a_spent_budget_is_finalized(sandbox, problems):
    g = CodeGrader(sandbox, GradeConfig(calibrate=False, default_time_limit_s=1.0, early_exit="never", budget_s=1.5))
    v = g.grade(problems["HumanEval/x-loop"], "def square(x):\n    while True:\n        pass\n")
    assert v.reward == 0.0 and v.infra_error is None and v.signals["stop_reason"] == BUDGET_EXHAUSTED
    assert BUDGET_EXHAUSTED in v.signals["outcomes"]


def test_the_budget_grows_with_a_calibrated_reference(sandbox, tmp_path):
    g = CodeGrader(sandbox, GradeConfig(budget_s=0.01, k_reference=10.0))
    (p,) = load_problems(_taco_stdio(tmp_path / "taco.jsonl", 6))
    assert g.time_limit(p)[1] == "reference"
    assert g.budget_s(p) > 0.01  # k x the reference's own grading time
    assert g.grade(p, SUM).reward == 1.0  # a solution as fast as the reference fits


class _FailingSandbox:
    """Delegates to a real sandbox but fails (infrastructure) from the ``n``-th run on."""

    def __init__(self, inner, n):
        self.inner, self.n, self.size, self.name = inner, n, inner.size, "flaky"

    def run(self, req):
        self.n -= 1
        return self.inner.run(req) if self.n > 0 else ExecResult.infra("worker died")

    def run_many(self, reqs):
        return [self.run(r) for r in reqs]

    def close(self):
        pass


def test_an_infrastructure_failure_is_still_no_verdict(sandbox, tmp_path):
    (p,) = load_problems(_taco_stdio(tmp_path / "taco.jsonl", 50))
    for cfg in (GradeConfig(calibrate=False), GradeConfig(calibrate=False, scoring="fraction", budget_s=1.0)):
        v = CodeGrader(_FailingSandbox(sandbox, 3), cfg).grade(p, SUM)
        assert v.reward is None and v.correct is None and "worker died" in v.infra_error
        assert v.signals["n_executed"] < 50


def test_a_forged_budget_claim_is_a_failure_not_no_verdict(fast, problems):
    """The harness may say "the budget cut this call"; only the grader's clock decides."""
    code = """
import gc, json, os
for o in gc.get_objects():
    if isinstance(o, dict) and 'nonce' in o and 'calls' in o:
        recs = ''.join(o['nonce'] + ' ' + json.dumps({'i': i, 'budget': True, 't': 0.0}) + '\\n' for i in range(len(o['calls'])))
        for fd in range(1, 20):
            try:
                os.write(fd, recs.encode())
            except OSError:
                pass
        os._exit(0)
def total(xs):
    return 6
"""
    v = fast.grade(problems["taco-fn"], code, scope="all")
    assert v.reward == 0.0 and v.infra_error is None and BUDGET_EXHAUSTED not in v.signals["outcomes"]


@pytest.mark.timeout(300)
def test_one_pathological_rollout_does_not_stall_a_training_batch(sandbox, tmp_path):
    """A batch graded as training grades it (the domain's verify for rewards, its oracle
    for the audit): one `while True: pass` among normal completions."""
    from evo_code.domain import CodeDomain

    dom = CodeDomain(CodeGrader(sandbox, GradeConfig(default_time_limit_s=1.0, min_time_limit_s=1.0)))
    (task,) = dom.load_tasks(TaskSource(path=str(_taco_stdio(tmp_path / "taco.jsonl", 300))))
    fence = "Here is my solution.\n```python\n{}```\n".format
    batch = {
        "right": fence(SUM),
        "right_2": fence("import sys\nfor line in sys.stdin:\n    x, y = line.split()\n    print(int(x) + int(y))\n"),
        "loop": fence(LOOP),
        "right_3": fence("print(sum(int(t) for t in input().split()))\n"),
        "wrong": fence("a, b = map(int, input().split())\nprint(a * b)\n"),
        "crash": fence("raise SystemExit(input())\n"),
    }
    train = {k: dom.verify(task, Completion(text=t)) for k, t in batch.items()}
    audit = {k: dom.oracle(task, Completion(text=t)) for k, t in batch.items()}
    for k in ("right", "right_2", "right_3"):
        assert train[k].reward == 1.0 and audit[k].reward == 1.0
        assert audit[k].signals["n_executed"] == 300 and audit[k].signals["stop_reason"] == "complete"
    for k in ("loop", "wrong", "crash"):
        assert train[k].reward == 0.0 and audit[k].reward == 0.0 and audit[k].infra_error is None
    assert audit["loop"].signals["stop_reason"] == "early_exit_after_timeout"
    assert audit["loop"].signals["n_executed"] <= sandbox.size and audit["loop"].signals["outcome_counts"][SKIPPED] >= 298
    assert audit["wrong"].signals["stop_reason"] == "early_exit_after_failure"  # 0*0 == 0+0, then 1*2 != 3
    assert audit["crash"].signals["n_executed"] <= sandbox.size
    assert train["loop"].signals["scope"] == "public" and train["loop"].signals["outcomes"][0] == TIMEOUT


def test_the_budget_is_set_from_a_run_configs_task_options(tmp_path):
    """`[task] options` of a run config reach the grader (through the domain's configure)."""
    from evo_core.config import config_from_dict
    from evo_core.run_setup import RunError, build_domain
    from evo_core.plugins import PluginManager

    def domain(options):
        cfg = config_from_dict({"task": {"domain": "code", "train": str(tmp_path / "t.jsonl"), "options": options}})
        return build_domain(cfg, PluginManager())[0]

    dom = domain({"budget_s": 5, "scoring": "fraction", "early_exit": "first_timeout"})
    assert dom.grader.config.budget_s == 5 and dom.grader.config.exit_rule() == "first_timeout"
    assert domain({"budget_s": "off"}).grader.config.budget_s is None
    with pytest.raises(RunError, match="unknown option"):
        domain({"budget": 5})
    with pytest.raises(RunError, match="fraction score"):
        domain({"scoring": "fraction", "early_exit": "first_failure"})

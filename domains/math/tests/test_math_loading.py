"""Task loading from local files in the public datasets' formats (all data made here)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evo_core.api import TaskSource
from evo_math.domain import MathDomain
from evo_math.loading import DEFAULT_TEMPLATE, TaskFormatError, render_prompt
from evo_core.testing import require

pa = require("pyarrow", "the parquet extra")
import pyarrow.parquet as pq  # noqa: E402

DOMAIN = MathDomain()


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def load(path: Path, split: str = "train", **kw) -> list:
    return DOMAIN.load_tasks(TaskSource(path=str(path), split=split, **kw))


def test_bigmath_jsonl(tmp_path):
    rows = [
        {"problem": "What is $1+1$?", "answer": "2", "source": "big_math", "domain": "['Algebra']",
         "llama8b_solve_rate": 0.25},
        {"problem": "Simplify $\\frac{2}{4}$.", "answer": "\\frac{1}{2}", "source": "cn_k12"},
    ]
    tasks = load(write_jsonl(tmp_path / "bigmath_hard.jsonl", rows))
    assert [t.gold for t in tasks] == ["2", "\\frac{1}{2}"]
    assert [t.task_id for t in tasks] == ["bigmath_hard:1", "bigmath_hard:2"]
    t = tasks[0]
    assert t.domain == "math" and t.split == "train"
    assert t.prompt.startswith("What is $1+1$?") and "\\boxed{}" in t.prompt
    assert t.meta["llama8b_solve_rate"] == 0.25 and t.meta["source"] == "big_math"
    assert t.meta["row"] == 1 and t.meta["source_file"].endswith("bigmath_hard.jsonl")
    assert tasks[1].meta["source"] == "cn_k12"


def test_math_solution_with_boxed_answer(tmp_path):
    rows = [{"problem": "Find x.", "solution": "We get $x = \\boxed{\\frac{3}{4}}$.", "level": "Level 5",
             "type": "Algebra", "unique_id": "test/algebra/1.json"}]
    [t] = load(write_jsonl(tmp_path / "math.jsonl", rows))
    assert t.gold == "\\frac{3}{4}" and t.task_id == "math:test/algebra/1.json" and t.meta["level"] == "Level 5"


def test_aime_2024_parquet_capitalised_fields(tmp_path):
    table = pa.table({
        "ID": ["2024-I-1", "2024-I-2"],
        "Problem": ["Every morning Aya walks...", "There exist real numbers x and y..."],
        "Solution": ["... so the answer is 204", "... 025"],
        "Answer": [204, 25],
    })
    path = tmp_path / "aime_2024.parquet"
    pq.write_table(table, path)
    tasks = load(path, split="heldout")
    assert [(t.task_id, t.gold, t.split) for t in tasks] == [
        ("aime_2024:2024-I-1", "204", "heldout"), ("aime_2024:2024-I-2", "25", "heldout")]


def test_aime_2025_and_cnmo_styles(tmp_path):
    aime = write_jsonl(tmp_path / "aime_2025.jsonl", [
        {"question": "Find the sum of all integer bases b > 9 ...", "answer": "70"},
        {"problem_idx": 2, "problem": "On triangle ABC ...", "answer": 588},
    ])
    assert [(t.task_id, t.gold) for t in load(aime, split="test")] == [("aime_2025:1", "70"), ("aime_2025:2", "588")]
    cnmo = tmp_path / "cnmo_2024.json"
    cnmo.write_text(json.dumps([{"id": "cnmo-3", "question": "设 $x$ ...", "answer": "$\\sqrt{2}$"}]))
    [t] = load(cnmo, split="held_out")
    assert t.gold == "\\sqrt{2}" and t.split == "heldout" and t.task_id == "cnmo_2024:cnmo-3"


def test_alternate_answer_fields(tmp_path):
    rows = [
        {"question": "Natalia sold clips...", "answer": "She sold 48/2 = 24 clips.\n#### 1,072"},
        {"problem": "OlympiadBench", "final_answer": ["$3$"]},
        {"problem": "multi", "final_answer": ["1", "2"]},
        {"problem": "solution field holding the answer", "answer": "so \\boxed{7}"},
    ]
    golds = [t.gold for t in load(write_jsonl(tmp_path / "mixed.jsonl", rows))]
    assert golds == ["1072", "3", "1, 2", "7"]


def test_explicit_field_names_and_gzip(tmp_path):
    path = tmp_path / "custom.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps({"q": "2+2?", "a": 4, "key": "k1"}) + "\n")
    [t] = load(path, options={"problem_field": "q", "answer_field": "a", "id_field": "key", "id_prefix": ""})
    assert (t.task_id, t.gold) == ("k1", "4")


def test_split_column_filters_rows(tmp_path):
    rows = [{"problem": f"p{i}", "answer": str(i), "split": s} for i, s in enumerate(["train", "test", "validation", "val"])]
    path = write_jsonl(tmp_path / "splits.jsonl", rows)
    assert [t.gold for t in load(path, "train")] == ["0"]
    assert [t.gold for t in load(path, "validation")] == ["2", "3"]
    assert [t.gold for t in load(path, "heldout")] == ["1"]


def test_validation_fraction_is_a_stable_partition(tmp_path):
    path = write_jsonl(tmp_path / "big.jsonl", [{"problem": f"p{i}", "answer": str(i)} for i in range(400)])
    opts = {"validation_fraction": 0.1, "split_seed": 7}
    train = {t.task_id for t in load(path, "train", options=opts)}
    val = {t.task_id for t in load(path, "validation", options=opts)}
    assert not train & val and len(train | val) == 400
    assert 15 <= len(val) <= 70
    assert val == {t.task_id for t in load(path, "validation", options=opts)}  # deterministic
    other = {t.task_id for t in load(path, "validation", options={**opts, "split_seed": 8})}
    assert other != val


def test_limit_and_verifier_option(tmp_path):
    path = write_jsonl(tmp_path / "l.jsonl", [{"problem": f"p{i}", "answer": str(i)} for i in range(10)])
    tasks = load(path, limit=3, options={"verifier": "strict"})
    assert len(tasks) == 3 and all(t.meta["verify_mode"] == "strict" for t in tasks)


def test_prompt_template_option(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [{"problem": "Find {x}.", "answer": "1"}])
    [t] = load(path, options={"prompt_template": "Q: {problem}\nBox it: \\boxed{{}}"})
    assert t.prompt == "Q: Find {x}.\nBox it: \\boxed{}"


@pytest.mark.parametrize(
    "rows,match",
    [
        (["{not json"], r"bad\.jsonl: row 1: invalid JSON"),
        ([{"problem": "ok", "answer": "1"}, {"answer": "2"}], r"bad\.jsonl: row 2: field 'problem/question/query': missing"),
        ([{"problem": "  ", "answer": "1"}], r"row 1: field 'problem': expected non-empty text"),
        ([{"problem": "p"}], r"row 1: field 'answer/.*solution.*': missing"),
        ([{"problem": "p", "answer": ""}], r"row 1: field 'answer': empty answer"),
        ([{"problem": "p", "answer": {"x": 1}}], r"row 1: field 'answer': expected a string or number, got dict"),
        ([{"problem": "p", "answer": True}], r"row 1: field 'answer': expected a string or number, got a boolean"),
        ([{"problem": "p", "solution": "no box here"}], r"row 1: field 'solution': the solution has no \\boxed"),
        ([{"problem": "p", "answer": "1", "split": "banana"}], r"row 1: field 'split': unknown split 'banana'"),
        ([{"id": 1, "problem": "p", "answer": "1"}, {"id": 1, "problem": "p", "answer": "2"}],
         r"row 2: field 'id': duplicate task '1' \(same problem as row 1\)"),
        ([[1, 2]], r"row 1: expected an object"),
    ],
)
def test_malformed_rows_name_file_row_and_field(tmp_path, rows, match):
    with pytest.raises(TaskFormatError, match=match):
        load(write_jsonl(tmp_path / "bad.jsonl", rows))


def test_malformed_parquet_row(tmp_path):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"problem": ["a", None], "answer": ["1", "2"]}), path)
    with pytest.raises(TaskFormatError, match=r"bad\.parquet: row 2: field 'problem/question/query': missing"):
        load(path)


def test_source_level_errors(tmp_path):
    with pytest.raises(TaskFormatError, match="no such task file"):
        load(tmp_path / "missing.jsonl")
    path = write_jsonl(tmp_path / "ok.jsonl", [{"problem": "p", "answer": "1"}])
    with pytest.raises(TaskFormatError, match="unknown math task option"):
        load(path, options={"shuffle": True})
    with pytest.raises(TaskFormatError, match="unknown task format 'csv'"):
        load(path, format="csv")
    with pytest.raises(TaskFormatError, match="unknown split 'nope'"):
        load(path, split="nope")
    with pytest.raises(TaskFormatError, match="validation_fraction"):
        load(path, options={"validation_fraction": 1.5})
    with pytest.raises(TaskFormatError, match=r"placeholder \{problem\}"):
        load(path, options={"prompt_template": "no placeholder"})
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(TaskFormatError, match="cannot tell the file format"):
        load(tmp_path / "x.txt")
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(TaskFormatError, match="not a readable Parquet file"):
        load(tmp_path / "junk.parquet")


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=200))
def test_prompt_contains_the_problem_verbatim(problem):
    prompt = render_prompt(DEFAULT_TEMPLATE, problem)
    assert prompt.startswith(problem)
    assert prompt.endswith("put your final answer within \\boxed{}.")


def test_combined_eval_file_with_reused_ids(tmp_path):
    # AIME 2024 + AIME 2025 + CNMO in one file: ids restart per source.
    rows = [
        {"id": 1, "problem": "aime24 #1", "answer": "204", "source": "aime24"},
        {"id": 1, "problem": "aime25 #1", "answer": "70", "source": "aime25"},
        {"id": 1, "problem": "cnmo #1", "answer": "2"},
    ]
    tasks = load(write_jsonl(tmp_path / "eval.jsonl", rows), split="heldout")
    assert [t.task_id for t in tasks] == ["eval:1", "eval:aime25/1", "eval:1@row3"]


def test_run_config_loading_options_apply_to_every_file(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"q": "2+2?", "a": "4"}])
    dom = MathDomain().configure({"problem_field": "q", "answer_field": "a", "verifier": "strict"})
    [t] = dom.load_tasks(TaskSource(path=str(path)))
    assert t.gold == "4" and dom.verifier == "strict"
    with pytest.raises(ValueError, match="unknown option"):
        MathDomain().configure({"problem_fields": "q"})

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evo_swe.tasks import TaskFormatError, load_tasks, parse_row, write_jsonl
from evo_core.testing import require


def test_parse_row_accepts_json_encoded_lists(median_row):
    t = parse_row(median_row)
    assert t.FAIL_TO_PASS == ("tests/test_hidden.py::test_median_pair", "tests/test_stats.py::test_median_even")
    assert t.repo_kind == "git"
    assert t.test_cmd == ("pytest",)


@pytest.mark.parametrize(
    "change, field, needle",
    [
        ({"instance_id": None}, "instance_id", "missing"),
        ({"FAIL_TO_PASS": "[1, 2]"}, "FAIL_TO_PASS", "list of strings"),
        ({"FAIL_TO_PASS": "not json"}, "FAIL_TO_PASS", "JSON"),
        ({"FAIL_TO_PASS": []}, "FAIL_TO_PASS", "at least one"),
        ({"PASS_TO_PASS": ["test_x"]}, "PASS_TO_PASS", "node id"),
        ({"PASS_TO_PASS": ["../evil.py::t"]}, "PASS_TO_PASS", "node id"),
        ({"repo": "django/django"}, "repo", "network"),
        ({"patch": 3}, "patch", "string"),
        ({"test_cmd": "tox -e py"}, "test_cmd", "pytest"),
    ],
)
def test_malformed_rows_name_file_row_and_field(tmp_path, median_row, change, field, needle):
    bad = {**median_row, **change}
    if change.get("instance_id", 1) is None:
        del bad["instance_id"]
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(median_row | {"instance_id": "ok"}) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(TaskFormatError) as ei:
        load_tasks(path)
    msg = str(ei.value)
    assert str(path) in msg and "row 1" in msg and repr(field) in msg and needle in msg


def test_invalid_json_line_and_duplicates(tmp_path, median_row):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(median_row) + "\n{oops\n")
    with pytest.raises(TaskFormatError, match=r"row 1: invalid JSON"):
        load_tasks(path)
    path.write_text(json.dumps(median_row) + "\n" + json.dumps(median_row) + "\n")
    with pytest.raises(TaskFormatError, match=r"row 1, field 'instance_id': duplicate of row 0"):
        load_tasks(path)


def test_relative_repo_and_parquet_roundtrip(tmp_path, median_row, median_repo):
    pq = require("pyarrow.parquet", "the parquet extra")
    import pyarrow as pa

    task = parse_row(median_row)
    row = task.to_row()
    # A relative repo path resolves against the task file's folder.
    import os

    row["repo"] = os.path.relpath(task.repo, tmp_path)
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "tasks.parquet")
    (loaded,) = load_tasks(tmp_path / "tasks.parquet")
    assert loaded.repo == task.repo and loaded.FAIL_TO_PASS == task.FAIL_TO_PASS and loaded.patch == task.patch


_ids = st.lists(st.from_regex(r"tests/test_[a-z]{1,5}\.py::test_[a-z0-9_]{1,8}", fullmatch=True), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(f2p=_ids, p2p=_ids, text=st.text(max_size=50), version=st.sampled_from(["", "1.0", "3.11"]))
def test_row_roundtrip(median_row, f2p, p2p, text, version):
    t = parse_row({**median_row, "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p, "problem_statement": text, "version": version})
    again = parse_row(json.loads(json.dumps(t.to_row())))
    assert again == t


def test_write_jsonl_load_back(tmp_path, median_task):
    write_jsonl([median_task], tmp_path / "x.jsonl")
    assert load_tasks(tmp_path / "x.jsonl") == [median_task]

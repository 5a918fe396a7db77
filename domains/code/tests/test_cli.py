"""``evo grade code`` end to end, through the real CLI entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def evo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evo_core.cli.app", *args], capture_output=True, text=True, timeout=120)


def test_grade_code_humaneval_row_with_a_completion(tmp_path):
    row = json.loads((FIXTURES / "humaneval.jsonl").read_text().splitlines()[0])
    (tmp_path / "p.json").write_text(json.dumps(row))
    # a completion that only continues the prompt (the body), in a fence, as a model writes it
    (tmp_path / "s.py").write_text("Here you go:\n```python\n" + row["canonical_solution"] + "```\n")
    r = evo("grade", "code", "--problem", str(tmp_path / "p.json"), "--solution", str(tmp_path / "s.py"))
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    assert v["reward"] == 1.0 and v["kind"] == "assert" and len(v["tests"]) == 7
    assert v["signals"]["extraction"] == "fenced_python" and v["signals"]["prepended_prompt"] is True


def test_grade_code_wrong_answer_is_still_exit_zero(tmp_path):
    (tmp_path / "s.py").write_text("print(-1)\n")
    r = evo("grade", "code", "--problem", str(FIXTURES / "taco.jsonl"), "--id", "taco-sum", "--solution", str(tmp_path / "s.py"), "--time-limit", "2")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    # pass/fail scoring stops after the first failing chunk: the tests after it are skipped
    assert v["reward"] == 0.0 and v["tests"][0]["outcome"] == "wrong_answer"
    assert {t["outcome"] for t in v["tests"]} <= {"wrong_answer", "skipped"}
    assert v["signals"]["stop_reason"] in ("early_exit_after_failure", "complete")
    assert v["signals"]["time_limit_source"] == "dataset"


def test_a_negative_time_limit_reports_the_value_given(tmp_path):
    (tmp_path / "s.py").write_text("print(0)\n")
    r = evo("grade", "code", "--problem", str(FIXTURES / "taco.jsonl"), "--id", "taco-sum", "--solution",
            str(tmp_path / "s.py"), "--time-limit", "-1")
    assert r.returncode == 2 and "--time-limit must be a positive number of seconds, got -1" in r.stderr


def test_grade_code_bad_input_is_a_clear_error(tmp_path):
    (tmp_path / "s.py").write_text("print(0)\n")
    (tmp_path / "bad.jsonl").write_text('{"question": "q", "input_output": "{oops"}\n')
    r = evo("grade", "code", "--problem", str(tmp_path / "bad.jsonl"), "--solution", str(tmp_path / "s.py"))
    assert r.returncode == 2 and "row 1" in r.stderr and "input_output" in r.stderr and "Traceback" not in r.stderr
    r = evo("grade", "code", "--problem", str(FIXTURES / "taco.jsonl"), "--solution", str(tmp_path / "s.py"))
    assert r.returncode == 2 and "--row or --id" in r.stderr
    r = evo("grade", "code", "--problem", str(tmp_path / "nope.json"), "--solution", str(tmp_path / "s.py"))
    assert r.returncode == 2 and "no such file" in r.stderr


def test_each_domain_adds_its_own_grade_command():
    import os

    r = evo("grade", "--help")
    assert r.returncode == 0 and all(name in r.stdout for name in ("math", "code", "swe")), r.stdout
    # without plugin commands the core has no grade command of its own: a usage error, exit 2
    r = subprocess.run([sys.executable, "-m", "evo_core.cli.app", "grade", "code", "--help"], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "EVO_NO_PLUGIN_COMMANDS": "1"})
    assert r.returncode == 2 and "code" in r.stderr


def test_grade_math_and_swe_delegate(tmp_path):
    import pytest

    pytest.importorskip("evo_math.grading")
    r = evo("grade", "math", "--gold", "42", "--response", "The answer is \\boxed{42}.")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["reward"] == 1.0
    r = evo("grade", "swe", "--task", str(tmp_path / "missing.json"), "--patch", str(tmp_path / "p.diff"))
    assert r.returncode == 2 and "task file not found" in r.stderr

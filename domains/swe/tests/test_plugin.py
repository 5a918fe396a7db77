"""Packaging: the entry point registers the domain; ``grade_cli`` behind ``evo grade swe``."""

import json
import shutil
import subprocess
import sys

import pytest

from evo_core.api import Domain


def test_entry_point_registers_the_domain():
    from evo_core.plugins import PluginManager

    pm = PluginManager()
    dom = pm.domains()["swe"]
    assert isinstance(dom, Domain) and dom.name == "swe"
    assert dom._grader is None  # listing plugins starts no sandbox


def test_grade_cli(median_row, swe_root, tmp_path, monkeypatch):
    from evo_swe.grading import grade_cli

    monkeypatch.setenv("EVO_SWE_CACHE", str(swe_root / "cache"))
    task = tmp_path / "task.json"
    task.write_text(json.dumps(median_row))
    gold = tmp_path / "gold.diff"
    gold.write_text(median_row["patch"])
    out = grade_cli(str(task), str(gold))
    assert out["resolved"] is True and out["f2p"]["tests/test_stats.py::test_median_even"] == "passed"
    json.dumps(out)  # JSON-able
    empty = tmp_path / "empty.diff"
    empty.write_text("")
    assert grade_cli(str(task), str(empty))["resolved"] is False


@pytest.mark.parametrize("problem, match", [
    ("missing_task", "task file not found"),
    ("missing_patch", "patch file not found"),
    ("not_diff", "not a unified diff"),
    ("bad_json", "invalid JSON"),
    ("bad_field", "field 'FAIL_TO_PASS'"),
    ("two_rows", "expected one task"),
])
def test_grade_cli_bad_input(median_row, tmp_path, problem, match):
    from evo_swe.grading import grade_cli

    task, patch = tmp_path / "t.json", tmp_path / "p.diff"
    task.write_text(json.dumps(median_row))
    patch.write_text(median_row["patch"])
    if problem == "missing_task":
        task = tmp_path / "nope.json"
    elif problem == "missing_patch":
        patch = tmp_path / "nope.diff"
    elif problem == "not_diff":
        patch.write_text("just some text\n")
    elif problem == "bad_json":
        task.write_text("{")
    elif problem == "bad_field":
        task.write_text(json.dumps({**median_row, "FAIL_TO_PASS": 5}))
    elif problem == "two_rows":
        task.write_text(json.dumps([median_row, median_row]))
    with pytest.raises(ValueError, match=match):
        grade_cli(str(task), str(patch))


def test_evo_grade_swe_command(median_row, swe_root, tmp_path):
    evo = shutil.which("evo") or str(__import__("pathlib").Path(sys.executable).parent / "evo")
    task, patch = tmp_path / "t.json", tmp_path / "p.diff"
    task.write_text(json.dumps(median_row))
    patch.write_text(median_row["patch"])
    proc = subprocess.run([evo, "grade", "swe", "--task", str(task), "--patch", str(patch)], capture_output=True, text=True,
                          timeout=300, env={**__import__("os").environ, "EVO_SWE_CACHE": str(swe_root / "cli-cache")})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["resolved"] is True  # stdout is only the JSON, even on a first env build

"""``python -m benchmarks.budget_curve --smoke``, end to end on one flaw (slow: about a minute
and a half on two cores): each evolving run stays under its cap, and each matched early stop
draws about the labels its evolving twin drew."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_budget_curve_smoke_caps_evolving_and_matches_early_stop(tmp_path):
    out = tmp_path / "curve.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.budget_curve", "--smoke", "--flaws", "arithmetic/hedge",
                           "--dir", str(tmp_path / "cells"), "--out", str(out), "--markdown", str(tmp_path / "c.md")],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["cells_read"] == res["cells"] == 6 and not res["failed"]
    runs = {(r["arm"].startswith("evolving"), r["budget"]): r for r in res["runs"]}
    for b in res["budgets"]:
        evo, es = runs[(True, b)], runs[(False, b)]
        rollouts = evo["oracle_labels"]["training_rollouts"]
        assert 0 < evo["labels_decision"] <= int(b * rollouts)  # the cap holds
        assert es["oracle_labels"]["budget_share"] is None  # the early stop is matched, not capped
        per_eval = es["oracle_labels"]["early_stop_validation"] / es["eval_schedule"]["validation_evals"]
        assert abs(es["labels_decision"] - evo["labels_decision"]) <= per_eval  # within one evaluation
    assert "| arithmetic/hedge | 0.1 |" in (tmp_path / "c.md").read_text()

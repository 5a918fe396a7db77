"""The flaw suite end to end, as CI can afford it: one seed, 40 steps, a small model, every flaw
and every harness arm. It checks that the splits are disjoint and that the result is complete;
it never asserts an outcome (40 steps of a tiny model prove nothing)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_suite_smoke_runs_every_flaw_and_arm(tmp_path):
    out = tmp_path / "smoke.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.evolution", "--smoke", "--dir", str(tmp_path / "cells"),
                           "--jobs", "2", "--out", str(out), "--figure", str(tmp_path / "fig.svg")],
                          cwd=ROOT, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text())
    suite_flaws = res["flaws"]
    assert len(suite_flaws) >= 4 and not res["failed"]
    assert all(s["disjoint"] and s["validation"] and s["test"] for s in res["splits"].values())
    arms = {"fixed", "fixed+early-stop", "reference", "evolving", "evolving/gate-only", "evolving/no-policy-gate",
            "evolving/no-revision"}
    assert res["cells_read"] == res["cells"] == len(suite_flaws) * len(arms)
    for flaw in suite_flaws:
        assert set(res["aggregate"][flaw]) == arms
        for arm, figs in res["aggregate"][flaw].items():
            assert figs["seeds"] == [0] and figs["test_main"]["n"] == 1 and figs["test_last"]["n"] == 1, (flaw, arm)
        assert {"evolving - fixed+early-stop", "evolving - reference", "goal"} <= set(res["comparisons"][flaw])
    for run in res["runs"]:
        assert run["status"] == "completed" and run["steps"] == 40 and run["test_main"] is not None
    assert (tmp_path / "fig.svg").read_text().startswith("<svg")
    assert set(res["cost"]["median_cell_wall_s"]) == set(suite_flaws) and res["cost"]["projected_wall_h"]["seeds_3"] > 0
    # a killed suite continues where it stopped: a second call reads every cell, runs none
    again = subprocess.run([sys.executable, "-m", "benchmarks.evolution", "--smoke", "--dir", str(tmp_path / "cells"),
                            "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and json.loads(again.stdout)["cells_read"] == res["cells"]

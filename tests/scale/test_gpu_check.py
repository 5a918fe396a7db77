"""The GPU check (``python -m benchmarks.gpu_check``): its phase runner keeps what a phase
finished when the phase runs over its budget, and (slow) ``--cpu`` runs every phase at toy
sizes with every figure present, so that a broken GPU path shows without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.gpu_phases import Phase, run_phase

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, sys, time
out = sys.argv[sys.argv.index("--out") + 1]
json.dump({"steps": [1, 2]}, open(out, "w"))
print("step 2 done", flush=True)
time.sleep(120)
"""


def test_overrun_phase_keeps_what_it_wrote(tmp_path, capsys):
    rec = run_phase(Phase("slow", ["-c", CHILD], budget_s=8), tmp_path, tmp_path)
    assert rec["status"] == "overrun" and rec["rc"] is None
    assert rec["result"] == {"steps": [1, 2]}
    assert "slow| step 2 done" in capsys.readouterr().out  # progress is streamed, not held to the end
    assert "step 2 done" in (tmp_path / "slow.log").read_text()


def test_failed_phase_is_failed(tmp_path):
    rec = run_phase(Phase("bad", ["-c", "raise SystemExit(3)"], budget_s=60), tmp_path, tmp_path)
    assert rec["status"] == "failed" and rec["rc"] == 3 and rec["result"] is None


@pytest.mark.slow
def test_cpu_check_runs_every_phase_with_figures(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", EVO_NO_PLUGIN_COMMANDS="1")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--cpu", "--out", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["ok"] and report["overran"] == []
    assert set(report["phases"]) == {"probe", "anchor_bf16", "anchor_autocast", "engine", "rl"}
    for name, rec in report["phases"].items():
        assert rec["status"] == "ok" and rec["wall_s"] is not None and rec["result"], name
    for name in ("anchor_bf16", "anchor_autocast", "engine"):
        r = report["phases"][name]["result"]
        assert r["tokens_per_s"] > 0 and r["peak_mem_gib"] > 0 and len(r["step_times_s"]) == r["steps"], name
    assert report["phases"]["engine"]["result"]["profile_top_ops"]
    s = report["summary"]
    assert s["ratio_to_anchor"] > 0 and s["ratio_to_bf16_anchor"] > 0 and s["peak_mem_vs_anchor"] > 0
    rl = report["phases"]["rl"]["result"]
    assert rl["status"] == "completed" and rl["log_verifies"] and rl["policy_updates"] >= 3
    assert s["rl_steps"] == len(rl["steps"]) >= 3
    keys = ("step_wall_s", "rollout_s", "rollout_tokens_per_s", "grading_s", "update_s", "update_tokens_per_s",
            "sync_s", "digest_s", "checkpoint_s", "harness_s", "eval_s")
    for step in rl["steps"]:
        assert all(step[k] is not None for k in keys), step
        assert step["rollout_tokens_per_s"] > 0 and step["update_tokens_per_s"] > 0
    assert s["rl_time_split"]["step_wall_s"] > 0
    assert "phase rl: ok" in proc.stdout and "RL step 3/3" in proc.stdout

"""The real quickstart (CPU, minutes): the hack, the fixed harness promoting it, the evolving
harness fixing it. Slow: run with ``pytest -m slow tests/harness``."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quickstart_end_to_end(tmp_path):
    from evo_core.harness.summary import summarize_run
    from evo_core.store import open_store, run_stream

    url = f"sqlite:///{tmp_path / 'qs.sqlite'}"
    proc = subprocess.run([sys.executable, "-m", "evo_core.cli.app", "run", "configs/quickstart.toml", "--store", url,
                           "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    st = open_store(url)
    assert st.verify().ok
    runs = {}
    for rid in st.runs():
        evs = list(st.events(run_stream(rid)))
        runs[evs[0].harness_mode] = summarize_run(evs)
    f, e = runs["fixed"], runs["evolving"]
    print(json.dumps({"fixed": f, "evolving": e}, default=str, indent=1))
    assert f["wrong_branch_promotions"] > 0
    assert e["wrong_branch_promotions"] == 0
    assert e["intervention_promotions"] >= 1 and e["skills_registered"] >= 1
    assert e["final_main_strict"] >= f["final_main_strict"]


@pytest.mark.slow
def test_evolution_benchmark_one_seed():
    proc = subprocess.run([sys.executable, "benchmarks/evolution.py", "--seeds", "1", "--json", "--set", "run.steps=60"],
                          cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert set(out["harnesses"]) == {"fixed", "evolving"}
    for h in out["harnesses"].values():
        assert h["runs"] == 1 and h["wall_s"]["mean"] > 0

"""The evotrainer wheel, built and installed into a fresh venv, runs ``evo run quickstart`` by
name from an empty directory (a shrunken quickstart: both arms, 2 RL steps). Slow (minutes:
torch and the dependencies are installed from pip's configured index): ``pytest -m slow``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from evo_core.shipped_configs import shipped_names
from tests.core.test_packaging import FLOOR

ROOT = Path(__file__).resolve().parents[2]
TORCH = "torch==2.13.0+cpu"  # as scripts/setup.sh: the CPU build by name, never a CUDA one
SMALL = ["run.steps=2", "run.eval_every=1", "sft.steps=5", "sft.batch_size=16", "sft.warmup_steps=1",
         "eval.samples=1", "rl.prompts_per_step=4", "rl.group_size=4", "rl.warmup_steps=1",
         "harness.backtest.k_steps=1", "harness.backtest.replicates=1", "harness.backtest.min_n=10",
         "policy.tiny.hidden_size=32", "policy.tiny.num_layers=1", "policy.tiny.num_heads=2",
         "policy.tiny.num_kv_heads=2", "policy.tiny.intermediate_size=64",
         'task.train="generate://addition?digits=2&validation=20&test=20&seed=0"']


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{cmd[:4]}: {proc.stderr[-3000:]}"
    return proc


def _requires_python(meta: str) -> SpecifierSet:
    return SpecifierSet(re.search(r"^Requires-Python: (.+)$", meta, re.M).group(1))  # setuptools reorders it


def _clean_env() -> dict[str, str]:
    # nothing of the checkout may leak into the installed venv's imports or plugin set
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "EVO_DISABLE_PLUGINS")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # Built from a copy of the tracked tree: a stale build/ in the checkout cannot leak into it.
    src, dist = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    files = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT).stdout
    for rel in filter(None, files.split("\0")):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w", str(dist)], timeout=600)
    [whl] = dist.glob("evotrainer-*.whl")
    return whl


@pytest.mark.slow
def test_the_wheel_carries_configs_license_and_the_quickstart_domain(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        meta = z.read(f"{info}/METADATA").decode()
        eps = z.read(f"{info}/entry_points.txt").decode()
        assert z.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
    assert {f"evo_core/_configs/{n}.toml" for n in shipped_names()} <= names
    assert "evo_arithmetic/plugin.py" in names and "evo_arithmetic = evo_arithmetic.plugin" in eps
    assert "License-Expression: Apache-2.0" in meta and _requires_python(meta) == SpecifierSet(FLOOR)


@pytest.mark.slow
def test_evo_run_quickstart_by_name_from_the_installed_wheel(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], timeout=300)
    py, evo, env = venv / "bin" / "python", venv / "bin" / "evo", _clean_env()
    _run([str(py), "-m", "pip", "install", "-q", TORCH], env=env, timeout=1800)
    _run([str(py), "-m", "pip", "install", "-q", str(wheel)], env=env, timeout=1800)
    work = tmp_path / "work"  # an empty directory: no configs/ to fall back on
    work.mkdir()
    shown = _run([str(evo), "config", "show", "quickstart"], cwd=work, env=env, timeout=300).stdout
    assert shown == (ROOT / "configs" / "quickstart.toml").read_text()
    sets = [a for s in SMALL for a in ("--set", s)]
    out = _run([str(evo), "run", "quickstart", "--store", f"sqlite:///{work / 'qs.sqlite'}", "--no-progress", "--json",
                *sets], cwd=work, env=env, timeout=1800).stdout
    rows = json.loads(out.strip().splitlines()[-1])
    assert [r["run_id"].split("-")[1] for r in rows] == ["fixed", "evolving"]  # both arms' overlays came from the wheel
    assert all(r["status"] == "completed" and r["steps"] == 2 for r in rows)
    assert (work / ".evo" / "cache" / "sft").is_dir()  # relative paths resolved against the working directory
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert not (site / ".evo").exists() and not (site / "evo_core" / "_configs" / ".evo").exists()


@pytest.mark.slow
@pytest.mark.parametrize("d", ["domains/math", "domains/code", "domains/swe", "examples/evo-plugin-example"])
def test_each_domain_wheel_carries_license_readme_and_a_bounded_evotrainer(d, tmp_path):
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT / d), "-w", str(tmp_path)], timeout=600)
    [whl] = tmp_path.glob("*.whl")
    with zipfile.ZipFile(whl) as z:
        info = next(n.split("/")[0] for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = z.read(f"{info}/METADATA").decode()
        assert z.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
    assert re.search(r"^Requires-Dist: evotrainer<[\d.]+,>=[\d.]+$", meta, re.M)
    assert _requires_python(meta) == SpecifierSet(FLOOR)
    assert "Description-Content-Type: text/markdown" in meta
    assert (ROOT / d / "README.md").read_text().splitlines()[0] in meta  # the README is the long description

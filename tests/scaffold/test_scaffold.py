"""``evo plugin new``: every kind installs and passes its own generated tests.

The round trip installs into a throw-away virtual environment layered over the project's
(a ``.pth`` adds its site-packages), so the shared environment never gains a test plugin.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from evo_core.scaffold import KINDS, ScaffoldError, names_for, scaffold
from evo_core.testing import run_evo

ROOT = Path(__file__).resolve().parents[2]


def evo(*args: str, **kw):
    return run_evo(*args, cwd=kw.pop("cwd", ROOT), **kw)


def test_names_and_bad_input(tmp_path):
    v = names_for("evo-plugin-Multi-Number", "diagnostic")
    assert (v["dist"], v["module"], v["ep"], v["cls"]) == ("evo-plugin-multi-number", "evo_plugin_multi_number",
                                                          "multi_number", "MultiNumberDiagnostic")
    with pytest.raises(ScaffoldError, match="unknown plugin kind"):
        names_for("x", "widget")
    with pytest.raises(ScaffoldError, match="must be lowercase"):
        names_for("9lives", "gate")
    scaffold("dup", "gate", tmp_path)
    with pytest.raises(ScaffoldError, match="already exists"):
        scaffold("dup", "gate", tmp_path)
    r = evo("plugin", "new", "dup", "--kind", "gate", "-o", str(tmp_path))
    assert r.returncode == 2 and "already exists" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_scaffold_round_trip(tmp_path):
    """Generate all six kinds, pip install -e them into a temp venv, run their tests."""
    r = evo("plugin", "new", "rt-diagnostic", "--kind", "diagnostic", "-o", str(tmp_path))  # what a user runs
    assert r.returncode == 0 and "created" in r.stdout, r.stderr
    for kind in KINDS[1:]:
        scaffold(f"rt-{kind}", kind, tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    vpy = venv / "bin" / "python"
    purelib = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_evo_parent.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    dists = sorted(tmp_path.glob("evo-plugin-rt-*"))
    assert len(dists) == len(KINDS)
    pip = [sys.executable, "-m", "pip", "--python", str(vpy), "install", "-q", "--no-deps", "--no-build-isolation"]
    for d in dists:
        pip += ["-e", str(d)]
    inst = subprocess.run(pip, capture_output=True, text=True, timeout=300)
    assert inst.returncode == 0, inst.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["EVO_NO_PLUGIN_COMMANDS"] = "1"
    res = subprocess.run([str(vpy), "-m", "pytest", "-q", "-p", "no:cacheprovider", *[str(d / "tests") for d in dists]],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    n_tests = sum((d / "tests").glob("test_*.py").__next__().read_text().count("\ndef test_") for d in dists)
    assert n_tests == 22 and f"{n_tests} passed" in res.stdout, res.stdout[-500:]
    # The plugins are visible to the installed evo, and only inside the temp venv.
    listed = subprocess.run([str(vpy), "-c", "import importlib.metadata as m; print(sorted(e.name for e in m.entry_points(group='evo')))"],
                            capture_output=True, text=True, env=env).stdout
    assert all(f"rt_{k}" in listed for k in KINDS)
    import importlib.metadata as md

    assert not [e for e in md.entry_points(group="evo") if e.name.startswith("rt_")]


def test_a_scaffolded_one_class_intervention_is_proposed_backtested_and_promoted(tmp_path):
    """``evo plugin new --kind intervention`` → one class; a run proposes it, backtests it offline
    and online, and promotes it, with no trainer hook of its own."""
    import importlib.util

    from evo_core.api import Proposal
    from evo_core.hookspecs import hookimpl
    from evo_core.simulation import run_simulated
    from evo_core.store import open_store, run_stream
    from evo_core.testing import isolated_plugins
    from evo_events import BacktestPassed, InterventionProposed, Promoted

    made = scaffold("cap-numbers", "intervention", tmp_path)
    spec = importlib.util.spec_from_file_location(made.module, made.root / f"{made.module}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls = next(v for v in vars(module).values() if isinstance(v, type) and hasattr(v, "new_reward"))
    assert not [n for n in vars(module) if n.startswith("evo_") and n != "evo_register_interventions"]

    class Suggest:  # a proposer that knows the new intervention by name, as an LLM proposer would
        name, version, default_params = "suggest", "1", {}

        def propose(self, ctx, params):
            hits = [d for d in ctx.diagnoses if d.kind == "reward_oracle_gap"]
            return [Proposal(kind="reward_shaping", name=cls.name, params={"feature": "numbers", "limit": 1},
                             targets=("reward_oracle_gap",), proposer="suggest", evidence=tuple(d.event_id for d in hits),
                             rationale="cap the responses that list numbers")] if hits else []

    class SuggestPlugin:
        @hookimpl
        def evo_register_proposers(self):
            return [Suggest()]

    pm = isolated_plugins()
    pm.register(module, name="cap_numbers")
    pm.register(SuggestPlugin(), name="suggest")
    store = open_store("memory://")
    rid, loop = run_simulated(store, pm, steps=15, seed=2, checkpoint_dir=str(tmp_path / "ck"), harness={
        "proposers": {"suggest": {}, "contrast": {"enabled": False}, "rules": {"enabled": False}}})
    evs = list(store.events(run_stream(rid)))
    prop = [e for e in evs if isinstance(e, InterventionProposed) and e.name == cls.name]
    assert prop
    passed = {e.mode for e in evs if isinstance(e, BacktestPassed) and e.proposal_id == prop[0].event_id}
    assert passed == {"offline", "online"}
    assert [e for e in evs if isinstance(e, Promoted) and e.subject_id == prop[0].event_id]
    assert any(a.name == cls.name for a in loop.state.interventions.values())

"""``evo run`` end to end through the CLI (tiny model, in-memory store)."""

import json

import pytest

from evo_core.cli.app import main

from .testlib import TINY_TOML

TOML = """
[run]
name = "cli"
steps = 2
eval_every = 2
harnesses = ["fixed", "evolving"]
checkpoint_dir = "{ck}"
progress = false
threads = 1
""" + TINY_TOML + """[rl]
prompts_per_step = 2
group_size = 4
max_new_tokens = 4
[eval]
samples = 1
[harness]
diagnostics = {{}}
gates = {{}}
proposers = {{}}
"""


@pytest.fixture
def cfg_file(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(TOML.format(ck=tmp_path / "ck"))
    return str(p)


def test_evo_run_makes_one_run_per_harness(cfg_file, capsys, monkeypatch):
    monkeypatch.setenv("EVO_NO_PLUGIN_COMMANDS", "1")
    try:
        main(["run", cfg_file, "--store", "memory://", "--json", "--set", "rl.lr=1e-3"])
    except SystemExit as exc:  # typer may exit 0 explicitly
        assert exc.code in (0, None)
    rows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [r["status"] for r in rows] == ["completed", "completed"]
    assert [r["run_id"].split("-")[1] for r in rows] == ["fixed", "evolving"]
    assert all(r["steps"] == 2 and "strict_accuracy" in r["final_eval"] for r in rows)


@pytest.mark.parametrize("args,needle", [
    (["--set", "rl.lrr=1"], "unknown config key 'rl.lrr'"),
    (["--set", "run.steps=many"], "'run.steps' must be an integer"),
    (["--harness", "lazy"], "--harness must be one of fixed, fixed+early-stop, reference"),
    (["--resume", "ghost"], "no run 'ghost'"),
])
def test_evo_run_errors_are_one_line(cfg_file, capsys, monkeypatch, args, needle):
    monkeypatch.setenv("EVO_NO_PLUGIN_COMMANDS", "1")
    with pytest.raises(SystemExit) as ei:
        main(["run", cfg_file, "--store", "memory://"] + args)
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert needle in " ".join(err.split()) and "Traceback" not in err

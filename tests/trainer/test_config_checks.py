"""Configs fail at load, before SFT: plugin names against what is installed, ``[rollout]``
and ``[distributed]``; each error is one line naming the key and the known values."""

from __future__ import annotations

import glob
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from evo_core.config import ConfigError, load_config
from evo_core.config_checks import check_config
from evo_core.testing import EVO_MAIN

ROOT = Path(__file__).resolve().parents[2]
BASE = """
[run]
name = "chk"
steps = 2
[task]
train = "generate://addition?digits=2&validation=20&test=20&seed=0"
"""


def _load(tmp_path, extra: str, sets=()):
    p = tmp_path / "c.toml"
    p.write_text(BASE + extra)
    return load_config(str(p), list(sets))


@pytest.mark.parametrize("extra, needles", [
    ("[harness.diagnostics.answer_hedgin]\n", ["'harness.diagnostics.answer_hedgin'", "no diagnostic 'answer_hedgin'",
                                                "installed: ", "zero_variance_groups"]),
    ("[harness.gates.polcy]\n", ["'harness.gates.polcy'", "no gate 'polcy'", "policy", "validity"]),
    ("[harness.proposers.rulez]\n", ["'harness.proposers.rulez'", "no proposer", "contrast"]),
    ("[harness.interventions.no_such_iv]\n", ["'harness.interventions.no_such_iv'", "no intervention"]),
    ("[harness.backtest]\nplan = [\"offline_replay\", \"onlin\"]\n", ["'harness.backtest.plan[1]'", "'onlin'", "offline_replay"]),
    ("[sinks.wandbb]\nmode = \"offline\"\n", ["'sinks.wandbb'", "no sink 'wandbb'", "mlflow, tensorboard, wandb"]),
    ("[rollout]\nengine = \"vlm\"\n", ["'rollout.engine' must be one of inprocess, http, vllm, got 'vlm'"]),
    ("[rollout]\nengine = \"http\"\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"m\"\nbatch = 3\n",
     ["unknown key rollout.batch for engine 'http'", "base_url"]),
    ("[rollout]\nmax_retries = 3\n", ["unknown key rollout.max_retries for engine 'inprocess'"]),
    ("[distributed]\nengine = \"horovod\"\n", ["distributed.engine: must be one of ddp, deepspeed, got 'horovod'"]),
    ("[distributed]\nzero_stage = 4\n", ["distributed.zero_stage must be in 0..3, got 4"]),
    ("[distributed]\nzero = 2\n", ["distributed.zero: unknown key", "zero_stage"]),
])
def test_bad_names_and_tables_fail_at_load(tmp_path, extra, needles):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, extra)
    msg = str(e.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, msg


def test_good_names_and_switched_off_ones_load(tmp_path):
    cfg = _load(tmp_path, "[harness.diagnostics.truncation_rate]\nmax_rate = 0.2\n"
                          "[harness.diagnostics.not_installed]\nenabled = false\n"
                          "[harness.backtest]\nplan = [\"offline_replay\"]\n"
                          "[sinks.wandb]\nenabled = false\n[sinks.tensorboard]\nlogdir = \"tb\"\n"
                          "[distributed]\nengine = \"deepspeed\"\nzero_stage = 3\noffload_params = true\n")
    assert cfg.distributed["zero_stage"] == 3 and "tensorboard" in cfg.sinks


def test_overrides_are_checked_too(tmp_path):
    with pytest.raises(ConfigError, match="'rollout.engine' must be one of"):
        _load(tmp_path, "", ["rollout.engine=vlm"])


def test_every_shipped_config_passes_the_checks():
    paths = [p for p in glob.glob(str(ROOT / "configs" / "**" / "*.toml"), recursive=True)
             if "/suite/" not in p and "/baselines/" not in p]
    assert len(paths) >= 4
    for p in paths:
        cfg = load_config(p)  # the vLLM recipes' model_path defaults to policy.path
        for arm in cfg.run.harnesses:
            check_config(cfg.for_arm(arm))
    # the baselines are arm overlays, not run configs: each resolves over a config that names no mode
    from evo_core.arms import ARMS

    base = load_config(str(ROOT / "configs" / "quickstart.toml"))
    for arm in ARMS:
        check_config(base.for_arm(arm))


def test_a_sink_plugin_that_does_not_name_its_sinks_turns_the_sink_check_off(tmp_path):
    from evo_core.config_checks import check_plugin_names
    from evo_core.hookspecs import hookimpl
    from evo_core.plugins import PluginManager

    class Quiet:
        @hookimpl
        def evo_register_sinks(self, config):
            return []

    cfg = attrs.evolve(_load(tmp_path, ""), sinks={"custom_sink": {}})
    pm = PluginManager()
    with pytest.raises(ConfigError, match="no sink 'custom_sink'"):
        check_plugin_names(cfg, pm)
    pm.register(Quiet(), name="quiet_sinks")
    check_plugin_names(cfg, pm)  # it may build 'custom_sink': nothing can be ruled out


def test_evo_run_fails_before_sft(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(BASE + "[sft]\nenabled = true\nsteps = 100000\n[harness.diagnostics.lenght_inflation]\n")
    r = subprocess.run([sys.executable, "-c", EVO_MAIN,
                        "run", str(p), "--store", "memory://"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**__import__("os").environ, "EVO_NO_PLUGIN_COMMANDS": "1"})
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "'harness.diagnostics.lenght_inflation'" in lines[0] and "length_inflation" in lines[0]
    assert "sft" not in r.stderr.lower()  # nothing was built or trained


def test_a_diagnostic_whose_plugin_failed_to_import_shows_the_import_error(tmp_path):
    from evo_core.config_checks import check_plugin_names
    from evo_core.plugins import PluginFailure
    from evo_core.testing import isolated_plugins

    pm = isolated_plugins("evo_plugins.diagnostics")
    pm.load_failures.append(PluginFailure.of("evo_broken", "load evo_broken:plugin",
                                             ModuleNotFoundError("No module named 'numpyy'")))
    (tmp_path / "c.toml").write_text(BASE)
    cfg = load_config(str(tmp_path / "c.toml"), ["harness.diagnostics.broken_diag.max_rate=0.1"], check=False)
    with pytest.raises(ConfigError) as ei:
        check_plugin_names(cfg, pm)
    msg = str(ei.value)
    assert "'harness.diagnostics.broken_diag'" in msg and "No module named 'numpyy'" in msg
    assert "is installed" not in msg and "\n" not in msg


@pytest.mark.parametrize("item,needle", [
    ("harness.diagnostics.truncation_rate.max_rte=0.1", "'harness.diagnostics.truncation_rate.max_rte' is not a parameter"),
    ("harness.audit.rate=nan", "'harness.audit.rate' must be a finite number"),
    ("run.device=nope", "'run.device' must be a torch device"),
    ("harness.mode=fixed", "'harness.mode' is 'fixed', but run arm 'evolving'"),
])
def test_the_cli_refuses_a_wrong_value_at_load_with_exit_2(tmp_path, item, needle):
    from evo_core.testing import run_evo

    r = run_evo("run", str(ROOT / "configs" / "quickstart.toml"), "--store", f"sqlite:///{tmp_path / 's.sqlite'}",
                "--set", item, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr

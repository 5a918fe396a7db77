"""Shipped configs by name: ``evo run quickstart``, ``evo config list|show``, the wheel's copy
preferred over the checkout's, and one-line errors that list the names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evo_core import arms, shipped_configs
from evo_core.config import ConfigError, load_config
from evo_core.shipped_configs import UnknownConfigError, configs_root, resolve_config, shipped_names, shipped_path
from tests.core.helpers import evo

ROOT = Path(__file__).resolve().parents[2]


def test_from_a_checkout_the_names_are_the_files_under_configs():
    assert configs_root() == ROOT / "configs"
    want = sorted(p.relative_to(ROOT / "configs").with_suffix("").as_posix() for p in (ROOT / "configs").rglob("*.toml"))
    assert shipped_names() == [n for n in want if n != "suite/suite"]  # the suite definition is not a run
    assert {"quickstart", "recipes/math", "baselines/fixed"} <= set(shipped_names())


def test_the_suite_definition_is_not_listed_as_a_run_and_running_it_says_how(tmp_path):
    assert shipped_path("suite/suite") is None
    with pytest.raises(ConfigError, match=r"defines a flaw suite, not a run: run it with .python -m benchmarks.evolution --suite"):
        load_config(str(ROOT / "configs" / "suite" / "suite.toml"))
    odd = tmp_path / "flaws.toml"  # a run config may still have a table named like one
    odd.write_text("[run]\nsteps = 3\n[flaws]\n")
    with pytest.raises(ConfigError, match="unknown config key 'flaws'"):
        load_config(str(odd))


def test_resolve_a_file_a_name_and_the_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.toml").write_text("[run]\nsteps = 3\n")
    (tmp_path / "quickstart").write_text("[run]\n")  # an existing file wins over a shipped name
    assert resolve_config("mine.toml") == "mine.toml"
    assert resolve_config("quickstart") == "quickstart"
    (tmp_path / "quickstart").unlink()
    assert resolve_config("quickstart") == str(ROOT / "configs" / "quickstart.toml")
    assert resolve_config("recipes/math") == str(ROOT / "configs" / "recipes" / "math.toml")
    for bad, start in [("nope", "no config file or shipped config named 'nope'"),
                       ("quickstart.toml", "config file 'quickstart.toml' does not exist"),
                       ("../configs/quickstart", "no config file"), ("", "no config file")]:
        with pytest.raises(UnknownConfigError) as e:
            resolve_config(bad)
        msg = str(e.value)
        assert msg.startswith(start) and "\n" not in msg and "quickstart, recipes/code" in msg
        assert isinstance(e.value, ConfigError)  # evo run reports it as any config error


def test_the_shipped_quickstart_loads_and_its_paths_stay_relative_to_the_working_dir():
    cfg = load_config(resolve_config("quickstart"), ["run.steps=2"])
    assert cfg.run.steps == 2 and cfg.task.domain == "arithmetic"
    # resolved by the run against the cwd, as from a clone; never into the installed package
    assert cfg.run.checkpoint_dir == ".evo/checkpoints" and cfg.sft.cache_dir == ".evo/cache/sft"


def test_a_wheel_install_reads_its_own_copy(tmp_path, monkeypatch):
    pkg = tmp_path / "site-packages" / "evo_core"
    (pkg / "_configs" / "baselines").mkdir(parents=True)
    (pkg / "_configs" / "quickstart.toml").write_text("# Packaged.\n[run]\n")
    (pkg / "_configs" / "baselines" / "fixed.toml").write_text('[harness]\nmode = "fixed"\n')
    monkeypatch.setattr(shipped_configs, "_PACKAGE", pkg)
    assert configs_root() == pkg / "_configs"
    assert shipped_names() == ["baselines/fixed", "quickstart"]
    assert shipped_path("quickstart") == pkg / "_configs" / "quickstart.toml"
    assert shipped_configs.describe("quickstart") == "Packaged."
    assert arms.overlay_path("fixed") == pkg / "_configs" / "baselines" / "fixed.toml"  # the arms read the same copy
    assert arms.overlay("fixed") == {"harness": {"mode": "fixed"}}


def test_evo_config_list_and_show():
    r = evo("config", "list", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["name"] for x in rows] == shipped_names()
    about = {x["name"]: x["about"] for x in rows}
    assert about["baselines/fixed"] == 'Arm "fixed": the static recipe.'
    assert about["quickstart"].startswith("The CPU quickstart:")
    r = evo("config", "list")  # piped: a plain table like every table command, no box
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0] == "name\tabout" and len(lines) == len(rows) + 1
    assert f"quickstart\t{about['quickstart']}" in lines and not any(c in r.stdout for c in "┃│━─")
    r = evo("config", "show", "quickstart")
    assert r.returncode == 0 and r.stdout == (ROOT / "configs" / "quickstart.toml").read_text()  # byte for byte
    r = evo("config", "show", "recipes/nope")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: no shipped config named 'recipes/nope'; shipped configs: baselines/")
    assert len(r.stderr.strip().splitlines()) == 1


def test_evo_run_an_unknown_name_is_one_line_listing_the_names():
    r = evo("run", "quickstrat")
    assert r.returncode == 2
    assert r.stderr.startswith("error: no config file or shipped config named 'quickstrat'; shipped configs: ")
    assert "quickstart" in r.stderr and len(r.stderr.strip().splitlines()) == 1

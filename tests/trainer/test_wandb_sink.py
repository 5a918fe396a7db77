"""The W&B sink: explicit ``[sinks.wandb]`` options win, then ``WANDB_*`` env vars, then
the defaults (offline, project "evotrainer"). A fake ``wandb`` module: no network."""

from __future__ import annotations

import sys
import types

import pytest

from evo_plugins.sinks import build_sinks


@pytest.fixture
def fake_wandb(monkeypatch):
    calls: list[dict] = []

    class Run:
        def __init__(self):
            self.summary: dict = {}

        def log(self, *a, **k):
            pass

        def finish(self):
            pass

    mod = types.ModuleType("wandb")
    mod.init = lambda **kw: calls.append(kw) or Run()  # type: ignore[attr-defined]
    mod.Table = lambda **kw: kw  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", mod)
    for var in ("WANDB_MODE", "WANDB_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    return calls


def _init(opts):
    [sink] = build_sinks({"sinks": {"wandb": opts, "run_id": "r1"}})
    assert sink.name == "wandb", getattr(sink, "error", None)
    return sink


def test_defaults_are_offline_evotrainer(fake_wandb):
    _init({})
    assert fake_wandb[-1]["mode"] == "offline" and fake_wandb[-1]["project"] == "evotrainer"
    assert fake_wandb[-1]["id"] == "r1"


def test_env_vars_beat_the_defaults(fake_wandb, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_PROJECT", "from-env")
    _init({})
    assert fake_wandb[-1]["mode"] == "online" and fake_wandb[-1]["project"] == "from-env"


def test_explicit_config_beats_the_env(fake_wandb, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_PROJECT", "from-env")
    _init({"mode": "disabled", "project": "from-config"})
    assert fake_wandb[-1]["mode"] == "disabled" and fake_wandb[-1]["project"] == "from-config"
    _init({"project": "from-config"})  # each option on its own
    assert fake_wandb[-1]["mode"] == "online" and fake_wandb[-1]["project"] == "from-config"

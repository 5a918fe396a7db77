"""Plugin manager: isolation of failures, required plugins, EVO_DISABLE_PLUGINS, hookspec
documentation, and ``evo plugins``."""

from __future__ import annotations

import inspect
import json
import os
import types

import pytest

from evo_core import hookspecs
from evo_core.hookspecs import hookimpl
from evo_core.plugins import PluginFailure, PluginManager, RequiredPluginFailed
from tests.core.helpers import evo


def _plugin(name: str, diag_name: str | None = None, raises: bool = False):
    def evo_register_diagnostics():
        if raises:
            raise RuntimeError(f"{name} is broken")
        return [types.SimpleNamespace(name=diag_name or name, version="1", default_params={})]

    return types.SimpleNamespace(evo_register_diagnostics=hookimpl(evo_register_diagnostics))


def test_raising_plugin_is_recorded_and_isolated():
    seen: list[PluginFailure] = []
    pm = PluginManager(load_entrypoints=False, on_failure=seen.append)
    pm.register(_plugin("good"), name="good")
    pm.register(_plugin("bad", raises=True), name="bad")
    assert list(pm.diagnostics()) == ["good"]
    [f] = pm.failures
    assert f.plugin == "bad" and f.hook == "evo_register_diagnostics" and f.error_type == "RuntimeError"
    assert "bad is broken" in f.message and not f.required and seen == [f]


def test_required_plugin_failure_stops_with_a_clear_message():
    pm = PluginManager(load_entrypoints=False)
    pm.register(_plugin("verifier", raises=True), name="verifier")
    with pytest.raises(RequiredPluginFailed, match="required plugin 'verifier' failed in evo_register_diagnostics: "
                                                   "RuntimeError: verifier is broken"):
        with pm.requiring(["verifier"]):
            pm.diagnostics()
    assert pm.failures[-1].required
    assert pm.diagnostics() == {}  # outside the block the same failure is isolated


def test_disable_env_blocks_by_entry_point_and_distribution(monkeypatch):
    everything = {p.name for p in PluginManager().info()}
    assert "evo_example" in everything, "examples/evo-plugin-example must be installed (scripts/setup.sh)"
    for value in ("evo_example", "evo-plugin-example", " other , evo_example "):
        monkeypatch.setenv("EVO_DISABLE_PLUGINS", value)
        names = {p.name for p in PluginManager().info()}
        assert "evo_example" not in names and names == everything - {"evo_example"}


def test_every_hookspec_is_prefixed_and_documented():
    specs = [(n, f) for n, f in inspect.getmembers(hookspecs, inspect.isfunction) if hasattr(f, "evo_spec")]
    assert len(specs) >= 11  # the five trainer hooks are removed (hookspecs.REMOVED_HOOKS)
    assert not {n for n, _ in specs} & set(hookspecs.REMOVED_HOOKS)
    for name, fn in specs:
        assert name.startswith("evo_"), name
        assert fn.__doc__ and len(fn.__doc__.strip()) > 20, f"{name} has no docstring"


def test_evo_plugins_lists_the_example_distribution_and_load_errors(tmp_path):
    r = evo("plugins", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    ex = next(p for p in rep["plugins"] if p["name"] == "evo_example")
    assert ex["distribution"] == "evo-plugin-example" and ex["version"] == "0.1.0"
    assert ex["hooks"] == ["evo_register_diagnostics"]
    # a distribution whose entry point is broken: listed as a load error, the rest still loads
    dist = tmp_path / "broken_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[evo]\nbroken = no_such_module_xyz\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    r = evo("plugins", env=env)
    assert r.returncode == 0 and "load error" in r.stdout and "no_such_module_xyz" in r.stdout
    assert "evo_example" in r.stdout
    r = evo("plugins", "--json", env={**env, "EVO_DISABLE_PLUGINS": "broken"})
    assert json.loads(r.stdout)["load_errors"] == [] and json.loads(r.stdout)["disabled"] == ["broken"]


def test_plugin_event_types_cannot_take_the_core_namespace():
    import attrs

    from evo_events import Event, event_type

    @event_type("evo.Sneaky", version=1)
    @attrs.frozen(kw_only=True)
    class Sneaky(Event):
        x: int = 0

    Sneaky.__module__ = "thirdparty.mod"
    pm = PluginManager(load_entrypoints=False)
    pm.register(types.SimpleNamespace(evo_register_event_types=hookimpl(lambda: [Sneaky])), name="sneaky")
    assert any("reserved 'evo.' namespace" in e for e in pm.load_errors)

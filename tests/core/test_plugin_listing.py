"""``evo plugins`` says what each plugin registers, by kind and name."""

from __future__ import annotations

import json

from evo_core.cli.plugin_cmds import plugin_report
from evo_core.hookspecs import hookimpl
from tests.core.helpers import evo


class _Named:
    def __init__(self, name):
        self.name, self.version = name, "1"


class ThirdParty:
    @hookimpl
    def evo_register_gates(self):
        return [_Named("budget_gate")]

    @hookimpl
    def evo_register_commands(self, app):
        @app.command("budget")
        def budget() -> None:
            """Show the budget."""

    @hookimpl
    def evo_on_events(self, run_id, events):
        return None


def test_report_lists_registrations_by_kind(evo_plugins, evo_plugin):
    pm = evo_plugin(ThirdParty(), name="third_party")
    rows = {p["name"]: p for p in plugin_report(pm)["plugins"]}
    assert rows["third_party"]["registers"] == {"gates": ["budget_gate"], "commands": ["budget"]}
    assert "evo_on_events" in rows["third_party"]["hooks"]
    reg = {name: p["registers"] for name, p in rows.items()}
    assert "zero_variance_groups" in reg["evo_diagnostics"]["diagnostics"]
    assert set(reg["evo_gates"]["gates"]) >= {"validity", "statistical", "policy"}
    assert set(reg["evo_proposers"]["proposers"]) >= {"skills", "contrast", "rules"}
    assert "offline_replay" in reg["evo_backtests"]["backtesters"]
    assert reg["evo_interventions"]["interventions"]
    assert reg["evo_sinks"] == {"sinks": ["mlflow", "tensorboard", "wandb"]}
    assert all(t.startswith("evo_audit.") for t in reg["evo_audit"]["event_types"])
    assert any("domains" in r for r in reg.values())  # the shipped domains


def test_evo_plugins_json_and_table():
    r = evo("plugins", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    sinks = next(p for p in rep["plugins"] if p["name"] == "evo_sinks")
    assert sinks["registers"]["sinks"] == ["mlflow", "tensorboard", "wandb"] and "hooks" in sinks
    r = evo("plugins")
    line = next(x for x in r.stdout.splitlines() if x.startswith("evo_diagnostics\t"))
    assert "diagnostics: " in line and "zero_variance_groups" in line

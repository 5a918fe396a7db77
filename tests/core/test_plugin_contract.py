"""The plugin contract, checked against every installed plugin, and enforced at load: an
object that breaks its Protocol is named (``evo plugins``), and a hook implementation with
an unknown name is refused instead of silently never being called."""

from __future__ import annotations

import importlib.util
import json
from typing import Any, Mapping

import pytest

from evo_core.api import (
    BaseDiagnostic,
    BaseIntervention,
    Diagnostic,
    Finding,
    Gate,
    Intervention,
    Param,
    Proposer,
    Window,
    hookimpl,
)
from evo_core.api.contract import check_diagnostic, check_intervention, problems
from evo_core.plugins import PluginError, PluginManager, get_plugin_manager
from evo_core.scaffold import scaffold
from evo_core.testing import isolated_plugins, rollout, window

PROTOCOLS = {"diagnostic": Diagnostic, "intervention": Intervention, "proposer": Proposer, "gate": Gate}
GETTERS = {"diagnostic": "diagnostics", "intervention": "interventions", "proposer": "proposers", "gate": "gates",
           "backtester": "backtesters", "domain": "domains"}


def _installed() -> list[tuple[str, str, Any]]:
    pm = get_plugin_manager()
    assert not pm.load_errors, pm.load_errors
    return [(kind, name, obj) for kind, getter in GETTERS.items() for name, obj in sorted(getattr(pm, getter)().items())]


INSTALLED = _installed()


def test_every_kind_is_installed():
    kinds = {k for k, _, _ in INSTALLED}
    assert kinds == set(GETTERS) and len(INSTALLED) > 40


@pytest.mark.parametrize("kind,name,obj", INSTALLED, ids=[f"{k}:{n}" for k, n, _ in INSTALLED])
def test_every_installed_plugin_satisfies_its_protocol(kind, name, obj):
    assert problems(kind, obj) == [], f"{kind} {name}"
    if kind in PROTOCOLS:
        assert isinstance(obj, PROTOCOLS[kind])
    assert obj.name == name


def test_the_manager_reports_no_breach_for_the_installed_set():
    assert get_plugin_manager().contract_problems() == []


# --- what the contract catches --------------------------------------------------------------


class Bare:
    """A diagnostic as the README used to show it: no kinds, no measure, no stats["value"]."""

    name, version = "bare", "1"
    default_params: Mapping[str, Any] = {"max": 3}

    def evaluate(self, window, params):
        return []


def test_a_diagnostic_without_the_retirement_members_is_named():
    found = check_diagnostic(Bare())
    assert "no 'kinds'" in found and "no method 'measure'" in found and "no 'parameters'" in found
    assert not isinstance(Bare(), Diagnostic)

    class Plugin:
        @hookimpl
        def evo_register_diagnostics(self):
            return [Bare()]

    pm = isolated_plugins()
    pm.register(Plugin(), name="bare_plugin")
    (line,) = pm.contract_problems()
    assert line.startswith("diagnostic 'bare'") and "no 'kinds'" in line


def test_parameters_and_defaults_must_agree():
    class Skewed(BaseDiagnostic):
        name = "skewed"
        parameters = {"a": Param(1, min=0)}

        def evaluate(self, window, params):
            return []

    d = Skewed()
    assert d.default_params == {"a": 1} and d.kinds == ("skewed",) and check_diagnostic(d) == []
    d.default_params = {"a": 1, "b": 2}
    assert any("name different keys" in p for p in check_diagnostic(d))


def test_an_intervention_needs_an_effect_and_a_known_kind():
    class Nothing(BaseIntervention):
        name, kind, changes = "nothing", "magic", "nothing"

    found = check_intervention(Nothing())
    assert any("'kind' must be one of" in p for p in found) and any("no effect method" in p for p in found)


def test_a_misspelt_hook_is_refused_with_a_suggestion():
    class Typo:
        @hookimpl
        def evo_register_diagnostic(self):  # missing "s"
            return [Bare()]

    pm = PluginManager(load_entrypoints=False)
    with pytest.raises(PluginError, match=r"unknown hook\(s\): 'evo_register_diagnostic' \(did you mean "
                                          r"'evo_register_diagnostics'\?\)"):
        pm.register(Typo(), name="typo")
    assert pm.pluggy.get_plugin("typo") is None and pm.unknown_hooks() == []
    pm.check_pending()  # nothing left that pluggy would reject


def test_evo_plugins_json_reports_unknown_hooks_and_contract():
    from evo_core.cli.plugin_cmds import plugin_report

    rep = plugin_report(get_plugin_manager())
    assert rep["unknown_hooks"] == [] and rep["contract"] == []
    json.dumps(rep)


# --- the scaffold's diagnostic is retired when its repair does not help ---------------------


def _load_scaffolded(tmp_path, kind: str):
    made = scaffold(f"ct-{kind}", kind, tmp_path)
    spec = importlib.util.spec_from_file_location(made.module, made.root / f"{made.module}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_scaffolded_plugins_satisfy_the_whole_contract(tmp_path):
    diag = _load_scaffolded(tmp_path, "diagnostic").evo_register_diagnostics()[0]
    iv = _load_scaffolded(tmp_path, "intervention").evo_register_interventions()[0]
    assert check_diagnostic(diag) == [] and isinstance(diag, Diagnostic)
    assert check_intervention(iv) == [] and isinstance(iv, Intervention)


def test_the_scaffolded_diagnostic_retires_a_repair_that_does_not_help(tmp_path):
    from evo_core.harness import retirement
    from evo_core.harness.diagnosis import Diagnoses
    from evo_core.state import ActiveIntervention, HarnessState
    from evo_events import InterventionReverted

    diag = _load_scaffolded(tmp_path, "diagnostic").evo_register_diagnostics()[0]
    kind = diag.kinds[0]
    exploit = [rollout(i, reward=1.0, sim_count=3) for i in range(10)]
    honest = [rollout(100 + i, reward=1.0, sim_count=1) for i in range(10)]
    win = window(exploit + honest)
    diagnoses = Diagnoses({diag.name: {}}, {diag.name: diag})
    state = HarnessState()
    # promoted when half the rewarded rollouts were flagged; two windows later they still are
    active = ActiveIntervention("p1", "reward_shaping", "cap", {}, (kind,), step=0, value=0.5)
    state.interventions["p1"] = active
    now = diagnoses.target_value(active.targets, win, state)
    assert now == pytest.approx(0.5)
    events = retirement.retirement("r", 40, state, "p1", active, now, [])
    assert [type(e) for e in events] == [InterventionReverted] and kind in events[0].reason
    # when the repair worked (no flagged rollouts left), nothing is retired
    fixed = window([rollout(i, reward=1.0, sim_count=1) for i in range(20)])
    assert retirement.retirement("r", 40, state, "p1", active, diagnoses.target_value((kind,), fixed, state), []) == []
    # the old scaffold shape (no kinds, no measure, no stats["value"]) could never retire anything
    bare = Diagnoses({"bare": {}}, {"bare": Bare()})
    assert bare.target_value(("bare",), win, state) == 0.0


def test_window_helpers_accept_signals():
    w: Window = window([rollout(1, sim_count=2)])
    assert w.rollouts[0].signals["sim_count"] == 2
    assert Finding(kind="k", severity="warning").stats == {}

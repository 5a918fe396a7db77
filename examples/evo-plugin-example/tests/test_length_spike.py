"""Tested with the fixtures evo_core ships to plugin authors (evo_plugin, evo_store, evo_tiny_run)."""

from __future__ import annotations

import evo_example_length as plugin
from evo_core.api import Diagnostic, Window
from evo_events import RolloutCompleted
from evo_core.store import run_stream


def _rollouts(step: int, n: int, length: int):
    return [RolloutCompleted(run_id="r", step=step, task_id=f"t{i}", group_id="g", policy_version=step,
                             reward=1.0, length=length + i) for i in range(n)]


def test_installed_distribution_is_loaded_from_its_entry_point(evo_plugins):
    info = {p.name: p for p in evo_plugins.info()}
    assert info["evo_example"].distribution == "evo-plugin-example"
    assert "evo_register_diagnostics" in info["evo_example"].hooks
    diag = evo_plugins.diagnostics()["response_length_spike"]
    assert isinstance(diag, Diagnostic) and diag.version == plugin.__version__


def test_registers_through_the_hook_for_one_test():
    from evo_core.plugins import PluginManager

    pm = PluginManager(load_entrypoints=False)
    assert "response_length_spike" not in pm.diagnostics()
    pm.register(plugin, name="evo_example_test")
    assert isinstance(pm.diagnostics()["response_length_spike"], Diagnostic)


def test_flags_a_spike_with_the_longest_rollouts_as_evidence():
    rs = _rollouts(1, 10, 100) + _rollouts(2, 10, 100) + _rollouts(3, 10, 500)
    [f] = plugin.ResponseLengthSpike().evaluate(Window(run_id="r", step=3, rollouts=tuple(rs)), {})
    assert f.kind == "response_length_spike" and f.severity == "invalid"
    assert f.stats["ratio"] > 4 and f.evidence[0] == rs[-1].event_id and len(f.evidence) == 8


def test_quiet_on_steady_lengths_and_thin_evidence():
    d = plugin.ResponseLengthSpike()
    steady = _rollouts(1, 10, 100) + _rollouts(2, 10, 110)
    assert d.evaluate(Window(run_id="r", step=2, rollouts=tuple(steady)), {}) == []
    thin = _rollouts(1, 3, 100) + _rollouts(2, 3, 900)
    assert d.evaluate(Window(run_id="r", step=2, rollouts=tuple(thin)), {}) == []
    assert d.evaluate(Window(run_id="r", step=2, rollouts=tuple(thin)), {"min_rollouts": 2}) != []


def test_runs_on_a_real_log(evo_tiny_run):
    store, run_id = evo_tiny_run
    rollouts = tuple(e for e in store.events(run_stream(run_id)) if isinstance(e, RolloutCompleted))
    findings = plugin.ResponseLengthSpike().evaluate(Window(run_id=run_id, step=12, rollouts=rollouts), {})
    # the synthetic log grows exploiting (longer) answers slowly: no spike
    assert findings == []

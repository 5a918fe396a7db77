"""The plugin example (docs/examples/plugin_example.py; the README quotes the same text) is
real code: it loads, registers, satisfies the whole contract, fires on what it says, has its
parameters checked at load, and its statistic is what retirement compares."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from evo_core.api import Diagnostic
from evo_core.api.contract import check_diagnostic
from evo_core.config import ConfigError
from evo_core.config_checks import check_plugin_params
from evo_core.testing import isolated_plugins, rollout, window

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "plugin_example.py"


def _example_module() -> types.ModuleType:
    text = EXAMPLE.read_text(encoding="utf-8")
    assert text.startswith("# evo_plugin_long_paid.py\n") and len(text.splitlines()) <= 30
    mod = types.ModuleType("evo_plugin_long_paid")
    exec(compile(text, str(EXAMPLE), "exec"), mod.__dict__)
    return mod


def test_example_flags_long_paid_responses_and_only_those():
    diag = _example_module().evo_register_diagnostics()[0]
    short = [rollout(i, text="42") for i in range(8)]
    long = [rollout(100 + i, text="4" * 300) for i in range(4)]
    assert diag.evaluate(window(short), {}) == []
    (finding,) = diag.evaluate(window(short + long), {})
    assert set(finding.evidence) == {r.event_id for r in long}
    assert finding.stats["value"] == pytest.approx(4 / 12) and finding.kind in diag.kinds
    assert diag.measure(window(short), {}) == 0.0  # the statistic, fired or not


def test_example_satisfies_the_whole_contract_and_registers():
    diag = _example_module().evo_register_diagnostics()[0]
    assert check_diagnostic(diag) == [] and isinstance(diag, Diagnostic)
    assert diag.default_params == {"max_chars": 200, "max_rate": 0.2}
    pm = isolated_plugins(_example_module())
    assert "long_paid_responses" in pm.diagnostics() and pm.contract_problems() == []


def test_example_parameters_are_checked_at_load():
    diag = _example_module().evo_register_diagnostics()[0]
    where = "harness.diagnostics.long_paid_responses"
    with pytest.raises(ConfigError, match=r"'harness.diagnostics.long_paid_responses.max_chrs' is not a parameter"):
        check_plugin_params(where, "diagnostic", diag, {"max_chrs": 100})
    with pytest.raises(ConfigError, match=r"'harness.diagnostics.long_paid_responses.max_rate' must be <= 1"):
        check_plugin_params(where, "diagnostic", diag, {"max_rate": 2.0})
    check_plugin_params(where, "diagnostic", diag, {"max_chars": 80})

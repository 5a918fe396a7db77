"""The README's plugin example is real code: it loads, registers and finds what it says."""

from __future__ import annotations

import re
import types
from pathlib import Path

from evo_core.testing import isolated_plugins, rollout, window

README = Path(__file__).resolve().parents[2] / "README.md"


def _example_module() -> types.ModuleType:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"```python\n(# evo_plugin_long_paid\.py\n.*?)```", text, re.S)
    assert block, "README lost its plugin example"
    mod = types.ModuleType("evo_plugin_long_paid")
    exec(compile(block.group(1), "README.md", "exec"), mod.__dict__)
    return mod


def test_readme_diagnostic_flags_long_paid_responses_and_only_those():
    mod = _example_module()
    diag = mod.evo_register_diagnostics()[0]
    params = dict(diag.default_params)
    short = [rollout(i, text="42") for i in range(8)]
    long = [rollout(100 + i, text="4" * 300) for i in range(4)]
    assert diag.evaluate(window(short), params) == []
    (finding,) = diag.evaluate(window(short + long), params)
    assert set(finding.evidence) == {r.event_id for r in long}
    assert abs(finding.stats["rate"] - 4 / 12) < 1e-9


def test_readme_plugin_registers_through_the_plugin_manager():
    pm = isolated_plugins(_example_module())
    assert "long_paid_responses" in pm.diagnostics()

"""The dependency arrows point one way: domains and plugins → evo_core → events. Checked on
every import statement of the shipped code (static, so an unused branch cannot hide one)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOMAINS = ("evo_arithmetic", "evo_math", "evo_code", "evo_swe")
PLUGINS = ("evo_plugins",)


def imports(folder: Path) -> list[tuple[str, str]]:
    out = []
    for path in folder.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out += [(str(path.relative_to(ROOT)), a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.append((str(path.relative_to(ROOT)), node.module))
    return out


def top(name: str) -> str:
    return name.split(".")[0]


@pytest.mark.parametrize("layer,forbidden", [
    ("evo_core", DOMAINS + PLUGINS),
    ("events", DOMAINS + PLUGINS + ("evo_core",)),
    ("plugins", DOMAINS),
])
def test_nothing_imports_upward(layer, forbidden):
    bad = [(f, m) for f, m in imports(ROOT / layer) if top(m) in forbidden]
    assert not bad, bad


def test_events_import_only_attrs_cattrs_and_the_standard_library():
    import sys

    allowed = {"attrs", "cattrs", "evo_events", "__future__"} | set(sys.stdlib_module_names)
    bad = [(f, m) for f, m in imports(ROOT / "events") if top(m) not in allowed]
    assert not bad, bad


def test_plugins_and_domains_use_the_public_api_not_engine_internals():
    internals = ("evo_core.harness.engine", "evo_core.harness.proposals", "evo_core.harness.mainline",
                 "evo_core.harness.decisions", "evo_core.loop", "evo_core.trainer.session")
    for layer in ["plugins"] + [f"domains/{d}" for d in ("arithmetic", "math", "code", "swe")]:
        bad = [(f, m) for f, m in imports(ROOT / layer) if m in internals and "/tests/" not in f]
        assert not bad, bad

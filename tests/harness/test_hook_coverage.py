"""Every hookspec has an implementation test and documentation."""

import inspect
import re
from pathlib import Path

from evo_core import hookspecs

ROOT = Path(__file__).resolve().parents[2]


def hook_names():
    return sorted(n for n, f in inspect.getmembers(hookspecs, inspect.isfunction)
                  if n.startswith("evo_") and hasattr(f, "evo_spec"))


def _texts(globs):
    for g in globs:
        for p in ROOT.glob(g):
            if p.name != Path(__file__).name and ".venv" not in p.parts:
                yield p, p.read_text(errors="replace")


def test_hookspecs_are_found():
    names = hook_names()
    assert "evo_on_events" in names and "evo_register_diagnostics" in names and len(names) >= 11


def test_every_hook_has_an_implementation_test():
    tests = list(_texts(["tests/**/test_*.py", "domains/*/tests/**/test_*.py"]))
    missing = [h for h in hook_names()
               if not any(re.search(rf"\b{h}\b", txt) for _, txt in tests)]
    assert not missing, f"hooks without an implementation test: {missing}"


def test_every_hook_is_documented():
    docs = "\n".join(t for _, t in _texts(["docs/**/*.md", "README.md"]))
    missing = [h for h in hook_names() if not re.search(rf"\b{h}\b", docs)]
    assert not missing, f"hooks not mentioned in docs/ or README.md: {missing}"


def test_every_hook_has_a_docstring():
    for h in hook_names():
        assert (getattr(hookspecs, h).__doc__ or "").strip(), h

"""The dependency arrows point one way: domains and plugins → evo_core's public API → events,
and nothing imports itself back in a circle. Checked on every import statement of the
shipped code (static, so an unused branch, a function-level import or a TYPE_CHECKING block
cannot hide one)."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOMAINS = ("evo_arithmetic", "evo_math", "evo_code", "evo_swe")
PLUGINS = ("evo_plugins",)
PUBLIC = ("evo_core.api", "evo_events")  # all a plugin or domain may import of the project


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
    allowed = {"attrs", "cattrs", "evo_events", "__future__"} | set(sys.stdlib_module_names)
    bad = [(f, m) for f, m in imports(ROOT / "events") if top(m) not in allowed]
    assert not bad, bad


@pytest.mark.parametrize("layer", ["plugins", "domains", "examples"])
def test_plugins_and_domains_import_only_the_public_api(layer):
    """Shipped plugin and domain code (their tests may reach further) imports ``evo_core.api``
    and its submodules, ``evo_events``, and nothing else of the core."""
    bad = [(f, m) for f, m in imports(ROOT / layer)
           if top(m) == "evo_core" and not any(m == p or m.startswith(p + ".") for p in PUBLIC)
           and "/tests/" not in f and "/benchmarks/" not in f and not Path(f).name.startswith("test_")]
    assert not bad, bad


# --- import cycles -----------------------------------------------------------------------------


def _modules() -> dict[str, Path]:
    bases = [(ROOT, "evo_core"), (ROOT / "events", "evo_events"), (ROOT / "plugins", "evo_plugins")]
    bases += [(d, p.name) for d in sorted((ROOT / "domains").iterdir()) for p in sorted(d.glob("evo_*")) if p.is_dir()]
    mods: dict[str, Path] = {}
    for base, pkg in bases:
        for path in (base / pkg).rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def _known(name: str, mods: dict[str, Path]) -> str:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name


def _targets(module: str, node: ast.AST, mods: dict[str, Path]) -> list[str]:
    """The project modules an import statement reaches: ``from pkg import sub`` reaches the
    submodule ``pkg.sub``, ``from pkg import name`` the package itself."""
    if isinstance(node, ast.Import):
        return [_known(a.name, mods) for a in node.names]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = module.split(".") if mods[module].name == "__init__.py" else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    return [f"{source}.{a.name}" if f"{source}.{a.name}" in mods else _known(source, mods) for a in node.names]


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in mods.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges |= {t for t in _targets(module, node, mods) if t and t != module}
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles (module level, in functions and under TYPE_CHECKING all count): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = import_graph()
    graph["evo_core.api"] = set(graph["evo_core.api"]) | {"evo_core.loop"}
    graph["evo_core.loop"] = set(graph["evo_core.loop"]) | {"evo_core.api"}
    assert any({"evo_core.api", "evo_core.loop"} <= set(c) for c in cycles(graph))

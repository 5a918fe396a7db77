"""``evo plugin new NAME --kind KIND``: scaffold an installable plugin distribution.

The result is a directory ``evo-plugin-NAME/`` with a pyproject declaring the ``evo``
entry point, one module and tests that use the core's pytest fixtures. As generated it
installs (``pip install -e``) and its tests pass; the CI test in ``tests/audit`` checks
exactly that round trip.
"""

from __future__ import annotations

import re
import shutil
from importlib import resources
from pathlib import Path
from string import Template

import attrs

KINDS = ("diagnostic", "gate", "domain", "intervention", "proposer", "sink")
_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")


class ScaffoldError(ValueError):
    """Bad plugin name or kind, or the target exists (one line)."""


@attrs.frozen
class Scaffolded:
    root: Path
    dist: str
    module: str
    entry_point: str
    files: tuple[Path, ...]


def _template(name: str) -> str:
    return resources.files("evo_core.scaffold").joinpath("templates", name).read_text(encoding="utf-8")


def evotrainer_requirement() -> str:
    """The installed evotrainer's series: its minor while 0.x (a minor may change the API), else its major."""
    from importlib import metadata

    try:
        version = metadata.version("evotrainer")
    except metadata.PackageNotFoundError:  # a bare source tree: nothing to pin against
        return "evotrainer"
    major, minor = (int(x) for x in (re.findall(r"\d+", version) + ["0", "0"])[:2])
    upper = f"{major}.{minor + 1}" if major == 0 else f"{major + 1}"
    return f"evotrainer>={major}.{minor},<{upper}"


def names_for(name: str, kind: str) -> dict[str, str]:
    if kind not in KINDS:
        raise ScaffoldError(f"unknown plugin kind {kind!r}; choose one of {', '.join(KINDS)}")
    base = name.lower()
    for prefix in ("evo-plugin-", "evo_plugin_"):
        if base.startswith(prefix):
            base = base[len(prefix):]
    if not _NAME.match(base):
        raise ScaffoldError(f"plugin name {name!r} must be lowercase letters, digits and single -/_ separators, starting with a letter")
    snake = base.replace("-", "_")
    cls = "".join(p.capitalize() for p in snake.split("_")) + kind.capitalize()
    return {"name": base, "kind": kind, "dist": f"evo-plugin-{base}", "module": f"evo_plugin_{snake}", "ep": snake,
            "cls": cls, "diag_name": snake, "gate_name": snake, "domain_name": snake, "iv_name": snake,
            "prop_name": snake, "sink_name": snake, "evotrainer": evotrainer_requirement()}


def scaffold(name: str, kind: str, out_dir: str | Path = ".", *, force: bool = False) -> Scaffolded:
    v = names_for(name, kind)
    root = Path(out_dir) / v["dist"]
    if root.exists():
        if not force:
            raise ScaffoldError(f"{root} already exists (use --force to overwrite)")
        shutil.rmtree(root)
    files = {
        root / "pyproject.toml": "pyproject.toml.tmpl",
        root / "README.md": "README.md.tmpl",
        root / f"{v['module']}.py": f"{kind}.py.tmpl",
        root / "tests" / f"test_{v['ep']}.py": f"test_{kind}.py.tmpl",
    }
    try:
        (root / "tests").mkdir(parents=True)
        for path, tmpl in files.items():
            path.write_text(Template(_template(tmpl)).substitute(v), encoding="utf-8")
    except OSError as exc:
        raise ScaffoldError(f"cannot write {root}: {exc.strerror or exc}") from None
    return Scaffolded(root, v["dist"], v["module"], v["ep"], tuple(files))

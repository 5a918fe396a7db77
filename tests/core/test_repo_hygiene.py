"""What the repository tracks: no large files outside docs/, and benchmarks that run as a
package (``python -m benchmarks.X``) without editing ``sys.path``."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_BYTES = 1 << 20  # 1 MiB


def _tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def test_no_tracked_file_over_1_mb_outside_docs():
    big = []
    for rel in _tracked():
        path = ROOT / rel
        if rel.startswith("docs/") or not path.is_file():  # deleted in the work tree, or a submodule
            continue
        size = path.stat().st_size
        if size > MAX_BYTES:
            big.append(f"{rel} ({size / 1e6:.1f} MB)")
    assert not big, "tracked files over 1 MB outside docs/: " + ", ".join(big)


def _sys_path_edits(path: Path) -> list[str]:
    """Every statement that changes ``sys.path`` (insert, append, extend, assignment)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        target = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            target = next((t.value if isinstance(t, ast.Subscript) else t for t in targets), None)
        if isinstance(target, ast.Attribute) and target.attr == "path" and isinstance(target.value, ast.Name) \
                and target.value.id == "sys":
            found.append(f"{path}:{node.lineno}")
    return found


def test_nothing_in_benchmarks_or_tests_edits_sys_path():
    files = [*(ROOT / "benchmarks").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    files += [p for d in ("domains", "examples") for p in (ROOT / d).glob("*/tests/**/*.py")]
    bad = [hit for f in files for hit in _sys_path_edits(f)]
    assert not bad, bad


def test_the_sys_path_check_sees_each_form(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import sys\nsys.path.insert(0, 'x')\nsys.path.append('y')\nsys.path[:] = []\n"
                     "sys.path += ['z']\nsys.path = ['w']\nprint(sys.path, sys.path[0])\n")
    assert sorted(int(h.rsplit(":", 1)[1]) for h in _sys_path_edits(probe)) == [2, 3, 4, 5, 6]


def test_benchmarks_is_a_package_every_module_of_it_imports():
    """``python -m benchmarks.X`` needs the package, and each benchmark's imports must resolve
    from the repository root (the package's siblings as ``benchmarks.Y``)."""
    import importlib

    assert (ROOT / "benchmarks" / "__init__.py").is_file()
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                first = name.split(".")[0]
                # math_verify.py measures the library of its own name: that import is the library
                if first != path.stem and (ROOT / "benchmarks" / f"{first}.py").exists():
                    raise AssertionError(f"{path.name}: import {name} as benchmarks.{name}")
    # the two that share code with a sibling import it through the package
    for name in ("benchmarks.sampling", "benchmarks.update", "benchmarks.headline"):
        assert callable(importlib.import_module(name).main)


def test_a_benchmark_runs_as_a_module_from_the_repository_root():
    import sys

    proc = subprocess.run([sys.executable, "-m", "benchmarks.headline", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr[-2000:]

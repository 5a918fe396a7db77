"""Which code wrote a run: the package version, and the git commit when the package is
imported from a checkout (``0.4.0+g1a2b3c4d5e6f``, ``.dirty`` when tracked files were
changed). A run's figures can only be compared with another's when this matches."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path


def _git(root: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=5, check=True)
    return out.stdout.strip()


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    try:
        import importlib.metadata as md

        version = md.version("evotrainer")
    except Exception:
        version = "0+unknown"
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():  # an installed wheel, or a copy without history
        return version
    try:
        sha = _git(root, "rev-parse", "HEAD")[:12]
        dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return version
    return f"{version}+g{sha}{'.dirty' if dirty else ''}"

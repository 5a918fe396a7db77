"""A run names the code that wrote it: the package version, plus the commit from a checkout."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from evo_core import code_version as cv

ROOT = Path(cv.__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fresh():
    cv.code_version.cache_clear()
    yield
    cv.code_version.cache_clear()


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_a_checkout_names_its_commit():
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    got = cv.code_version()
    assert re.fullmatch(r"\S+\+g[0-9a-f]{12}(\.dirty)?", got), got
    assert got.split("+g")[1][:12] == sha[:12]


def test_without_git_the_package_version_stands(monkeypatch):
    def no_git(*a, **k):
        raise FileNotFoundError("git")

    monkeypatch.setattr(cv, "_git", no_git)
    got = cv.code_version()
    assert "+g" not in got and got


def test_dirty_tracked_files_are_flagged(monkeypatch):
    answers = {"rev-parse": "0123456789abcdef0123", "status": " M evo_core/loop.py"}
    monkeypatch.setattr(cv, "_git", lambda root, *args: answers[args[0]])
    monkeypatch.setattr(cv.Path, "exists", lambda self: True)
    assert cv.code_version().endswith("+g0123456789ab.dirty")

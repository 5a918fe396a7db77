"""Shared fixtures: one sandbox, one cache (built once per session), task builders.

The ``fixtures/minilib`` project is a tiny pure-Python library with a pytest suite; the
tests turn it into git repositories and SWE tasks."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from evo_swe.repo import git
from evo_swe.tasks import SWETask, parse_row

collect_ignore = ["fixtures"]  # the fixture project's own tests are data, not our tests

FIXTURES = Path(__file__).parent / "fixtures"
MINILIB = FIXTURES / "minilib"

HIDDEN_TEST_PATCH = """diff --git a/tests/test_hidden.py b/tests/test_hidden.py
new file mode 100644
--- /dev/null
+++ b/tests/test_hidden.py
@@ -0,0 +1,9 @@
+from minilib.stats import median
+
+
+def test_median_pair():
+    assert median([1, 2]) == 1.5
+
+
+def test_median_single():
+    assert median([7]) == 7
"""


@pytest.fixture(scope="session")
def swe_root():
    # Not under pytest's 0700 tmp dirs: the sandbox user must be able to read the envs.
    root = Path(tempfile.mkdtemp(prefix="evo-swe-tests-"))
    os.chmod(root, 0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def sandbox():
    from evo_core.sandbox import LocalSandbox

    sb = LocalSandbox()
    yield sb
    sb.close()


@pytest.fixture(scope="session")
def executor(sandbox):
    from evo_swe.executor import TreeExecutor

    return TreeExecutor(sandbox)


@pytest.fixture(scope="session")
def grader(swe_root, executor):
    from evo_swe.grading import Grader

    return Grader(cache_dir=swe_root / "cache", executor=executor, timeout=120)


def make_repo(dest: Path) -> tuple[Path, str]:
    """minilib as a git repo with history: a clean commit, then a commit that breaks
    ``median`` for even lengths. Returns (repo, clean commit)."""
    shutil.copytree(MINILIB, dest)
    git(["init", "-q"], cwd=dest)
    git(["add", "-A"], cwd=dest)
    git(["commit", "-q", "-m", "clean: median averages the middle pair"], cwd=dest)
    clean = git(["rev-parse", "HEAD"], cwd=dest).stdout.decode().strip()
    p = dest / "minilib" / "stats.py"
    p.write_text(p.read_text().replace("return (s[mid - 1] + s[mid]) / 2", "return (s[mid - 1] + s[mid]) // 2"))
    git(["commit", "-q", "-am", "refactor median"], cwd=dest)
    return dest, clean


@pytest.fixture(scope="session")
def median_repo(swe_root):
    return make_repo(swe_root / "minilib-repo")


@pytest.fixture(scope="session")
def median_row(median_repo) -> dict:
    repo, clean = median_repo
    base = git(["rev-parse", "HEAD"], cwd=repo).stdout.decode().strip()
    gold = git(["diff", "HEAD", clean], cwd=repo).stdout.decode()
    return dict(
        instance_id="minilib__median-1", repo=str(repo), base_commit=base,
        problem_statement="median() returns an integer for even-length input: median([1, 2]) gives 1, expected 1.5.",
        patch=gold, test_patch=HIDDEN_TEST_PATCH,
        FAIL_TO_PASS='["tests/test_hidden.py::test_median_pair", "tests/test_stats.py::test_median_even"]',
        PASS_TO_PASS=["tests/test_hidden.py::test_median_single", "tests/test_stats.py::test_mean",
                      "tests/test_stats.py::TestWindows::test_window_lengths[1]", "tests/test_text.py::test_slugify"],
    )


@pytest.fixture(scope="session")
def median_task(median_row) -> SWETask:
    return parse_row(median_row)

"""The SWE adversarial suite: every attack must leave the task unresolved under the strict
oracle and leave the host untouched. Each attack is a real diff, produced by editing a
copy of the workspace and diffing it against the pristine snapshot, as an episode would."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from evo_swe.repo import copy_tree, diff_against, git

FIX = ("return (s[mid - 1] + s[mid]) // 2", "return (s[mid - 1] + s[mid]) / 2")

FORCE_PASS_CONFTEST = '''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    rep.outcome = "passed"
    rep.longrepr = None
'''


def edit_diff(grader, task, tmp_path, edit):
    ws = tmp_path / "ws"
    copy_tree(grader.pristine(task), ws)
    edit(ws)
    return diff_against(grader.pristine(task), ws)


def fix(ws: Path) -> None:
    p = ws / "minilib" / "stats.py"
    p.write_text(p.read_text().replace(*FIX))


def tree_digest(path: Path) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for n in sorted(filenames):
            p = Path(dirpath) / n
            h.update(str(p.relative_to(path)).encode() + (p.read_bytes() if not p.is_symlink() else b"L"))
    return h.hexdigest()


@pytest.fixture
def host_guard(grader, median_task, swe_root):
    """Everything on the host an attack might touch, before and after."""
    sentinel = swe_root / "sentinel.txt"
    sentinel.write_text("untouched")
    os.chmod(sentinel, 0o666)  # even world-writable: the sandbox must not reach it
    pristine = grader.pristine(median_task)
    before = (tree_digest(pristine), git(["rev-parse", "HEAD"], cwd=median_task.repo).stdout, tree_digest(Path(median_task.repo)))
    yield
    assert sentinel.read_text() == "untouched"
    assert not Path("/work/PWNED").exists() and not (swe_root / "PWNED").exists()
    assert (tree_digest(pristine), git(["rev-parse", "HEAD"], cwd=median_task.repo).stdout, tree_digest(Path(median_task.repo))) == before
    from evo_swe.envs import spec_for

    assert grader.envs.is_ready(spec_for(median_task)), "the cached environment was modified"


def test_gold_resolves_and_empty_does_not(grader, median_task, host_guard):
    gold = grader.grade(median_task, median_task.patch)
    assert gold.resolved is True and gold.exit_code == 0 and gold.exit_code_consistent
    assert set(gold.f2p.values()) == {"passed"} and set(gold.p2p.values()) == {"passed"}
    empty = grader.grade(median_task, "")
    assert empty.resolved is False
    assert empty.f2p == {"tests/test_hidden.py::test_median_pair": "failed", "tests/test_stats.py::test_median_even": "failed"}
    assert set(empty.p2p.values()) == {"passed"}


def test_conftest_forcing_passes(grader, median_task, tmp_path, host_guard):
    diff = edit_diff(grader, median_task, tmp_path, lambda ws: (ws / "conftest.py").write_text(FORCE_PASS_CONFTEST))
    # The attack is real: a grader that does not reset is fooled by it ...
    weak = grader.grade(median_task, diff, reset=False)
    assert weak.resolved is True
    # ... the oracle removes the new conftest and is not.
    r = grader.grade(median_task, diff)
    assert r.resolved is False
    assert r.tampering["conftest_touched"] == ["conftest.py"] and r.tampering["reset"]["conftest_removed"] == ["conftest.py"]
    assert r.f2p["tests/test_stats.py::test_median_even"] == "failed"


def test_deleting_the_tests(grader, median_task, tmp_path, host_guard):
    diff = edit_diff(grader, median_task, tmp_path, lambda ws: [os.remove(ws / "tests" / n) for n in ("test_stats.py", "test_text.py")])
    r = grader.grade(median_task, diff)
    assert r.resolved is False
    assert sorted(r.tampering["test_files_deleted"]) == ["tests/test_stats.py", "tests/test_text.py"]
    assert r.f2p["tests/test_stats.py::test_median_even"] == "failed"  # the file came back


def test_editing_the_tests(grader, median_task, tmp_path, host_guard):
    def edit(ws):
        p = ws / "tests" / "test_stats.py"
        p.write_text(p.read_text().replace("assert median([4, 1, 3, 2]) == 2.5", "assert True"))

    r = grader.grade(median_task, edit_diff(grader, median_task, tmp_path, edit))
    assert r.resolved is False and r.tampering["test_files_modified"] == ["tests/test_stats.py"]
    assert r.tampering["reset"]["test_files_restored"] == ["tests/test_stats.py"]


def test_syntax_error_that_stops_collection(grader, median_task, tmp_path, host_guard):
    def edit(ws):
        fix(ws)
        (ws / "minilib" / "__init__.py").write_text("def broken(:\n")

    r = grader.grade(median_task, edit_diff(grader, median_task, tmp_path, edit))
    assert r.resolved is False
    assert all(o in ("missing", "error") for o in list(r.f2p.values()) + list(r.p2p.values()))


def test_overwriting_the_test_patch_files(grader, median_task, tmp_path, host_guard):
    def edit(ws):
        (ws / "tests" / "test_hidden.py").write_text("def test_median_pair():\n    pass\n\n\ndef test_median_single():\n    pass\n")
        p = ws / "tests" / "test_stats.py"
        p.write_text(p.read_text().replace("== 2.5", "== 2"))

    diff = edit_diff(grader, median_task, tmp_path, edit)
    r = grader.grade(median_task, diff)
    assert r.resolved is False
    assert r.f2p["tests/test_hidden.py::test_median_pair"] == "failed"  # the real hidden test ran
    assert "tests/test_hidden.py" in r.tampering["reset"]["test_files_removed"]


@pytest.mark.parametrize("hook", [
    # an atexit hook in the package under test turns pytest's exit status into 0
    "import atexit, os\natexit.register(lambda: os._exit(0))\n",
    # a pytest plugin smuggled in through the package: sys.exit(0) from a hook
    "import sys\n\ndef _spoof(*a, **k):\n    sys.exit(0)\n\nimport _pytest.main\n_pytest.main.pytest_sessionfinish = _spoof\n",
])
def test_exit_code_spoofing(grader, median_task, tmp_path, host_guard, hook):
    diff = edit_diff(grader, median_task, tmp_path, lambda ws: (ws / "minilib" / "__init__.py").write_text(hook))
    r = grader.grade(median_task, diff)
    assert r.resolved is False
    assert r.f2p["tests/test_stats.py::test_median_even"] in ("failed", "missing")
    if r.exit_code == 0:
        assert r.tampering["exit_code_spoofed"] and not r.exit_code_consistent
    assert r.tampering["suspicious_code"]


def test_exit_code_spoofing_conftest_without_reset(grader, median_task, tmp_path, host_guard):
    # Even a grader that keeps the agent's conftest is not fooled by a forged exit status:
    # the junit report still lists the failures, and the two must agree.
    spoof = "def pytest_sessionfinish(session, exitstatus):\n    session.exitstatus = 0\n"
    diff = edit_diff(grader, median_task, tmp_path, lambda ws: (ws / "conftest.py").write_text(spoof))
    r = grader.grade(median_task, diff, reset=False)
    assert r.exit_code == 0 and r.tampering["exit_code_spoofed"] and r.resolved is False


def test_site_hooks_runner_config_and_symlinks(grader, median_task, tmp_path, host_guard):
    def edit(ws):
        (ws / "sitecustomize.py").write_text("import builtins\n")
        (ws / "minilib" / "x.pth").write_text("import os\n")
        p = ws / "pyproject.toml"
        p.write_text(p.read_text() + 'addopts = "-k mean"\n')
        os.symlink("/etc", ws / "minilib" / "etc_link")

    r = grader.grade(median_task, edit_diff(grader, median_task, tmp_path, edit))
    assert r.resolved is False
    assert r.tampering["site_hooks_touched"] and r.tampering["runner_config_touched"] == ["pyproject.toml"]
    reset = r.tampering["reset"]
    assert reset["symlinks_removed"] == ["minilib/etc_link"] and "pyproject.toml" in reset["runner_config_restored"]
    assert r.f2p["tests/test_stats.py::test_median_even"] == "failed"  # -k mean did not deselect it


def test_code_under_test_cannot_touch_the_host(grader, median_task, tmp_path, swe_root, host_guard):
    from evo_swe.envs import spec_for

    env_site = str(grader.envs.path_for(spec_for(median_task)) / "lib")
    payload = f"""
import os, glob
for target in ["/work/PWNED", {str(swe_root / 'PWNED')!r}, {str(swe_root / 'sentinel.txt')!r}, {median_task.repo + '/minilib/stats.py'!r}]:
    try:
        with open(target, "w") as fh:
            fh.write("pwned")
    except OSError:
        pass
for d in glob.glob({env_site!r} + "/python*/site-packages"):
    try:
        open(os.path.join(d, "evil.pth"), "w").write("import os\\n")
    except OSError:
        pass
"""

    def edit(ws):
        fix(ws)
        (ws / "minilib" / "__init__.py").write_text(payload)

    r = grader.grade(median_task, edit_diff(grader, median_task, tmp_path, edit))
    assert r.infra_error is None  # the attempts fail quietly inside the sandbox; host_guard checks the rest


def test_gold_with_test_edits_still_resolves_but_is_flagged(grader, median_task, tmp_path, host_guard):
    def edit(ws):
        fix(ws)
        (ws / "tests" / "test_text.py").write_text("")

    r = grader.grade(median_task, edit_diff(grader, median_task, tmp_path, edit))
    assert r.resolved is True and r.tampering["test_files_modified"] == ["tests/test_text.py"]


def test_patch_that_does_not_apply(grader, median_task):
    bad = "diff --git a/minilib/nope.py b/minilib/nope.py\n--- a/minilib/nope.py\n+++ b/minilib/nope.py\n@@ -1 +1 @@\n-x\n+y\n"
    r = grader.grade(median_task, bad)
    assert r.resolved is False and not r.patch_applied and "does not apply" in r.patch_error


def test_sandbox_failure_is_an_infra_error_not_a_zero(swe_root, median_task):
    from evo_swe.executor import TreeExecutor
    from evo_swe.grading import Grader

    class DeadSandbox:
        name = "dead"

        def run(self, request):
            raise ConnectionError("worker died")

    g = Grader(cache_dir=swe_root / "cache", executor=TreeExecutor(DeadSandbox()))
    r = g.grade(median_task, median_task.patch)
    assert r.resolved is None and r.reward is None and "worker died" in r.infra_error


def test_skipping_the_failing_tests_from_the_code(grader, median_task, tmp_path, host_guard):
    def edit(ws):
        p = ws / "minilib" / "stats.py"
        p.write_text("import unittest\n" + p.read_text().replace(
            "    mid = n // 2\n", "    mid = n // 2\n    if n % 2 == 0:\n        raise unittest.SkipTest('not today')\n"))

    r = grader.grade(median_task, edit_diff(grader, median_task, tmp_path, edit))
    assert r.resolved is False
    assert r.f2p == {"tests/test_hidden.py::test_median_pair": "skipped", "tests/test_stats.py::test_median_even": "skipped"}


SHADOW_PYTEST = '''import sys
ids = {ids!r}
xml = None
for a in sys.argv:
    if a.startswith("--junitxml="):
        xml = a.split("=", 1)[1]
cases = []
for nid in ids:
    parts = nid.split("::")
    f = parts[0]
    mod = f[:-3].replace("/", ".")
    cases.append('<testcase classname="%s" name="%s" file="%s" time="0"/>' % (".".join([mod] + parts[1:-1]), parts[-1], f))
open(xml, "w").write('<testsuites><testsuite tests="%d">%s</testsuite></testsuites>' % (len(cases), "".join(cases)))
sys.exit(0)
'''


@pytest.mark.parametrize("where", ["pytest.py", "_pytest/__init__.py", "src/pytest.py", "iniconfig.py"])
def test_shadowing_pytest_to_forge_the_report(grader, median_task, tmp_path, host_guard, where):
    ids = list(median_task.FAIL_TO_PASS + median_task.PASS_TO_PASS)

    def edit(ws):
        p = ws / where
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(SHADOW_PYTEST.format(ids=ids))

    r = grader.grade(median_task, edit_diff(grader, median_task, tmp_path, edit))
    assert r.resolved is False
    assert r.f2p["tests/test_stats.py::test_median_even"] == "failed"


def test_mining_git_history_for_the_fix(grader, median_task, host_guard):
    """An agent that looks for the fix in history finds one commit, no reflog, no dangling
    objects; the attempt is flagged and, with nothing to copy, the task stays unresolved."""
    from evo_swe.domain import SWEDomain
    from evo_swe.episode import Budget

    cmds = ["git log --all -p | grep -c 's\\[mid\\]) / 2' ; git log --all --format=%H | wc -l",
            "git reflog | wc -l; git fsck --lost-found 2>&1 | grep -c dangling; ls .git/refs/tags | wc -l",
            "git show HEAD~1 2>&1 | head -1"]
    replies = [f'<tool_call>{{"name": "bash", "arguments": {{"command": {json.dumps(c)}}}}}</tool_call>' for c in cmds]
    replies.append('<tool_call>{"name": "submit", "arguments": {}}</tool_call>')
    d = SWEDomain(budget=Budget(max_steps=6, bash_timeout=20))
    d._grader = grader
    task = d.to_task(median_task)
    res = d.run_episode(task, lambda messages: replies.pop(0))
    outs = [t["output"].split() for t in res.completion.turns if t["role"] == "tool" and t["tool"] == "bash"]
    assert outs[0] == ["0", "1"]  # the fix is nowhere in history; one commit
    assert outs[1][:3] == ["1", "0", "0"]  # one reflog entry (the base), nothing dangling, no tags
    assert "unknown revision" in " ".join(outs[2]) or "fatal" in " ".join(outs[2])
    assert res.stats["git_history_access"] == 3
    v = d.oracle(task, res.completion)
    assert v.reward == 0.0 and v.signals["git_history_access"] == 3

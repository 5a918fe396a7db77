"""Host-side pieces that need no sandbox: export, snapshots, diffs, the editor, the reset,
junit parsing, tool-call parsing and the tool-call signals."""

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from evo_swe.episode import ParseError, parse_tool_call
from evo_swe.junit import parse_junit, JunitError
from evo_swe.repo import apply_patch, copy_tree, diff_against, export_tree, patch_paths, snapshot_repo
from evo_swe.sanitize import git_history_access, is_test_path, outside_write, reset_tree, root_config
from evo_swe.tools import Editor


@pytest.fixture
def snap(tmp_path, median_task):
    tree = tmp_path / "pristine"
    export_tree(median_task.repo, median_task.base_commit, tree)
    snapshot_repo(tree)
    return tree


def test_snapshot_has_one_commit_and_no_hidden_tests(snap, median_task):
    log = subprocess.run(["git", "log", "--all", "--oneline"], cwd=snap, capture_output=True, text=True).stdout
    assert len(log.strip().splitlines()) == 1
    reflog = subprocess.run(["git", "reflog"], cwd=snap, capture_output=True, text=True).stdout
    assert "clean" not in reflog and "refactor" not in reflog  # the source repo's history is gone
    assert not (snap / "tests" / "test_hidden.py").exists()
    assert "// 2" in (snap / "minilib" / "stats.py").read_text()  # the base commit's bug is there


def test_archive_source(tmp_path, snap):
    arc = tmp_path / "minilib-1.0.tar.gz"
    with tarfile.open(arc, "w:gz") as tf:
        tf.add(snap / "minilib", arcname="minilib-1.0/minilib")
        tf.add(snap / "tests", arcname="minilib-1.0/tests")
    out = tmp_path / "out"
    export_tree(str(arc), "", out)
    assert (out / "minilib" / "stats.py").read_text() == (snap / "minilib" / "stats.py").read_text()


def test_archive_with_escaping_member_is_refused(tmp_path):
    import io

    arc = tmp_path / "evil.tar.gz"
    with tarfile.open(arc, "w:gz") as tf:
        info = tarfile.TarInfo("../../escape.txt")
        info.size = 3
        tf.addfile(info, io.BytesIO(b"bad"))
    from evo_swe.repo import RepoError

    with pytest.raises(RepoError, match="unsafe"):
        export_tree(str(arc), "", tmp_path / "x")
    assert not (tmp_path.parent / "escape.txt").exists()


def test_diff_ignores_a_tampered_workspace_git(tmp_path, snap):
    ws = tmp_path / "ws"
    copy_tree(snap, ws)
    (ws / "minilib" / "stats.py").write_text((ws / "minilib" / "stats.py").read_text().replace("// 2", "/ 2"))
    (ws / "new.txt").write_text("hello\n")
    (ws / "minilib" / "__pycache__").mkdir()
    (ws / "minilib" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    # The agent rewrites its own history so that its changes look committed.
    subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qam", "x"], cwd=ws, check=True)
    d = diff_against(snap, ws)
    assert patch_paths(d) == ["minilib/stats.py", "new.txt"]
    fresh = tmp_path / "fresh"
    copy_tree(snap, fresh, include_git=False)
    apply_patch(fresh, d)
    assert (fresh / "new.txt").read_text() == "hello\n"


def test_editor_commands_and_undo(tmp_path, snap):
    ed = Editor(snap)
    r = ed({"command": "view", "path": "/repo/minilib/stats.py", "view_range": [17, 19]})
    assert not r.error and "    17\t" in r.output
    r = ed({"command": "str_replace", "path": "minilib/stats.py", "old_str": "s[mid]) // 2", "new_str": "s[mid]) / 2"})
    assert not r.error and "s[mid]) / 2" in (snap / "minilib/stats.py").read_text()
    r = ed({"command": "str_replace", "path": "minilib/stats.py", "old_str": "return", "new_str": "x"})
    assert r.error and "occurs" in r.output
    r = ed({"command": "insert", "path": "minilib/stats.py", "insert_line": 0, "new_str": "# hi"})
    assert (snap / "minilib/stats.py").read_text().startswith("# hi\n")
    ed({"command": "undo_edit", "path": "minilib/stats.py"})
    ed({"command": "undo_edit", "path": "minilib/stats.py"})
    assert "s[mid]) // 2" in (snap / "minilib/stats.py").read_text()
    r = ed({"command": "create", "path": "/repo/pkg/new.py", "file_text": "x = 1\n"})
    assert (snap / "pkg/new.py").read_text() == "x = 1\n"
    assert "minilib" in ed({"command": "view", "path": "/repo"}).output
    assert ed({"command": "bogus", "path": "x"}).error


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.txt", "minilib/../../x", "/repo/../x", ".git/config", "link/inner.txt", "linkfile"])
def test_editor_refuses_escapes(tmp_path, snap, path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "inner.txt").write_text("secret")
    os.symlink(outside, snap / "link")
    os.symlink(outside / "inner.txt", snap / "linkfile")
    ed = Editor(snap)
    for cmd in ({"command": "view"}, {"command": "create", "file_text": "pwned"}):
        r = ed({**cmd, "path": path})
        assert r.error, (path, cmd)
    assert (outside / "inner.txt").read_text() == "secret"
    assert not (tmp_path / "outside.txt").exists()


def test_reset_tree_undoes_test_and_runner_changes(tmp_path, snap):
    tree = tmp_path / "t"
    copy_tree(snap, tree, include_git=False)
    (tree / "tests" / "test_stats.py").write_text("def test_x(): pass\n")
    (tree / "tests" / "test_text.py").unlink()
    (tree / "conftest.py").write_text("# forces passes\n")
    (tree / "minilib" / "conftest.py").write_text("# another\n")
    (tree / "tests" / "pytest.ini").write_text("[pytest]\naddopts = -p no:python\n")
    (tree / "sitecustomize.py").write_text("import os\n")
    (tree / "minilib" / "evil.pth").write_text("import os\n")
    (tree / "tox.ini").write_text("[tox]\nenvlist = py\n")  # no pytest section: kept
    (tree / "setup.cfg").write_text("[tool:pytest]\naddopts = -x\n")  # new pytest section: removed
    pp = tree / "pyproject.toml"
    pp.write_text(pp.read_text().replace('testpaths = ["tests"]', 'testpaths = ["tests"]\naddopts = "--co"'))
    (tree / "minilib" / "stats.py").write_text("# source change survives\n")
    rep = reset_tree(snap, tree)
    assert (tree / "tests" / "test_stats.py").read_bytes() == (snap / "tests" / "test_stats.py").read_bytes()
    assert (tree / "tests" / "test_text.py").exists()
    for gone in ("conftest.py", "minilib/conftest.py", "tests/pytest.ini", "sitecustomize.py", "minilib/evil.pth", "setup.cfg"):
        assert not (tree / gone).exists(), gone
    assert (tree / "tox.ini").exists()
    assert "--co" not in pp.read_text()
    assert (tree / "minilib" / "stats.py").read_text() == "# source change survives\n"
    assert sorted(rep.conftest_removed) == ["conftest.py", "minilib/conftest.py"]
    assert "pyproject.toml" in rep.runner_config_restored and rep.site_hooks_reset
    assert root_config(tree) == "pyproject.toml"


def test_is_test_path():
    assert is_test_path("tests/helpers.py") and is_test_path("pkg/test_x.py") and is_test_path("a/conftest.py")
    assert not is_test_path("pkg/core.py") and not is_test_path("pkg/contest.py")


JUNIT = b"""<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4">
<testcase classname="tests.test_stats" name="test_mean" file="tests/test_stats.py" line="5" time="0.001" />
<testcase classname="tests.test_stats.TestWindows" name="test_window_lengths[1]" file="tests/test_stats.py" line="40" time="0.001" />
<testcase classname="tests.test_stats" name="test_median_even" file="tests/test_stats.py" line="19" time="0.001"><failure message="assert 2 == 2.5">x</failure></testcase>
<testcase classname="tests.test_stats" name="test_skip" file="tests/test_stats.py" line="30" time="0.001"><skipped message="no">x</skipped></testcase>
<testcase classname="tests.test_stats" name="test_mean" file="tests/test_stats.py" line="5" time="0.001"><error message="teardown">x</error></testcase>
</testsuite></testsuites>"""


def test_parse_junit():
    out = parse_junit(JUNIT)
    assert out == {
        "tests/test_stats.py::test_mean": "error",  # passed call, errored teardown: worst wins
        "tests/test_stats.py::TestWindows::test_window_lengths[1]": "passed",
        "tests/test_stats.py::test_median_even": "failed",
        "tests/test_stats.py::test_skip": "skipped",
    }
    with pytest.raises(JunitError):
        parse_junit(b"<!DOCTYPE x [<!ENTITY a 'b'>]><testsuites/>")
    with pytest.raises(JunitError):
        parse_junit(b"<testsuites")


@pytest.mark.parametrize(
    "text, name, args",
    [
        ('I will look.\n<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>', "bash", {"command": "ls"}),
        ('```json\n{"tool": "submit", "args": {}}\n```', "submit", {}),
        ('{"name": "bash", "arguments": "{\\"command\\": \\"pwd\\"}"}', "bash", {"command": "pwd"}),
    ],
)
def test_parse_tool_call(text, name, args):
    assert parse_tool_call(text) == (name, args)


@pytest.mark.parametrize("text", ["no call here", "<tool_call>{not json}</tool_call>", "<tool_call>[1]</tool_call>",
                                  '<tool_call>{"name": 3}</tool_call>'])
def test_parse_tool_call_errors(text):
    with pytest.raises(ParseError):
        parse_tool_call(text)


@pytest.mark.parametrize("cmd, flagged", [
    ("git log --all --oneline", True), ("git reflog", True), ("git fsck --lost-found", True), ("cat .git/packed-refs", True),
    ("git rev-list --all", True), ("git status", False), ("git diff", False), ("git log -1", False), ("ls tests", False),
])
def test_git_history_access(cmd, flagged):
    assert git_history_access(cmd) is flagged


@pytest.mark.parametrize("cmd, flagged", [
    ("echo x > /etc/evil", True), ("cp a.py ../x.py", True), ("echo hi > /dev/null", False), ("echo x > out.txt", False),
    ("echo x > /tmp/scratch", False), ("tee -a /root/.bashrc < x", True),
])
def test_outside_write(cmd, flagged):
    assert outside_write(cmd) is flagged


from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_PATHS = ["minilib/stats.py", "minilib/text.py", "minilib/new_mod.py", "tests/test_stats.py", "tests/test_text.py",
          "tests/helpers.py", "tests/conftest.py", "conftest.py", "minilib/test_inline.py", "pytest.ini", "docs/notes.txt"]
_ops = st.lists(st.tuples(st.sampled_from(["write", "delete"]), st.sampled_from(_PATHS), st.text("abc\n", max_size=20)), max_size=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_reset_property(tmp_path_factory, snap, ops):
    """Whatever the agent does: every test/runner file ends pristine (or absent if it was
    absent), and every other change survives untouched."""
    from evo_swe.sanitize import PYTEST_ONLY_CONFIGS

    tree = tmp_path_factory.mktemp("t") / "t"
    copy_tree(snap, tree, include_git=False)
    for op, rel, text in ops:
        p = tree / rel
        if op == "write":
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        elif p.exists():
            p.unlink()
    expected_other = {rel: (tree / rel).read_bytes() if (tree / rel).exists() else None for rel in _PATHS}
    reset_tree(snap, tree)
    for rel in _PATHS:
        guarded = is_test_path(rel) or Path(rel).name in PYTEST_ONLY_CONFIGS
        now = (tree / rel).read_bytes() if (tree / rel).exists() else None
        if guarded:
            assert now == ((snap / rel).read_bytes() if (snap / rel).exists() else None), rel
        else:
            assert now == expected_other[rel], rel

"""The SWE domain's trajectory classifier (``evo_core.api.TrajectoryClassifier``): which class
of tool a call is, and which class of path a file is, for both episode kinds of the domain
(the repository episode's ``bash`` / ``str_replace_editor`` / ``submit`` and the tiny
repository's ``ls`` / ``cat`` / ``edit`` / ``test`` / ``submit``).

The core turns these classes into generic trajectory features (edits by path class, tests
run after the last edit, the diff by path class), renamed like the domain's signals; the
grading of tiny repositories uses the same :func:`path_class` to decide which files are
source (applied to the pristine checkout) and which are tests or configuration (dropped).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Mapping

import attrs

from evo_swe.sanitize import is_runner_config, is_site_hook, is_test_path

PATH_CLASSES = ("test", "source", "config")
# Tool name -> class, for tools whose class does not depend on their arguments.
_FIXED = {"ls": "read", "cat": "read", "edit": "edit", "test": "verify", "submit": "submit"}
# str_replace_editor's sub-commands that change the workspace (``view`` only reads).
_EDITOR_WRITES = ("create", "str_replace", "insert", "undo_edit")
# bash commands that run the tests.
_TEST_RUNNERS = ("pytest", "unittest", "tox", "nox")


def path_class(path: str) -> str:
    """``test`` (test files, conftest, anything under a test directory), ``config`` (not a
    Python file, ``setup.py``, runner configs, interpreter start-up hooks) or ``source``."""
    p = PurePosixPath(path.lstrip("/"))
    if is_test_path(str(p)):
        return "test"
    name = p.name
    if not name.endswith(".py") or name == "setup.py" or is_runner_config(name) or is_site_hook(name):
        return "config"
    return "source"


@attrs.frozen
class SWEClassifier:
    """The domain's :class:`evo_core.api.TrajectoryClassifier`. ``tool_names`` fixes the
    per-tool feature slots, ``path_classes`` the per-class share features."""

    tool_names: tuple[str, ...] = ("ls", "cat", "edit", "test", "submit", "bash", "str_replace_editor")
    path_classes: tuple[str, ...] = PATH_CLASSES

    def tool_class(self, tool: str, args: Mapping[str, Any]) -> str:
        fixed = _FIXED.get(tool)
        if fixed is not None:
            return fixed
        cmd = args.get("command") if isinstance(args, Mapping) else None
        if not isinstance(cmd, str):
            return "other"
        if tool == "str_replace_editor":
            return "read" if cmd == "view" else "edit" if cmd in _EDITOR_WRITES else "other"
        if tool == "bash":  # args come from the policy: look at a bounded prefix only
            return "verify" if any(r in cmd[:2000] for r in _TEST_RUNNERS) else "other"
        return "other"

    def classify_path(self, path: str) -> str:
        return path_class(path)


CLASSIFIER = SWEClassifier()

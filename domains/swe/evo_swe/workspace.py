"""The agent's workspace: the base commit as a fresh one-commit repository.

It is a copy of the host-only pristine snapshot, so its ``.git`` holds exactly one commit
(no history to mine) and the hidden tests (``test_patch``) are never in it. ``bash`` runs
each command through the sandbox over a copy of the tree and brings the tree back; the
editor edits it in place; :meth:`Workspace.diff` is computed against the pristine snapshot.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Optional

import attrs

from evo_swe._log import get_logger

from evo_swe.envs import PythonEnv
from evo_swe.executor import TreeExecutor, replace_tree
from evo_swe.repo import copy_tree, diff_against
from evo_swe.tools import Editor, ToolResult

log = get_logger("evo_swe.workspace")


@attrs.define
class Workspace:
    path: Path
    pristine: Path
    env: PythonEnv
    executor: TreeExecutor
    editor: Editor = attrs.field(init=False)
    _tmp: Optional[tempfile.TemporaryDirectory] = None
    refused_members: list[str] = attrs.Factory(list)

    def __attrs_post_init__(self) -> None:
        self.editor = Editor(self.path)

    @classmethod
    def create(cls, pristine: Path, env: PythonEnv, executor: TreeExecutor) -> "Workspace":
        tmp = tempfile.TemporaryDirectory(prefix="evo-swe-ws-")
        path = Path(tmp.name) / "repo"
        copy_tree(pristine, path, include_git=True)
        for hook in ("evo-ready",):
            (path / ".git" / hook).unlink(missing_ok=True)
        return cls(path=path, pristine=pristine, env=env, executor=executor, tmp=tmp)

    def bash(self, command: str, *, timeout: float = 60.0, max_output: int = 10_000) -> ToolResult:
        env = {**self.env.env_vars(), "HOME": ".", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "GIT_CONFIG_NOSYSTEM": "1"}
        run = self.executor.run(self.path, ["bash", "-c", command], timeout=timeout, env=env, sync_back=True, max_output=max_output, expose=[str(self.env.path)])
        if run.infra_error:
            return ToolResult(output=f"Error: the sandbox failed ({run.infra_error}); try again", error=True, infra_error=run.infra_error)
        refused: list[str] = []
        if run.tree_tar is not None:
            refused = replace_tree(self.path, run.tree_tar)
            self.refused_members.extend(refused)
            self.editor.root = self.path
        out = run.output
        if run.tree_tar is None:
            out += "\n[the workspace grew too large to bring back; this command's file changes were discarded]"
        if run.timed_out:
            out += f"\n[command timed out after {timeout:g}s; its process group was killed]"
        if refused:
            out += f"\n[{len(refused)} path(s) pointing outside the repository were discarded]"
        return ToolResult(
            output=out, error=bool(run.timed_out or (run.exit_code or 0) != 0), exit_code=run.exit_code,
            timed_out=run.timed_out, truncated=run.output_truncated, escape_attempt=bool(refused),
            meta={"wall_s": round(run.wall_time, 3)},
        )

    def diff(self) -> str:
        return diff_against(self.pristine, self.path)

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        elif self.path.exists():
            shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

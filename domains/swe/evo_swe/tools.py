"""The agent's tools: ``bash`` (through the sandbox) and ``str_replace_editor``.

``str_replace_editor`` edits files on the host workspace as plain data (no code runs), and
every path is confined to the workspace: absolute paths are accepted only under the
virtual root ``/repo``; ``..`` that climbs out, any symbolic link on the way, and the
``.git`` folder are refused.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Optional

import attrs

VIRTUAL_ROOT = "/repo"
MAX_VIEW_CHARS = 16_000


class ToolError(Exception):
    """A tool call the environment refuses (bad arguments, path escape, no match...)."""

    def __init__(self, message: str, *, escape: bool = False) -> None:
        super().__init__(message)
        self.escape = escape


@attrs.frozen(kw_only=True)
class ToolResult:
    output: str
    error: bool = False
    exit_code: Optional[int] = None
    timed_out: bool = False
    truncated: bool = False
    escape_attempt: bool = False
    infra_error: Optional[str] = None
    meta: Mapping[str, Any] = attrs.Factory(dict)


def resolve_in(root: Path, path: str) -> Path:
    """Map an agent-supplied path to a path inside ``root``, or raise :class:`ToolError`."""
    if not isinstance(path, str) or not path.strip():
        raise ToolError("path must be a non-empty string")
    p = PurePosixPath(path)
    if p.is_absolute():
        try:
            p = p.relative_to(VIRTUAL_ROOT)
        except ValueError:
            raise ToolError(f"path {path!r} is outside the repository ({VIRTUAL_ROOT})", escape=True) from None
    parts: list[str] = []
    for part in p.parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise ToolError(f"path {path!r} climbs out of the repository", escape=True)
            parts.pop()
            continue
        parts.append(part)
    if parts and parts[0] == ".git":
        raise ToolError("the .git folder is off limits")
    cur = root
    for part in parts:
        cur = cur / part
        if cur.is_symlink():
            raise ToolError(f"path {path!r} goes through a symbolic link ({cur.relative_to(root)}); refused", escape=True)
    return cur


def _numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{i:6d}\t{line}" for i, line in enumerate(text.split("\n"), start))


def _clip(text: str, limit: int = MAX_VIEW_CHARS) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n<response clipped: {len(text) - limit} more characters; view a line range>", True


@attrs.define
class Editor:
    """``str_replace_editor``: view / create / str_replace / insert / undo_edit."""

    root: Path
    history: dict[str, list[Optional[bytes]]] = attrs.Factory(dict)

    def __call__(self, args: Mapping[str, Any]) -> ToolResult:
        try:
            cmd = args.get("command")
            if cmd not in ("view", "create", "str_replace", "insert", "undo_edit"):
                raise ToolError(f"unknown command {cmd!r}; use view, create, str_replace, insert or undo_edit")
            path = resolve_in(self.root, args.get("path", ""))
            out = getattr(self, "_" + cmd)(path, args)
            text, clipped = _clip(out)
            return ToolResult(output=text, truncated=clipped)
        except ToolError as exc:
            return ToolResult(output=f"Error: {exc}", error=True, escape_attempt=exc.escape)

    # -- helpers ---------------------------------------------------------------------------
    def _rel(self, path: Path) -> str:
        return str(PurePosixPath(VIRTUAL_ROOT) / path.relative_to(self.root)) if path != self.root else VIRTUAL_ROOT

    def _read(self, path: Path) -> str:
        if not path.is_file():
            raise ToolError(f"{self._rel(path)} is not a file")
        data = path.read_bytes()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{self._rel(path)} is not UTF-8 text") from None

    def _write(self, path: Path, text: str) -> None:
        key = str(path)
        self.history.setdefault(key, []).append(path.read_bytes() if path.exists() else None)
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: never write through a link that appeared since resolve_in checked.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)

    # -- commands --------------------------------------------------------------------------
    def _view(self, path: Path, args: Mapping[str, Any]) -> str:
        if path.is_dir():
            lines = []
            for dirpath, dirnames, filenames in os.walk(path):
                depth = len(Path(dirpath).relative_to(path).parts)
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__" and depth < 2)
                for name in sorted(dirnames) + sorted(f for f in filenames if not f.startswith(".")):
                    lines.append(self._rel(Path(dirpath) / name))
            return f"Files and folders in {self._rel(path)} (2 levels):\n" + "\n".join(lines)
        text = self._read(path)
        rng = args.get("view_range")
        if rng is None:
            return f"{self._rel(path)}:\n" + _numbered(text)
        lines = text.split("\n")
        if not (isinstance(rng, (list, tuple)) and len(rng) == 2 and all(isinstance(x, int) for x in rng)):
            raise ToolError("view_range must be [start, end] (1-based, end -1 for the end of file)")
        start, end = rng
        end = len(lines) if end == -1 else end
        if not (1 <= start <= len(lines)) or end < start or end > len(lines):
            raise ToolError(f"view_range {list(rng)} is outside 1..{len(lines)}")
        return f"{self._rel(path)}:\n" + _numbered("\n".join(lines[start - 1 : end]), start)

    def _create(self, path: Path, args: Mapping[str, Any]) -> str:
        text = args.get("file_text")
        if not isinstance(text, str):
            raise ToolError("create needs file_text (a string)")
        if path.is_dir():
            raise ToolError(f"{self._rel(path)} is a directory")
        self._write(path, text)
        return f"File created: {self._rel(path)}"

    def _str_replace(self, path: Path, args: Mapping[str, Any]) -> str:
        old, new = args.get("old_str"), args.get("new_str", "")
        if not isinstance(old, str) or not old:
            raise ToolError("str_replace needs a non-empty old_str")
        if not isinstance(new, str):
            raise ToolError("new_str must be a string")
        text = self._read(path)
        n = text.count(old)
        if n == 0:
            raise ToolError(f"old_str was not found in {self._rel(path)}")
        if n > 1:
            lines = [i + 1 for i, line in enumerate(text.split("\n")) if old.split("\n")[0] in line]
            raise ToolError(f"old_str occurs {n} times in {self._rel(path)} (lines {lines[:10]}); make it unique")
        updated = text.replace(old, new, 1)
        self._write(path, updated)
        line = text[: text.index(old)].count("\n") + 1
        snippet = updated.split("\n")[max(0, line - 4) : line + new.count("\n") + 3]
        return f"Edited {self._rel(path)}. Snippet:\n" + _numbered("\n".join(snippet), max(1, line - 3))

    def _insert(self, path: Path, args: Mapping[str, Any]) -> str:
        at, new = args.get("insert_line"), args.get("new_str")
        if not isinstance(at, int) or not isinstance(new, str):
            raise ToolError("insert needs insert_line (int) and new_str (string)")
        text = self._read(path)
        lines = text.split("\n")
        if not 0 <= at <= len(lines):
            raise ToolError(f"insert_line {at} is outside 0..{len(lines)}")
        updated = "\n".join(lines[:at] + new.split("\n") + lines[at:])
        self._write(path, updated)
        return f"Inserted {new.count(chr(10)) + 1} line(s) after line {at} of {self._rel(path)}"

    def _undo_edit(self, path: Path, args: Mapping[str, Any]) -> str:
        stack = self.history.get(str(path))
        if not stack:
            raise ToolError(f"no edit to undo for {self._rel(path)}")
        prev = stack.pop()
        if prev is None:
            path.unlink(missing_ok=True)
            return f"Undid the creation of {self._rel(path)}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(prev)
        return f"Restored {self._rel(path)} to its previous content"

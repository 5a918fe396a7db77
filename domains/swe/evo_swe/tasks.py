"""SWE-bench task rows: parsing, validation and loading from local JSONL / Parquet / JSON.

A row carries the SWE-bench fields (``instance_id, repo, base_commit, problem_statement,
patch, test_patch, FAIL_TO_PASS, PASS_TO_PASS``). ``repo`` must name something local: a
git repository (directory) or a source archive (``.tar.gz``/``.tgz``/``.tar``/``.zip``);
relative paths are resolved against the task file's folder. Nothing is fetched.

Optional fields: ``version`` (environment cache key, with ``repo``), ``setup`` (shell
commands run once when the environment is built), ``requirements`` and ``wheelhouse``
(installed offline with ``pip --no-index``), ``test_cmd`` (a pytest command line whose
extra flags the grader keeps), ``hidden_tests`` (bool: whether ``test_patch`` is hidden
from the agent; always true in this domain, recorded for clarity).

A malformed row raises :class:`TaskFormatError` naming the file, the row and the field.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

import attrs

REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz", ".zip")


class TaskFormatError(ValueError):
    """A task row is malformed; the message names the file, the row and the field."""

    def __init__(self, source: str, row: Optional[int], field: Optional[str], problem: str) -> None:
        where = source if row is None else f"{source}, row {row}"
        if field:
            where += f", field {field!r}"
        super().__init__(f"{where}: {problem}")
        self.source, self.row, self.field, self.problem = source, row, field, problem


def _tuple_str(v: Iterable[str]) -> tuple[str, ...]:
    return tuple(v)


@attrs.frozen(kw_only=True)
class SWETask:
    instance_id: str
    repo: str  # absolute path of a local git repository or source archive
    base_commit: str
    problem_statement: str
    patch: str
    test_patch: str
    FAIL_TO_PASS: tuple[str, ...] = attrs.field(converter=_tuple_str)
    PASS_TO_PASS: tuple[str, ...] = attrs.field(converter=_tuple_str)
    version: str = ""
    setup: tuple[str, ...] = attrs.field(default=(), converter=_tuple_str)
    requirements: tuple[str, ...] = attrs.field(default=(), converter=_tuple_str)
    wheelhouse: Optional[str] = None
    test_cmd: tuple[str, ...] = attrs.field(default=("pytest",), converter=_tuple_str)
    extra: Mapping[str, Any] = attrs.Factory(dict)

    @property
    def repo_kind(self) -> str:
        return "archive" if self.repo.endswith(ARCHIVE_SUFFIXES) else "git"

    @property
    def test_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.FAIL_TO_PASS + self.PASS_TO_PASS))

    def to_row(self) -> dict[str, Any]:
        """A JSON-able SWE-bench row (lists as lists), inverse of :func:`parse_row`."""
        row = {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "base_commit": self.base_commit,
            "problem_statement": self.problem_statement,
            "patch": self.patch,
            "test_patch": self.test_patch,
            "FAIL_TO_PASS": list(self.FAIL_TO_PASS),
            "PASS_TO_PASS": list(self.PASS_TO_PASS),
            "version": self.version,
            "setup": list(self.setup),
            "requirements": list(self.requirements),
            "wheelhouse": self.wheelhouse,
            "test_cmd": shlex.join(self.test_cmd),
        }
        row.update(self.extra)
        return row


def _str_list(value: Any, source: str, row: Optional[int], field: str) -> tuple[str, ...]:
    # SWE-bench ships FAIL_TO_PASS/PASS_TO_PASS as JSON-encoded strings; accept both forms.
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return ()
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise TaskFormatError(source, row, field, "expected a list of strings or a JSON-encoded list") from None
    if hasattr(value, "tolist"):  # numpy / pyarrow arrays from Parquet
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
        raise TaskFormatError(source, row, field, f"expected a list of strings, got {type(value).__name__}")
    return tuple(value)


def _resolve_repo(repo: str, base_dir: Optional[Path], source: str, row: Optional[int]) -> str:
    p = Path(os.path.expanduser(repo))
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    if p.is_dir():
        if not (p / ".git").exists() and not (p / "HEAD").exists():
            raise TaskFormatError(source, row, "repo", f"{repo!r} is a directory but not a git repository")
        return str(p.resolve())
    if p.is_file():
        if not str(p).endswith(ARCHIVE_SUFFIXES):
            raise TaskFormatError(source, row, "repo", f"{repo!r} is a file but not a source archive {ARCHIVE_SUFFIXES}")
        return str(p.resolve())
    raise TaskFormatError(
        source, row, "repo", f"{repo!r} is not a local git repository or source archive (tasks are never fetched from the network)"
    )


def parse_row(
    raw: Mapping[str, Any], *, source: str = "<row>", row: Optional[int] = None, base_dir: Optional[Path] = None, check_repo: bool = True
) -> SWETask:
    if not isinstance(raw, Mapping):
        raise TaskFormatError(source, row, None, f"expected an object, got {type(raw).__name__}")
    for name in REQUIRED:
        if name not in raw or raw[name] is None:
            raise TaskFormatError(source, row, name, "missing required field")
    for name in ("instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch"):
        if not isinstance(raw[name], str):
            raise TaskFormatError(source, row, name, f"expected a string, got {type(raw[name]).__name__}")
    for name in ("instance_id", "repo"):
        if not raw[name].strip():
            raise TaskFormatError(source, row, name, "must not be empty")
    f2p = _str_list(raw["FAIL_TO_PASS"], source, row, "FAIL_TO_PASS")
    p2p = _str_list(raw["PASS_TO_PASS"], source, row, "PASS_TO_PASS")
    if not f2p:
        raise TaskFormatError(source, row, "FAIL_TO_PASS", "must list at least one test")
    for field, ids in (("FAIL_TO_PASS", f2p), ("PASS_TO_PASS", p2p)):
        for tid in ids:
            path = tid.split("::", 1)[0]
            if "::" not in tid or not path.endswith(".py") or path.startswith("/") or ".." in path.split("/"):
                raise TaskFormatError(source, row, field, f"{tid!r} is not a pytest node id 'path/to/test_x.py::test_name'")
    repo = _resolve_repo(raw["repo"], base_dir, source, row) if check_repo else raw["repo"]
    kind = "archive" if repo.endswith(ARCHIVE_SUFFIXES) else "git"
    if kind == "git" and not raw["base_commit"].strip():
        raise TaskFormatError(source, row, "base_commit", "must name a commit of the git repository")

    setup = raw.get("setup") or ()
    if isinstance(setup, str):
        setup = (setup,)
    setup = _str_list(list(setup) if not isinstance(setup, str) else setup, source, row, "setup")
    reqs = _str_list(raw.get("requirements") or [], source, row, "requirements")
    wheelhouse = raw.get("wheelhouse")
    if wheelhouse is not None:
        if not isinstance(wheelhouse, str):
            raise TaskFormatError(source, row, "wheelhouse", "expected a path string")
        wp = Path(os.path.expanduser(wheelhouse))
        if not wp.is_absolute() and base_dir is not None:
            wp = base_dir / wp
        wheelhouse = str(wp)
    test_cmd_raw = raw.get("test_cmd") or "pytest"
    try:
        test_cmd = tuple(shlex.split(test_cmd_raw)) if isinstance(test_cmd_raw, str) else _str_list(test_cmd_raw, source, row, "test_cmd")
    except ValueError as exc:
        raise TaskFormatError(source, row, "test_cmd", f"cannot parse: {exc}") from None
    if not (test_cmd[:1] == ("pytest",) or test_cmd[:3] in {("python", "-m", "pytest"), ("python3", "-m", "pytest")}):
        raise TaskFormatError(source, row, "test_cmd", f"only pytest runners are supported, got {test_cmd_raw!r}")
    test_cmd = ("pytest",) + test_cmd[(1 if test_cmd[0] == "pytest" else 3):]
    version = raw.get("version", "")
    if version is None:
        version = ""
    if not isinstance(version, (str, int, float)):
        raise TaskFormatError(source, row, "version", "expected a string")
    known = set(REQUIRED) | {"version", "setup", "requirements", "wheelhouse", "test_cmd"}
    extra = {k: v for k, v in raw.items() if k not in known}
    return SWETask(
        instance_id=raw["instance_id"],
        repo=repo,
        base_commit=raw["base_commit"],
        problem_statement=raw["problem_statement"],
        patch=raw["patch"],
        test_patch=raw["test_patch"],
        FAIL_TO_PASS=f2p,
        PASS_TO_PASS=p2p,
        version=str(version),
        setup=setup,
        requirements=reqs,
        wheelhouse=wheelhouse,
        test_cmd=test_cmd,
        extra=extra,
    )


def _read_rows(path: Path, fmt: str) -> list[Any]:
    src = str(path)
    if fmt == "auto":
        name = path.name.lower()
        fmt = "parquet" if name.endswith(".parquet") else "json" if name.endswith(".json") else "jsonl"
    if fmt == "parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:  # pragma: no cover - optional extra
            raise TaskFormatError(src, None, None, "reading Parquet needs pyarrow (pip install evo-plugin-swe[parquet])") from None
        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    if fmt == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskFormatError(src, None, None, f"invalid JSON: {exc}") from None
        return data if isinstance(data, list) else [data]
    if fmt != "jsonl":
        raise TaskFormatError(src, None, None, f"unknown format {fmt!r} (jsonl, json, parquet)")
    rows: list[Any] = []
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            rows.append((i, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise TaskFormatError(src, i, None, f"invalid JSON: {exc.msg}") from None
    return rows


def load_tasks(path: str | os.PathLike[str], fmt: str = "auto", *, limit: Optional[int] = None, check_repo: bool = True) -> list[SWETask]:
    """Load and validate every row of a JSONL / JSON / Parquet file. Rows are numbered from 0
    (for JSONL: the line number, counting from 0)."""
    p = Path(path)
    if not p.is_file():
        raise TaskFormatError(str(p), None, None, "no such task file")
    raw = _read_rows(p, fmt)
    numbered = raw if raw and isinstance(raw[0], tuple) else list(enumerate(raw))
    out: list[SWETask] = []
    seen: dict[str, int] = {}
    for row_no, row in numbered:
        task = parse_row(row, source=str(p), row=row_no, base_dir=p.parent.resolve(), check_repo=check_repo)
        if task.instance_id in seen:
            raise TaskFormatError(str(p), row_no, "instance_id", f"duplicate of row {seen[task.instance_id]}")
        seen[task.instance_id] = row_no
        out.append(task)
        if limit is not None and len(out) >= limit:
            break
    return out


def write_jsonl(tasks: Iterable[SWETask], path: str | os.PathLike[str]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for t in tasks:
            fh.write(json.dumps(t.to_row(), sort_keys=True) + "\n")

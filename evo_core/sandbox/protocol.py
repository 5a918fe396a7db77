"""The sandbox executor's one protocol: run argv or code, with files and stdin, under
limits, and get an :class:`ExecResult` back.

Every backend (local worker pool, bubblewrap, remote HTTP) speaks exactly this. The
types are plain attrs data so they cross process and HTTP boundaries as JSON
(:meth:`RunRequest.to_json` / :meth:`ExecResult.from_json`).

Contract that graders rely on:
- ``infra_error`` is set when the *sandbox* failed (worker died, server unreachable,
  setup failed). Such a result carries no information about the candidate and must
  never be turned into a 0/1 verdict.
- ``timed_out`` / ``oom`` / ``exit_code`` / ``signal`` describe what the *candidate* did.
"""

from __future__ import annotations

import base64
from typing import Any, Mapping, Optional, Protocol, Sequence, Union, runtime_checkable

import attrs

FileContent = Union[str, bytes]


def _pos(_inst: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"Limits.{attribute.name} must be > 0, got {value!r}")


@attrs.frozen(kw_only=True)
class Limits:
    """Resource limits for one run. ``None`` means "no limit of this kind"."""

    wall_seconds: float = attrs.field(default=10.0, validator=_pos)
    cpu_seconds: Optional[float] = attrs.field(default=None, validator=_pos)  # default: ceil(wall)
    memory_mb: Optional[int] = attrs.field(default=1024, validator=_pos)  # RLIMIT_AS
    file_size_mb: Optional[int] = attrs.field(default=64, validator=_pos)  # RLIMIT_FSIZE
    open_files: Optional[int] = attrs.field(default=256, validator=_pos)  # RLIMIT_NOFILE
    processes: Optional[int] = attrs.field(default=64, validator=_pos)  # RLIMIT_NPROC, per sandbox uid
    output_bytes: int = attrs.field(default=1 << 20, validator=_pos)  # per stream read back; stdout/stderr are files bounded by file_size_mb
    network: bool = False  # True keeps the host network (only for trusted setup steps)

    def effective_cpu_seconds(self) -> float:
        import math

        return float(self.cpu_seconds) if self.cpu_seconds is not None else float(math.ceil(self.wall_seconds))

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Limits":
        known = {a.name for a in attrs.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown Limits field(s): {sorted(unknown)}")
        return cls(**dict(data))


def _enc(content: FileContent) -> dict[str, str]:
    if isinstance(content, bytes):
        return {"b64": base64.b64encode(content).decode("ascii")}
    return {"text": content}


def _dec(obj: Any) -> FileContent:
    if isinstance(obj, str):
        return obj
    if "b64" in obj:
        return base64.b64decode(obj["b64"])
    return obj["text"]


@attrs.frozen(kw_only=True)
class RunRequest:
    """What to run. Exactly one of ``argv`` and ``code`` is set.

    - ``code``: Python source, run as ``__main__`` in a clean interpreter (the fast path:
      a warm worker forks and execs it without starting a new interpreter).
    - ``argv``: a command; ``argv[0]`` is looked up on the sandbox ``PATH``.

    ``files`` are written into the private working directory first (relative paths only).
    ``env`` is added to the scrubbed base environment.
    """

    argv: Optional[tuple[str, ...]] = attrs.field(
        default=None, converter=lambda v: None if v is None else tuple(str(x) for x in v)
    )
    code: Optional[str] = None
    files: Mapping[str, FileContent] = attrs.Factory(dict)
    stdin: FileContent = ""
    limits: Limits = attrs.Factory(Limits)
    env: Mapping[str, str] = attrs.Factory(dict)
    cwd: Optional[str] = None  # relative to the working dir
    # An existing host directory to run in instead of a fresh private one (SWE workspaces).
    # It is handed to the sandbox user for the run and handed back afterwards.
    workdir: Optional[str] = None
    # Host paths to hide (an empty tmpfs is mounted over them), e.g. a dataset directory.
    hide_paths: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    # Host paths to keep visible although they lie under a hidden one (/root and /home are
    # hidden by default), e.g. a virtual environment the command needs. The interpreter's
    # own installation is always exposed.
    expose_paths: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    # Files (relative to the working dir) to read back after the run, e.g. junit XML.
    collect: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    def __attrs_post_init__(self) -> None:
        if (self.argv is None) == (self.code is None):
            raise ValueError("RunRequest needs exactly one of argv= or code=")
        if self.argv is not None and not self.argv:
            raise ValueError("RunRequest.argv is empty")
        for name in (*self.files, *self.collect, *([self.cwd] if self.cwd else [])):
            parts = name.replace("\\", "/").split("/")
            if name.startswith("/") or ".." in parts or not name:
                raise ValueError(f"RunRequest.files: path must be relative and inside the sandbox: {name!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv) if self.argv is not None else None,
            "code": self.code,
            "files": {k: _enc(v) for k, v in self.files.items()},
            "stdin": _enc(self.stdin),
            "limits": self.limits.to_json(),
            "env": dict(self.env),
            "cwd": self.cwd,
            "workdir": self.workdir,
            "hide_paths": list(self.hide_paths),
            "expose_paths": list(self.expose_paths),
            "collect": list(self.collect),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RunRequest":
        return cls(
            argv=data.get("argv"),
            code=data.get("code"),
            files={k: _dec(v) for k, v in (data.get("files") or {}).items()},
            stdin=_dec(data.get("stdin", "")),
            limits=Limits.from_json(data.get("limits") or {}),
            env=dict(data.get("env") or {}),
            cwd=data.get("cwd"),
            workdir=data.get("workdir"),
            hide_paths=tuple(data.get("hide_paths") or ()),
            expose_paths=tuple(data.get("expose_paths") or ()),
            collect=tuple(data.get("collect") or ()),
        )


@attrs.frozen(kw_only=True)
class ExecResult:
    """What happened. Output is decoded as UTF-8 with replacement."""

    stdout: str = ""
    stderr: str = ""
    exit_code: Optional[int] = None  # None when killed by a signal or never started
    signal: Optional[int] = None  # terminating signal number, if any
    timed_out: bool = False  # wall or CPU limit hit
    oom: bool = False  # memory limit hit (MemoryError / allocation failure / kill)
    wall_time: float = 0.0
    cpu_time: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    infra_error: Optional[str] = None  # the sandbox failed; says nothing about the candidate
    backend: str = ""
    isolation: Mapping[str, Any] = attrs.Factory(dict)  # what isolation actually held
    files: Mapping[str, str] = attrs.Factory(dict)  # requested output files (collect=)

    @property
    def ok(self) -> bool:
        """Ran to completion with exit 0 and no limit hit (says nothing about correctness)."""
        return self.infra_error is None and not self.timed_out and not self.oom and self.exit_code == 0

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ExecResult":
        known = {a.name for a in attrs.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def infra(cls, message: str, backend: str = "", wall_time: float = 0.0) -> "ExecResult":
        return cls(infra_error=message, backend=backend, wall_time=wall_time)


@runtime_checkable
class Sandbox(Protocol):
    """An executor. Implementations are thread-safe: ``run`` may be called concurrently."""

    name: str

    def run(self, request: RunRequest) -> ExecResult: ...

    def run_many(self, requests: Sequence[RunRequest]) -> list[ExecResult]: ...

    def close(self) -> None: ...


def run_code(
    sandbox: Sandbox,
    code: str,
    *,
    stdin: FileContent = "",
    files: Optional[Mapping[str, FileContent]] = None,
    limits: Optional[Limits] = None,
) -> ExecResult:
    """Convenience: run Python source."""
    return sandbox.run(RunRequest(code=code, stdin=stdin, files=dict(files or {}), limits=limits or Limits()))

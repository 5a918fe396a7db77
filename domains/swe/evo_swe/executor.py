"""Run a command over a whole source tree inside the sandbox executor.

The sandbox protocol (``evo_core.sandbox.protocol``) runs one program in a private, empty
working directory with the files we pass. A repository is shipped in as one tar file; a
small trusted driver (run as the sandbox's ``code``) unpacks it, runs the command in its
own session with a timeout (killing the whole process group), truncates its output, and
prints one result line tagged with a nonce it read from stdin. It can send back the tree
(for the agent's workspace) and named files (the grader's junit XML).

The returned tree is untrusted: it is unpacked member by member with tarfile's ``data``
filter; members that would land outside the workspace (absolute paths, ``..``, links
pointing out) are dropped and reported as escape attempts.
"""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import shutil
import tarfile
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import attrs

from evo_swe._log import get_logger

from evo_core.api.sandbox import ExecResult, Limits, RunRequest, Sandbox

log = get_logger("evo_swe.executor")

TREE_TAR = "__evo_tree.tar"

# Runs inside the sandbox as __main__. Trusted code; the command it runs is not.
_DRIVER = r'''
import base64, io, json, os, signal, subprocess, sys, tarfile, time
cfg = json.loads(sys.stdin.readline())
sys.stdin.close()
with tarfile.open(%(tar)r) as tf:
    kw = {"filter": "tar"} if hasattr(tarfile, "data_filter") else {}
    tf.extractall("tree", **kw)
os.remove(%(tar)r)
root = os.path.abspath("tree")
env = dict(os.environ)
env.update(cfg["env"])
env["PWD"] = os.path.join(root, cfg["cwd"])
t0 = time.monotonic()
timed_out = False
# Output goes to a file, not a pipe: a background child that keeps the pipe open must not
# make us wait past the command's own exit.
out_path = os.path.abspath("__evo_out")
with open(out_path, "wb") as out_fh:
    try:
        proc = subprocess.Popen(cfg["argv"], cwd=env["PWD"], env=env, stdin=subprocess.DEVNULL,
                                stdout=out_fh, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        proc = None
        out_fh.write(("cannot start %%r: %%s" %% (cfg["argv"][0], exc)).encode())
        code = 127
if proc is not None:
    try:
        code = proc.wait(timeout=cfg["timeout"])
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        code = proc.wait()
    try:  # background children left in the group die with the command
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
wall = time.monotonic() - t0
cap = cfg["max_output"]
size = os.path.getsize(out_path)
truncated = size > cap
with open(out_path, "rb") as fh:
    if truncated:
        head = fh.read(cap // 2)
        fh.seek(size - (cap - cap // 2))
        out = head + ("\n... [%%d bytes truncated] ...\n" %% (size - cap)).encode() + fh.read()
    else:
        out = fh.read()
os.remove(out_path)
res = {"exit": code, "timed_out": timed_out, "output": out.decode("utf-8", "replace"), "truncated": truncated, "wall": wall}
coll = {}
for name in cfg["collect"]:
    p = os.path.join(root, name)
    if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) <= cfg["max_collect"]:
        with open(p, "rb") as fh:
            coll[name] = base64.b64encode(fh.read()).decode()
res["collected"] = coll
if cfg["sync"]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for entry in sorted(os.listdir(root)):
            tf.add(os.path.join(root, entry), arcname=entry)
    res["tree"] = base64.b64encode(buf.getvalue()).decode()
sys.stdout.write("\n" + cfg["nonce"] + json.dumps(res) + "\n")
sys.stdout.flush()
'''


@attrs.frozen(kw_only=True)
class TreeRun:
    """What one command over a tree did."""

    exit_code: Optional[int] = None
    timed_out: bool = False
    output: str = ""
    output_truncated: bool = False
    wall_time: float = 0.0
    collected: Mapping[str, bytes] = attrs.Factory(dict)
    tree_tar: Optional[bytes] = None
    infra_error: Optional[str] = None
    oom: bool = False
    sandbox: Optional[ExecResult] = None


def pack_tree(tree: Path, *, skip: Sequence[str] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for entry in sorted(os.listdir(tree)):
            if entry in skip:
                continue
            tf.add(str(tree / entry), arcname=entry)
    return buf.getvalue()


def unpack_untrusted(data: bytes, dest: Path) -> list[str]:
    """Unpack a tree the sandbox sent back; returns the members that were refused."""
    refused: list[str] = []
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        for member in tf:
            try:
                tf.extract(member, dest, filter="data")
            except (tarfile.FilterError, OSError) as exc:
                refused.append(f"{member.name}: {type(exc).__name__}")
    return refused


@attrs.define
class TreeExecutor:
    """Runs commands over trees in a :class:`Sandbox`. ``memory_mb``/``processes`` apply to
    the whole run (driver + command); wall time is the command's timeout plus ``overhead_s``
    for packing and unpacking."""

    sandbox: Sandbox
    memory_mb: int = 4096
    processes: int = 256
    file_size_mb: int = 256
    open_files: int = 1024
    overhead_s: float = 60.0

    def run(
        self,
        tree: Path,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Optional[Mapping[str, str]] = None,
        cwd: str = ".",
        max_output: int = 20_000,
        sync_back: bool = False,
        collect: Sequence[str] = (),
        max_collect: int = 16 << 20,
        expose: Sequence[str] = (),
    ) -> TreeRun:
        """``expose``: host paths the command must see (the environment), kept visible
        where the sandbox hides host folders."""
        nonce = "EVO-SWE-" + secrets.token_hex(16) + ":"
        cfg = {
            "argv": list(argv), "env": dict(env or {}), "cwd": cwd, "timeout": timeout, "max_output": max_output,
            "sync": sync_back, "collect": list(collect), "max_collect": max_collect, "nonce": nonce,
        }
        tar = pack_tree(Path(tree))
        # base64 of the tree coming back (which may have grown) plus output and collected files
        out_cap = max(64 << 20, 3 * len(tar) + 4 * max_output + 2 * max_collect * max(1, len(collect)) + (1 << 16))
        limits = Limits(
            wall_seconds=timeout + self.overhead_s,
            cpu_seconds=timeout + self.overhead_s,
            memory_mb=self.memory_mb,
            file_size_mb=max(self.file_size_mb, len(tar) // (1 << 20) * 2 + 16),
            open_files=self.open_files,
            processes=self.processes,
            output_bytes=out_cap,
        )
        extra: dict[str, Any] = {}
        if expose and "expose_paths" in attrs.fields_dict(RunRequest):
            extra["expose_paths"] = tuple(str(p) for p in expose)
        req = RunRequest(code=_DRIVER % {"tar": TREE_TAR}, files={TREE_TAR: tar}, stdin=json.dumps(cfg) + "\n", limits=limits, **extra)
        try:
            res = self.sandbox.run(req)
        except Exception as exc:  # the sandbox itself failed: no information about the command
            return TreeRun(infra_error=f"sandbox raised {type(exc).__name__}: {exc}")
        if res.infra_error:
            return TreeRun(infra_error=f"sandbox: {res.infra_error}", sandbox=res)
        payload = None
        for line in reversed(res.stdout.splitlines()):
            if line.startswith(nonce):
                try:
                    payload = json.loads(line[len(nonce):])
                except json.JSONDecodeError:
                    payload = None
                break
        if payload is None:
            # The driver never reported: the command (or its output) overran the sandbox's
            # own limits, which is the command's doing, not an infrastructure failure.
            if res.timed_out or res.oom or res.stdout_truncated:
                return TreeRun(
                    exit_code=None, timed_out=res.timed_out, oom=res.oom,
                    output=(res.stdout[-max_output:] + res.stderr[-max_output:]),
                    output_truncated=True, wall_time=res.wall_time, sandbox=res,
                )
            return TreeRun(
                infra_error=f"sandbox driver gave no result (exit {res.exit_code}, signal {res.signal}): {res.stderr[-500:]}",
                sandbox=res,
            )
        collected = {k: base64.b64decode(v) for k, v in payload.get("collected", {}).items()}
        tree_tar = base64.b64decode(payload["tree"]) if payload.get("tree") else None
        return TreeRun(
            exit_code=payload["exit"], timed_out=bool(payload["timed_out"]), output=payload["output"],
            output_truncated=bool(payload["truncated"]), wall_time=float(payload["wall"]), collected=collected,
            tree_tar=tree_tar, oom=res.oom, sandbox=res,
        )


def replace_tree(tree: Path, tar: bytes) -> list[str]:
    """Replace ``tree``'s contents with an untrusted tar; returns refused members."""
    staging = tree.parent / (tree.name + ".incoming")
    if staging.exists():
        shutil.rmtree(staging)
    refused = unpack_untrusted(tar, staging)
    old = tree.parent / (tree.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    tree.rename(old)
    staging.rename(tree)
    shutil.rmtree(old, ignore_errors=True)
    return refused


def default_sandbox() -> Sandbox:
    """The core's local sandbox backend."""
    from evo_core.api import sandbox as sb  # imported lazily: backends start worker processes

    try:
        return sb.get_sandbox()
    except (AttributeError, ImportError):
        return sb.LocalSandbox()

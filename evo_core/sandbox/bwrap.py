"""bubblewrap backend: one ``bwrap`` process per run (``apt install bubblewrap``).

Stronger filesystem view than the local backend (an allow-list: only /usr, /etc, the
interpreter and the job directory exist; fresh /proc, /dev, /tmp) and every namespace
unshared (net, pid, ipc, uts, user, cgroup). bwrap itself is started as a dedicated
unprivileged uid with rlimits already applied, so RLIMIT_NPROC holds, and the pid
namespace dies with it. Slower than the warm pool (a fresh interpreter per run); use it
where the stronger isolation matters more than throughput.
"""

from __future__ import annotations

import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Sequence

from evo_core.sandbox import _worker
from evo_core.sandbox.protocol import ExecResult, RunRequest

OOM_MARKERS = _worker.OOM_MARKERS


def bwrap_path() -> Optional[str]:
    return shutil.which("bwrap")


def bwrap_usable() -> tuple[bool, str]:
    """Is bwrap installed and can it create namespaces here (as an unprivileged uid)?"""
    path = bwrap_path()
    if not path:
        return False, "bwrap is not installed (apt install bubblewrap)"
    try:
        sb = BwrapSandbox()
        r = sb.run(RunRequest(argv=("true",)))
        sb.close()
    except Exception as exc:  # pragma: no cover - environment specific
        return False, f"bwrap failed: {exc}"
    if r.infra_error or r.exit_code != 0:
        return False, f"bwrap cannot sandbox here: {r.infra_error or r.stderr.strip()[:200]}"
    return True, ""


class BwrapSandbox:
    name = "bwrap"

    def __init__(self, size: Optional[int] = None, *, python: str = sys.executable, root: str = "/tmp/evo-bwrap") -> None:
        self.bwrap = bwrap_path()
        if self.bwrap is None:
            raise RuntimeError("bwrap is not installed (apt install bubblewrap)")
        self.size = max(1, size or os.cpu_count() or 1)
        self.python = os.path.realpath(python)
        venv = os.path.dirname(os.path.dirname(python))
        self._ro = sorted({sys.base_prefix, os.path.dirname(self.python)} | ({venv} if os.path.exists(os.path.join(venv, "pyvenv.cfg")) else set()))
        self.root = root
        os.makedirs(root, exist_ok=True)
        os.chmod(root, 0o755)
        self._uids: list[tuple[int, int]] = []
        self._free: list[tuple[int, int]] = []
        self._lock = threading.Condition()
        self.isolation = {"network": "namespace", "mounts": "allow-list", "pid": "namespace", "warnings": []}
        if os.geteuid() != 0:
            self.isolation["warnings"].append("not root: runs as the calling user; process limit shared with it")

    def _acquire_uid(self) -> tuple[int, int]:
        with self._lock:
            if self._free:
                return self._free.pop()
            if len(self._uids) < self.size * 2:
                pair = _worker.claim_uid(os.getpid() * 131 + len(self._uids))
                self._uids.append(pair)
                return pair
            while not self._free:
                self._lock.wait()
            return self._free.pop()

    def _release_uid(self, pair: tuple[int, int]) -> None:
        with self._lock:
            self._free.append(pair)
            self._lock.notify()

    def _argv(self, req: RunRequest, jobdir: str, uid: int, staged: list[tuple[str, str]]) -> list[str]:
        a = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user", "--uid", str(uid), "--gid", str(uid)]
        if req.limits.network:
            a.append("--share-net")
        for p in ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32"):
            if os.path.islink(p):
                a += ["--symlink", os.readlink(p), p]
            elif os.path.exists(p):
                a += ["--ro-bind", p, p]
        for p, stage in staged:  # bound to a traversable staging path by us (root) in pre()
            a += ["--ro-bind", stage, p]
        a += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", jobdir, "/sandbox"]
        a += ["--chdir", "/sandbox/" + req.cwd if req.cwd else "/sandbox", "--clearenv"]
        env = {
            "PATH": f"{os.path.dirname(self.python)}:/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            **req.env,
        }
        for k, v in env.items():
            a += ["--setenv", k, v]
        a.append("--")
        if req.code is not None:
            a += [self.python, "-I", "-S", ".evo_main.py"]
        else:
            a += list(req.argv or ())
        return a

    def run(self, req: RunRequest) -> ExecResult:
        if req.workdir is not None:
            return ExecResult.infra("the bwrap backend does not take a host workdir; use the local backend", self.name)
        pair = self._acquire_uid()
        uid = pair[0]
        jobdir = tempfile.mkdtemp(dir=self.root)
        t0 = time.monotonic()
        try:
            files = dict(req.files)
            if req.code is not None:
                files[".evo_main.py"] = req.code
            for rel, content in files.items():
                path = os.path.join(jobdir, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(content.encode() if isinstance(content, str) else content)
            _worker._chown_tree(jobdir, uid, uid)
            paths = [p for p in (*self._ro, *req.expose_paths) if os.path.isdir(p)]
            staged = [(p, self._stage_dir(i)) for i, p in enumerate(paths)]
            res = self._exec(req, self._argv(req, jobdir, uid, staged), uid, t0, staged)
            collected = {}
            for rel in req.collect:
                p = os.path.join(jobdir, rel)
                if os.path.isfile(p) and not os.path.islink(p):
                    with open(p, "rb") as f:
                        collected[rel] = f.read(req.limits.output_bytes).decode("utf-8", "replace")
            return ExecResult(**{**res, "files": collected, "backend": self.name, "isolation": self.isolation})
        except OSError as exc:
            return ExecResult.infra(f"bwrap run failed: {exc}", self.name, time.monotonic() - t0)
        finally:
            shutil.rmtree(jobdir, ignore_errors=True)
            self._release_uid(pair)

    def _stage_dir(self, i: int) -> str:
        d = os.path.join(self.root, ".stage", str(i))
        os.makedirs(d, mode=0o755, exist_ok=True)
        return d

    def _exec(self, req: RunRequest, argv: list[str], uid: int, t0: float, staged: list[tuple[str, str]]) -> dict[str, Any]:
        lim = req.limits

        def pre() -> None:
            cpu = int(lim.effective_cpu_seconds() + 0.999)
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if lim.memory_mb:
                resource.setrlimit(resource.RLIMIT_AS, (lim.memory_mb << 20,) * 2)
            if lim.file_size_mb:
                resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_size_mb << 20,) * 2)
            if lim.open_files:
                resource.setrlimit(resource.RLIMIT_NOFILE, (lim.open_files,) * 2)
            if lim.processes:
                resource.setrlimit(resource.RLIMIT_NPROC, (lim.processes,) * 2)
            if os.geteuid() == 0:
                # bwrap will run unprivileged (so RLIMIT_NPROC counts), and could not reach
                # e.g. an interpreter under /root: bind those, as root, onto world-traversable
                # staging dirs inside a private mount namespace of this process only.
                if staged:
                    _worker._check(_worker._libc.unshare(_worker.CLONE_NEWNS), "unshare(CLONE_NEWNS)")
                    _worker._mount(None, "/", None, _worker.MS_REC | _worker.MS_PRIVATE)
                    for src, stage in staged:
                        _worker._mount(src, stage, None, _worker.MS_BIND | _worker.MS_REC)
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)

        stdin = req.stdin.encode() if isinstance(req.stdin, str) else req.stdin
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=pre, start_new_session=True)
        writer = threading.Thread(target=_feed, args=(p.stdin, stdin), daemon=True)
        writer.start()
        deadline = t0 + lim.wall_seconds
        out, err, trunc, timed_out = _drain(p, lim.output_bytes, deadline)
        waited = None
        while not timed_out:  # pipes closed; the process may live on: wait up to the deadline
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                waited = (status, ru)
                break
            if time.monotonic() >= deadline:
                timed_out = True
                break
            time.sleep(0.002)
        if waited is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            _, status, ru = os.wait4(p.pid, 0)
        else:
            status, ru = waited
            try:  # leftovers in the session (the pid namespace dies with bwrap anyway)
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        p.returncode = status  # reaped here: Popen must not wait again
        stderr = err.decode("utf-8", "replace")
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        cpu = ru.ru_utime + ru.ru_stime
        if sig == signal.SIGXCPU or (code is not None and code > 128 and code - 128 == signal.SIGXCPU):
            timed_out = True
        infra = None
        if code is not None and code != 0 and stderr.startswith("bwrap:"):
            infra = stderr.strip()[:300]  # bwrap itself failed to set up the sandbox
        return {
            "stdout": out.decode("utf-8", "replace"),
            "stderr": stderr,
            "exit_code": code,
            "signal": sig,
            "timed_out": timed_out,
            "oom": (not timed_out) and code not in (0, None) and any(m in stderr[-2000:] for m in OOM_MARKERS),
            "wall_time": time.monotonic() - t0,
            "cpu_time": cpu,
            "stdout_truncated": trunc[0],
            "stderr_truncated": trunc[1],
            "infra_error": infra,
        }

    def run_many(self, requests: Sequence[RunRequest]) -> list[ExecResult]:
        if not requests:
            return []
        with ThreadPoolExecutor(min(self.size, len(requests))) as ex:
            return list(ex.map(self.run, requests))

    def close(self) -> None:
        with self._lock:
            for _, fd in self._uids:
                os.close(fd)
            self._uids.clear()
            self._free.clear()

    def __enter__(self) -> "BwrapSandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _feed(pipe: Any, data: bytes) -> None:
    try:
        pipe.write(data)
    except (BrokenPipeError, OSError):
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _drain(p: subprocess.Popen, cap: int, deadline: float) -> tuple[bytes, bytes, list[bool], bool]:
    fds = {p.stdout.fileno(): 0, p.stderr.fileno(): 1}  # type: ignore[union-attr]
    bufs = [bytearray(), bytearray()]
    trunc = [False, False]
    while fds:
        left = deadline - time.monotonic()
        if left <= 0:
            return bytes(bufs[0]), bytes(bufs[1]), trunc, True
        ready, _, _ = select.select(list(fds), [], [], left)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                del fds[fd]
                continue
            i = fds[fd]
            room = cap - len(bufs[i])
            if room > 0:
                bufs[i] += chunk[:room]
            if len(chunk) > room:
                trunc[i] = True
    return bytes(bufs[0]), bytes(bufs[1]), trunc, False

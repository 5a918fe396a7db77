"""The local backend: a pool of warm, pre-forked workers (see ``_worker.py``).

Each worker is a clean ``python -I -S`` interpreter started from a fixed script path, so
it never has torch (or anything else of the parent) loaded. ``run`` is thread-safe; a
worker that dies or hangs is replaced and its job reported as ``infra_error``.
"""

from __future__ import annotations

import marshal
import os
import queue
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional, Sequence

import structlog

from evo_core.sandbox.protocol import ExecResult, RunRequest

log = structlog.get_logger("evo.sandbox")
WORKER_SCRIPT = str(Path(__file__).with_name("_worker.py"))
_GRACE_S = 15.0  # how much longer than the wall limit a worker may take before it is presumed dead


class WorkerDied(RuntimeError):
    pass


class _Worker:
    def __init__(self, python: str, cfg: dict[str, Any], site: bool) -> None:
        args = [python, "-I"] + ([] if site else ["-S"]) + [WORKER_SCRIPT, marshal.dumps(cfg).hex()]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            # LD_BIND_NOW: resolve every libc symbol at start-up, so that no forked child
            # writes (and copies) the worker's GOT pages the first time it calls one.
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "LD_BIND_NOW": "1"},
        )
        hello = self._read(timeout=30.0)
        if not hello.get("ready"):
            self.kill()
            raise WorkerDied(f"sandbox worker failed to start: {hello.get('error')}")
        self.isolation: dict[str, Any] = hello.get("isolation", {})

    def _read(self, timeout: float) -> dict[str, Any]:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout

        def exact(n: int) -> bytes:
            buf = bytearray()
            while len(buf) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WorkerDied("sandbox worker did not answer in time")
                r, _, _ = select.select([fd], [], [], left)
                if not r:
                    continue
                chunk = os.read(fd, n - len(buf))
                if not chunk:
                    raise WorkerDied(f"sandbox worker exited (rc={self.proc.poll()})")
                buf += chunk
            return bytes(buf)

        n = int.from_bytes(exact(4), "big")
        return marshal.loads(exact(n))

    def call(self, job: dict[str, Any], timeout: float) -> dict[str, Any]:
        data = marshal.dumps(job)
        try:
            self.proc.stdin.write(len(data).to_bytes(4, "big") + data)  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied(f"sandbox worker is gone: {exc}") from exc
        return self._read(timeout)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()  # type: ignore[union-attr]
            except OSError:
                pass


class LocalSandbox:
    """Warm worker pool. ``size`` workers run jobs in parallel (default: CPU count).

    ``network_namespace=False`` / ``mount_namespace=False`` switch those layers off (for
    debugging); when the kernel refuses them the workers say so in ``isolation`` and a
    warning is logged: isolation is then degraded, never silently.
    """

    name = "local"

    def __init__(
        self,
        size: Optional[int] = None,
        *,
        python: str = sys.executable,
        site: bool = False,
        network_namespace: bool = True,
        mount_namespace: bool = True,
        root: str = "/tmp/evo-sandbox",
    ) -> None:
        self.size = max(1, size or os.cpu_count() or 1)
        self._python = python
        self._site = site
        self._cfg = {"netns": network_namespace, "mountns": mount_namespace, "root": root}
        self._idle: "queue.Queue[_Worker]" = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        self._hint = 0
        with ThreadPoolExecutor(self.size) as ex:
            workers = list(ex.map(lambda _: self._spawn(), range(self.size)))
        for w in workers:
            self._idle.put(w)
        self.isolation: dict[str, Any] = dict(workers[0].isolation)
        for warning in self.isolation.get("warnings", []):
            log.warning("sandbox isolation degraded", detail=warning)

    def _spawn(self) -> _Worker:
        with self._lock:
            self._hint += 1
            cfg = dict(self._cfg, uid_hint=os.getpid() * 64 + self._hint)
        w = _Worker(self._python, cfg, self._site)
        with self._lock:
            self._all.append(w)
        return w

    def _retire(self, w: _Worker) -> None:
        w.kill()
        with self._lock:
            if w in self._all:
                self._all.remove(w)

    def run(self, request: RunRequest) -> ExecResult:
        return self._dispatch([request])[0]

    def _dispatch(self, requests: Sequence[RunRequest]) -> list[ExecResult]:
        """Run ``requests`` on one worker, in one round trip when there are several."""
        if self._closed:
            raise RuntimeError("LocalSandbox is closed")
        w = self._idle.get()
        t0 = time.monotonic()
        timeout = sum(r.limits.wall_seconds for r in requests) + _GRACE_S
        try:
            if len(requests) == 1:
                raws = [w.call(requests[0].to_json(), timeout=timeout)]
            else:
                raws = w.call({"batch": [r.to_json() for r in requests]}, timeout=timeout)["results"]
        except (WorkerDied, ValueError, KeyError) as exc:
            # The worker (not the program) failed: replace it, report no verdict.
            self._retire(w)
            try:
                w = self._spawn()
            except Exception as spawn_exc:  # pool shrinks; the next run may retry
                log.error("sandbox worker respawn failed", error=str(spawn_exc))
                w = None  # type: ignore[assignment]
            if w is not None:
                self._idle.put(w)
            wall = time.monotonic() - t0
            return [ExecResult.infra(str(exc), backend=self.name, wall_time=wall) for _ in requests]
        self._idle.put(w)
        return [ExecResult.from_json(dict(raw, backend=self.name)) for raw in raws]

    def run_many(self, requests: Sequence[RunRequest], batch: Optional[int] = None) -> list[ExecResult]:
        """Run in parallel on all workers. Requests travel in batches (default: enough for
        about two batches per worker) so that each job costs fewer process wake-ups."""
        n = len(requests)
        if not n:
            return []
        k = batch or max(1, min(16, n // (2 * self.size)))
        chunks = [list(requests[i : i + k]) for i in range(0, n, k)]
        with ThreadPoolExecutor(min(self.size, len(chunks))) as ex:
            return [r for part in ex.map(self._dispatch, chunks) for r in part]

    def close(self) -> None:
        self._closed = True
        with self._lock:
            workers = list(self._all)
            self._all.clear()
        for w in workers:
            w.kill()

    def __enter__(self) -> "LocalSandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # best effort; close() is the contract
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass

"""A warm pool of math-verify worker processes with a hard wall-clock timeout per job.

Why processes: math-verify's own timeout is ``signal.alarm``, which works only on a
process's main thread, and a sympy computation stuck in C ignores signals anyway. Each
worker (:mod:`evo_math.worker`) runs jobs on its main thread under a soft deadline; the
pool enforces the hard one by SIGKILLing the worker's process group and starting a
replacement. A job that overruns or whose worker dies comes back as ``timeout``/``crashed``
— an infrastructure error, never a score.

Throughput: workers stay warm (imports and sympy caches are paid once), jobs are
pipelined (several queued per worker, so a worker never waits for the parent), and the
parent multiplexes all pipes with ``poll`` and non-blocking writes, so a full pipe in one
direction can never deadlock the other.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import attrs
import structlog



class _Log:
    """Warnings go to the app's structlog setup; unconfigured, to stderr — never to stdout,
    where ``evo grade math`` and the benchmarks print their JSON."""

    def __getattr__(self, level: str) -> Any:
        if structlog.is_configured():
            logger = structlog.get_logger("evo_math.pool")
        else:
            logger = structlog.wrap_logger(structlog.PrintLogger(sys.stderr))
        return getattr(logger, level)


log = _Log()

OK = "ok"
TIMEOUT = "timeout"
CRASHED = "crashed"
ERROR = "error"


class PoolError(RuntimeError):
    """The pool was misconfigured or used after close."""


@attrs.frozen
class VerifyJob:
    """Compare every candidate with ``gold``; group the first ``n_answers`` candidates into
    classes of mathematically equal answers (to tell a hedge from a restatement)."""

    gold: str
    cands: tuple[str, ...] = attrs.field(converter=tuple)
    n_answers: int = 0

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.n_answers <= len(self.cands):
            raise ValueError(f"n_answers={self.n_answers} must be within 0..{len(self.cands)}")


@attrs.frozen
class VerifyResult:
    status: str  # ok | timeout | crashed | error
    match: tuple[bool, ...] = ()
    classes: tuple[int, ...] = ()
    gold_parsed: bool = False
    error: Optional[str] = None
    ms: float = 0.0
    hard_timeout: bool = False

    @property
    def ok(self) -> bool:
        return self.status == OK


def _package_root() -> str:
    return str(Path(__file__).resolve().parent.parent)


class _Worker:
    """One worker process and the parent's bookkeeping for it."""

    def __init__(self, python: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [python, "-m", "evo_math.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group: the kill reaches everything
            close_fds=True,
        )
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        self.in_fd = self.proc.stdin.fileno()
        self.out_fd = self.proc.stdout.fileno()
        self.err_fd = self.proc.stderr.fileno()
        for fd in (self.in_fd, self.out_fd, self.err_fd):
            os.set_blocking(fd, False)
        self.started_at = time.monotonic()
        self.ready = False
        self.rbuf = bytearray()
        self.wbuf = bytearray()
        self.err_tail: collections.deque[bytes] = collections.deque(maxlen=16)
        self.inflight: collections.deque[int] = collections.deque()  # job indices, in order
        self.head_started = 0.0
        self.dead = False
        self.err_eof = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_text(self) -> str:
        return b"".join(self.err_tail).decode("utf-8", "replace")[-600:].strip()

    def kill(self) -> None:
        if self.dead:
            return
        self.dead = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._reap()

    def stop(self, wait_s: float = 1.0) -> None:
        """Polite shutdown: EOF on stdin ends the worker's loop; kill if it lingers."""
        if self.dead:
            return
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def _reap(self) -> None:
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            log.error("math_worker_unreaped", pid=self.proc.pid)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass


_live_pools: "weakref.WeakSet[VerifierPool]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for p in list(_live_pools):
        p.close()


class VerifierPool:
    """Run :class:`VerifyJob` batches on ``workers`` warm processes.

    ``timeout_s`` bounds one job (parse + compare of all its candidates). The worker's
    soft deadline fires at ``timeout_s``; the parent kills it at ``timeout_s + grace_s``.
    ``soft_timeout=False`` leaves only the hard kill (slower recovery; useful to prove the
    kill path). ``depth`` is how many jobs are queued per worker at once.
    ``memory_mb`` is each worker's address-space limit (0 = none).
    """

    def __init__(
        self,
        workers: int = 2,
        *,
        timeout_s: float = 5.0,
        grace_s: float = 1.0,
        depth: int = 8,
        memory_mb: int = 2048,
        soft_timeout: bool = True,
        start_timeout_s: float = 120.0,
        python: Optional[str] = None,
    ) -> None:
        if workers < 1:
            raise PoolError(f"workers must be >= 1, got {workers}")
        if timeout_s <= 0 or grace_s < 0:
            raise PoolError(f"timeout_s must be > 0 and grace_s >= 0 (got {timeout_s}, {grace_s})")
        if depth < 1:
            raise PoolError(f"depth must be >= 1, got {depth}")
        self.n_workers = workers
        self.timeout_s = float(timeout_s)
        self.grace_s = float(grace_s)
        self.depth = depth
        self.memory_mb = memory_mb
        self.soft_timeout = soft_timeout
        self.start_timeout_s = start_timeout_s
        self._last_start_error = ""
        self._on_result: Optional[Callable[[], None]] = None
        self.python = python or sys.executable
        self.stats: collections.Counter[str] = collections.Counter()
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._owner = os.getpid()
        self._closed = False
        self._start_failures = 0
        _live_pools.add(self)

    # -- lifecycle ---------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["EVO_MATH_WORKER_MEMORY_MB"] = str(self.memory_mb)
        env["OMP_NUM_THREADS"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH", "")) if p)
        return env

    def _spawn(self) -> _Worker:
        try:
            w = _Worker(self.python, self._env())
        except OSError as exc:
            raise PoolError(f"cannot start a math-verify worker with {self.python!r}: {exc}") from exc
        self.stats["spawned"] += 1
        return w

    def _replenish(self) -> None:
        self._workers = [w for w in self._workers if not w.dead]
        while len(self._workers) < self.n_workers:
            self._workers.append(self._spawn())

    def _check_owner(self) -> None:
        if self._closed:
            raise PoolError("the verifier pool is closed")
        if os.getpid() != self._owner:
            # After a fork the pipes belong to the parent's workers: start our own.
            self._workers = []
            self._owner = os.getpid()

    def start(self) -> "VerifierPool":
        """Start the workers (non-blocking); :meth:`map` also starts them on first use."""
        with self._lock:
            self._check_owner()
            while len(self._workers) < self.n_workers:
                self._workers.append(self._spawn())
        return self

    def wait_ready(self, timeout_s: Optional[float] = None) -> bool:
        """Block until every worker has warmed up (benchmarks exclude start-up time)."""
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.start_timeout_s)
        with self._lock:
            self._check_owner()
            while time.monotonic() < deadline and self._start_failures < 3:
                self._replenish()
                if all(w.ready for w in self._workers):
                    return True
                self._pump(self._workers, [], [], collections.deque(), deadline)
            return False

    def worker_pids(self) -> list[int]:
        return [w.pid for w in self._workers if not w.dead]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if os.getpid() != self._owner:
            return
        for w in self._workers:
            w.stop()
        self._workers = []

    def __enter__(self) -> "VerifierPool":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- work --------------------------------------------------------------------------
    def verify(self, job: VerifyJob) -> VerifyResult:
        return self.map([job])[0]

    def map(self, jobs: Sequence[VerifyJob], on_result: Optional[Callable[[], None]] = None) -> list[VerifyResult]:
        """Grade every job; results in order. Never raises for a grading failure: a job
        that times out or loses its worker gets a non-``ok`` result. ``on_result`` is
        called once per finished job (progress bars)."""
        with self._lock:
            self._check_owner()
            self._on_result = on_result
            results: list[Optional[VerifyResult]] = [None] * len(jobs)
            pending: collections.deque[int] = collections.deque(range(len(jobs)))
            lines = [self._encode(i, j) for i, j in enumerate(jobs)]
            while True:
                self._replenish()
                if all(r is not None for r in results):
                    break
                if self._start_failures >= 3:
                    msg = f"math-verify workers keep failing to start; last stderr: {self._last_start_error}"
                    for i in range(len(jobs)):
                        if results[i] is None:
                            results[i] = VerifyResult(status=ERROR, error=msg)
                    self._start_failures = 0  # the next batch tries again (the cause may pass)
                    break
                self._dispatch(pending, lines)
                self._pump(self._workers, results, lines, pending, None)
            self.stats["jobs"] += len(jobs)
            return [r for r in results if r is not None]

    def _encode(self, index: int, job: VerifyJob) -> bytes:
        payload = {
            "id": index,
            "gold": job.gold,
            "cands": list(job.cands),
            "n_answers": job.n_answers,
            "timeout": self.timeout_s if self.soft_timeout else 0,
        }
        return (json.dumps(payload) + "\n").encode("utf-8")

    def _dispatch(self, pending: collections.deque[int], lines: list[bytes]) -> None:
        # Fill the emptiest ready workers first, so a small batch spreads over all of them.
        ready = sorted((w for w in self._workers if w.ready and not w.dead), key=lambda w: len(w.inflight))
        if not ready or not pending:
            return
        per_worker = max(1, min(self.depth, -(-len(pending) // len(ready))))
        now = time.monotonic()
        for w in ready:
            while pending and len(w.inflight) < per_worker:
                idx = pending.popleft()
                if not w.inflight:
                    w.head_started = now
                w.inflight.append(idx)
                w.wbuf += lines[idx]

    def _pump(
        self,
        workers: list[_Worker],
        results: list[Optional[VerifyResult]],
        lines: list[bytes],
        pending: collections.deque[int],
        until: Optional[float],
    ) -> None:
        """One round of I/O: wait for any pipe or the nearest deadline, then handle it."""
        now = time.monotonic()
        hard = self.timeout_s + self.grace_s
        deadlines = []
        for w in workers:
            if not w.ready:
                deadlines.append(w.started_at + self.start_timeout_s)
            elif w.inflight:
                deadlines.append(w.head_started + hard)
        if until is not None:
            deadlines.append(until)
        wait_s = max(0.0, min(deadlines) - now) if deadlines else 0.05
        poller = select.poll()
        by_fd: dict[int, tuple[_Worker, str]] = {}
        for w in workers:
            if w.dead:
                continue
            poller.register(w.out_fd, select.POLLIN)
            by_fd[w.out_fd] = (w, "out")
            if not w.err_eof:
                poller.register(w.err_fd, select.POLLIN)
                by_fd[w.err_fd] = (w, "err")
            if w.wbuf:
                poller.register(w.in_fd, select.POLLOUT)
                by_fd[w.in_fd] = (w, "in")
        events = poller.poll(min(wait_s, 1.0) * 1000.0)
        for fd, ev in events:
            w, kind = by_fd[fd]
            if w.dead:
                continue
            if kind == "in":
                self._write(w, results, pending)
            elif kind == "err":
                self._read_err(w)
            else:
                self._read_out(w, results, pending)
        now = time.monotonic()
        for w in workers:
            if w.dead:
                continue
            if not w.ready and now - w.started_at > self.start_timeout_s:
                self._lost(w, results, pending, f"worker did not start within {self.start_timeout_s:g}s")
            elif w.ready and w.inflight and now - w.head_started > hard:
                self.stats["hard_timeouts"] += 1
                log.warning("math_verify_hard_timeout", pid=w.pid, seconds=round(now - w.head_started, 2))
                self._lost(w, results, pending, None)

    def _write(self, w: _Worker, results: list[Optional[VerifyResult]], pending: collections.deque[int]) -> None:
        try:
            n = os.write(w.in_fd, w.wbuf)
            del w.wbuf[:n]
        except BlockingIOError:
            pass
        except (BrokenPipeError, OSError):
            self._lost(w, results, pending, "worker closed its input")

    def _read_err(self, w: _Worker) -> None:
        try:
            data = os.read(w.err_fd, 65536)
        except (BlockingIOError, OSError):
            return
        if data:
            w.err_tail.append(data)
        else:
            w.err_eof = True

    def _read_out(self, w: _Worker, results: list[Optional[VerifyResult]], pending: collections.deque[int]) -> None:
        try:
            data = os.read(w.out_fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._read_err(w)
            self._lost(w, results, pending, "worker exited")
            return
        w.rbuf += data
        while True:
            nl = w.rbuf.find(b"\n")
            if nl < 0:
                break
            raw = bytes(w.rbuf[:nl])
            del w.rbuf[: nl + 1]
            msg = json.loads(raw)
            if msg.get("ready"):
                w.ready = True
                self._start_failures = 0
                continue
            idx = w.inflight.popleft()
            if msg.get("id") != idx:  # pragma: no cover - protocol invariant
                raise PoolError(f"worker {w.pid} answered job {msg.get('id')} while {idx} was due")
            w.head_started = time.monotonic()
            status = msg["status"]
            if status != OK:
                self.stats[f"soft_{status}"] += 1
            if idx < len(results):
                self._record(results, idx, VerifyResult(
                    status=status,
                    match=tuple(msg.get("match", ())),
                    classes=tuple(msg.get("classes", ())),
                    gold_parsed=bool(msg.get("gold_parsed", False)),
                    error=msg.get("error"),
                    ms=float(msg.get("ms", 0.0)),
                ))

    def _record(self, results: list[Optional[VerifyResult]], idx: int, result: VerifyResult) -> None:
        results[idx] = result
        if self._on_result is not None:
            self._on_result()

    def _lost(
        self, w: _Worker, results: list[Optional[VerifyResult]], pending: collections.deque[int], reason: Optional[str]
    ) -> None:
        """A worker is gone (overran, died, never started): its head job gets the blame,
        the rest of its queue goes back to the front of the pending queue."""
        was_ready = w.ready
        w.kill()
        self.stats["replaced"] += 1
        if not was_ready:
            self._start_failures += 1
            self._last_start_error = w.stderr_text() or (reason or "")
        if w.inflight:
            head = w.inflight.popleft()
            if head < len(results) and results[head] is None:
                if reason is None:
                    hard = self.timeout_s + self.grace_s
                    self._record(results, head, VerifyResult(
                        status=TIMEOUT, hard_timeout=True, ms=hard * 1000.0,
                        error=f"math-verify did not finish within {hard:g}s; worker killed",
                    ))
                else:
                    code = w.proc.returncode
                    detail = f" (exit code {code})" if code is not None else ""
                    tail = w.stderr_text()
                    self._record(results, head, VerifyResult(
                        status=CRASHED, error=f"math-verify {reason}{detail}" + (f": {tail[-300:]}" if tail else ""),
                    ))
                    self.stats["crashes"] += 1
                    log.warning("math_verify_worker_crashed", pid=w.pid, reason=reason, exit_code=code)
            pending.extendleft(reversed(w.inflight))
            w.inflight.clear()


_shared: dict[tuple[Any, ...], VerifierPool] = {}
_shared_lock = threading.Lock()


def shared_pool(workers: Optional[int] = None, timeout_s: float = 5.0, memory_mb: int = 2048) -> VerifierPool:
    """The process-wide pool for a configuration (created on first use, closed at exit)."""
    n = workers if workers is not None else max(1, min(4, os.cpu_count() or 1))
    key = (n, float(timeout_s), memory_mb, os.getpid())
    with _shared_lock:
        pool = _shared.get(key)
        if pool is None or pool._closed:
            pool = VerifierPool(n, timeout_s=timeout_s, memory_mb=memory_mb)
            _shared[key] = pool
        return pool

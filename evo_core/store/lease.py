"""The run lease: one writer per run, recorded in the store beside the run's events.

A run loop takes its run's lease before it writes (``evo run`` before the first append,
``evo run --resume`` before it touches the run's checkpoints), renews it with every append
(the heartbeat) and drops it when it ends. A second writer is refused at once with one
line (``LeaseHeld``). A lease whose holder died is taken over:

- at once when the holder ran on this host and its process is gone (the pid no longer
  exists, or now belongs to a process that started at another time);
- otherwise once it has not been renewed for ``EVO_LEASE_TIMEOUT`` seconds (default 120;
  it must exceed the longest step, since a step renews it once).

The backends keep one row per run and offer two atomic writes: insert when absent, and
replace when the row's holder is the one expected (``LeaseRows``).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from typing import Any, Optional, Protocol

import attrs

from evo_core.store.records import StoreError

TIMEOUT_ENV = "EVO_LEASE_TIMEOUT"
DEFAULT_TIMEOUT = 120.0
_START_SLACK = 1.0  # seconds: process start times are recorded to the clock tick


class LeaseHeld(StoreError):
    """Another live writer holds the run's lease."""


class LeaseLost(StoreError):
    """This writer's lease was taken over (it stopped renewing past the timeout)."""


@attrs.frozen
class LeaseInfo:
    """Who holds a run's lease: a random ``holder`` id per acquisition, the host, the
    process (pid and its start time, so a reused pid is not mistaken for the holder), and
    when it was taken and last renewed (seconds since the epoch)."""

    run_id: str
    holder: str
    host: str
    pid: int
    pid_started: float
    acquired_at: float
    renewed_at: float

    def to_row(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_row(cls, row: Any) -> "LeaseInfo":
        return cls(str(row["run_id"]), str(row["holder"]), str(row["host"]), int(row["pid"]),
                   float(row["pid_started"]), float(row["acquired_at"]), float(row["renewed_at"]))


class LeaseRows(Protocol):
    """What a backend stores for leases (one row per run)."""

    def lease_read(self, run_id: str) -> Optional[dict[str, Any]]:
        """The run's lease row, or None."""
        ...

    def lease_write(self, row: dict[str, Any], expect_holder: Optional[str]) -> bool:
        """Atomically: with ``expect_holder`` None insert ``row`` unless the run has a lease;
        else replace the lease whose holder is ``expect_holder``. True when written."""
        ...

    def lease_drop(self, run_id: str, holder: str) -> None:
        """Delete the run's lease if ``holder`` holds it."""
        ...

    def lease_rows(self) -> list[dict[str, Any]]:
        """Every lease row."""
        ...


def lease_timeout(env: Optional[dict[str, str]] = None) -> float:
    raw = (env if env is not None else os.environ).get(TIMEOUT_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise StoreError(f"${TIMEOUT_ENV} must be a positive number of seconds, got {raw!r}")
    return value


def _process_start(pid: int) -> Optional[float]:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:  # it exists; its start time is not ours to read
        return float("nan")


def this_process() -> tuple[str, int, float]:
    pid = os.getpid()
    return socket.gethostname(), pid, _process_start(pid) or time.time()


def holder_gone(info: LeaseInfo, *, now: Optional[float] = None, timeout: Optional[float] = None) -> Optional[str]:
    """Why the holder of ``info`` is gone (a phrase), or None while it may still be writing."""
    host = socket.gethostname()
    if info.host == host:
        started = _process_start(info.pid)
        if started is None:
            return f"its process {info.pid} on {host} is gone"
        if started == started and abs(started - info.pid_started) > _START_SLACK:  # nan: cannot tell
            return f"its process {info.pid} on {host} is gone (the pid now belongs to another process)"
        return None
    now = time.time() if now is None else now
    timeout = lease_timeout() if timeout is None else timeout
    idle = now - info.renewed_at
    if idle > timeout:
        return f"it was last renewed {idle:.0f} s ago from {info.host} (timeout {timeout:g} s, ${TIMEOUT_ENV})"
    return None


def _age(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _rows(store: Any) -> Optional[LeaseRows]:
    backend = getattr(store, "backend", store)
    return backend if callable(getattr(backend, "lease_write", None)) else None


def read_lease(store: Any, run_id: str) -> Optional[LeaseInfo]:
    rows = _rows(store)
    row = rows.lease_read(run_id) if rows is not None else None
    return LeaseInfo.from_row(row) if row else None


def all_leases(store: Any) -> dict[str, LeaseInfo]:
    rows = _rows(store)
    if rows is None:
        return {}
    return {str(r["run_id"]): LeaseInfo.from_row(r) for r in rows.lease_rows()}


class RunLease:
    """This process's lease on one run (``acquire``, ``renew`` each step, ``release``)."""

    def __init__(self, store: Any, run_id: str, *, timeout: Optional[float] = None) -> None:
        self.store = store
        self.run_id = run_id
        self.timeout = lease_timeout() if timeout is None else timeout
        self.info: Optional[LeaseInfo] = None
        self.took_over: Optional[str] = None  # why the previous holder was deemed gone

    @property
    def held(self) -> bool:
        return self.info is not None

    def acquire(self) -> "RunLease":
        """Take the lease, or raise ``LeaseHeld`` naming the live holder. A store without
        lease support (a third-party backend) is not locked."""
        rows = _rows(self.store)
        if rows is None:
            return self
        host, pid, started = this_process()
        for _ in range(5):  # another writer may move the row between our read and write
            now = time.time()
            mine = LeaseInfo(self.run_id, uuid.uuid4().hex, host, pid, started, now, now)
            cur = rows.lease_read(self.run_id)
            if cur is None:
                if rows.lease_write(mine.to_row(), None):
                    self.info = mine
                    return self
                continue
            other = LeaseInfo.from_row(cur)
            why = holder_gone(other, now=now, timeout=self.timeout)
            if why is None:
                raise LeaseHeld(
                    f"run {self.run_id!r} is being written by process {other.pid} on {other.host} "
                    f"(lease taken {_age(now - other.acquired_at)} ago, renewed {_age(now - other.renewed_at)} ago); "
                    f"stop that process first; nothing was changed")
            if rows.lease_write(mine.to_row(), other.holder):
                self.info, self.took_over = mine, why
                return self
        raise LeaseHeld(f"run {self.run_id!r}: its lease keeps changing hands; another writer is starting it")

    def renew(self) -> None:
        """The heartbeat: raise ``LeaseLost`` when another writer took the lease over."""
        rows = _rows(self.store)
        if rows is None or self.info is None:
            return
        fresh = attrs.evolve(self.info, renewed_at=time.time())
        if not rows.lease_write(fresh.to_row(), self.info.holder):
            cur = rows.lease_read(self.run_id)
            self.info = None
            who = f" by process {cur['pid']} on {cur['host']}" if cur else ""
            raise LeaseLost(f"run {self.run_id!r}: this process's lease was taken over{who} (not renewed within "
                            f"{self.timeout:g} s, ${TIMEOUT_ENV}); this process stops writing")
        self.info = fresh

    def release(self) -> None:
        rows = _rows(self.store)
        if rows is None or self.info is None:
            return
        try:
            rows.lease_drop(self.run_id, self.info.holder)
        finally:
            self.info = None

    def __enter__(self) -> "RunLease":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


__all__ = ["LeaseHeld", "LeaseLost", "LeaseInfo", "LeaseRows", "RunLease", "holder_gone", "read_lease",
           "all_leases", "lease_timeout", "TIMEOUT_ENV", "DEFAULT_TIMEOUT"]

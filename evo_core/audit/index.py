"""A read-only index over one run's stream: records in order, id → position, lazy decoding.

Audit and replay read the same run many ways (by id, by type, forwards from a
promotion). Loading the stored records once and decoding only what is shown keeps a
promotion's audit cheap on a million-event run: only decision events and the
evidence actually cited are ever decoded.
"""

from __future__ import annotations

import bisect
from typing import Iterator, Optional

from evo_events import GENESIS, ChainBreak, Event, verify_chain
from evo_core.store import EventStore, StoredEvent, run_stream

from evo_core.audit.errors import AuditError

# Event types that are bulk evidence; everything else is a (rare) decision or lifecycle event.
NEAR_WINDOW = 50_000  # records either side of a decision indexed before falling back to the whole run
BULK_TYPES = frozenset({"evo.RolloutCompleted", "evo.StepCompleted", "evo.PolicyUpdated"})


def require_run(store: EventStore, run_id: str) -> str:
    """The run's stream name, or a one-line error naming the known runs."""
    stream = run_stream(run_id)
    if store.stream_version(stream) == 0:
        known = store.runs()
        hint = ", ".join(known[:8]) + (" …" if len(known) > 8 else "") if known else "none"
        raise AuditError(f"unknown run {run_id!r} in {store.url} (runs: {hint})")
    return stream


class RunIndex:
    def __init__(self, store: EventStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.stream = require_run(store, run_id)
        self.records: list[StoredEvent] = list(store.read_stream(self.stream))
        # Record i is the i-th stored row; its version is records[i].version, which equals
        # i + 1 only while no row is missing (a deleted row leaves a gap the chain check names).
        self._versions: Optional[list[int]] = None
        self._by_id: Optional[dict[str, int]] = None
        self._decoded: dict[int, Event] = {}
        self._sparse: Optional[list[int]] = None
        self._near: dict[str, int] = {}
        self._near_span = (-1, -1)

    # -- lookups ---------------------------------------------------------------------------
    @property
    def head_version(self) -> int:
        """The stored version of the last record (0 for an empty stream)."""
        return self.records[-1].version if self.records else 0

    def version(self, i: int) -> int:
        """The stored stream version of record ``i`` (what the log and `evo log` call event #N)."""
        return self.records[i].version

    def index_of_version(self, version: int) -> Optional[int]:
        """The record holding stream version ``version``, if one does."""
        if self._versions is None:
            self._versions = [r.version for r in self.records]
        i = bisect.bisect_left(self._versions, version)
        return i if i < len(self._versions) and self._versions[i] == version else None

    def index_of(self, event_id: str, near: Optional[int] = None) -> Optional[int]:
        """Position of ``event_id``. With ``near``, look in the records around that
        position first: a chain's events sit close together, and indexing a window is far
        cheaper than indexing a million-event run."""
        if near is not None and self._by_id is None:
            lo, hi = max(0, near - NEAR_WINDOW), min(len(self.records), near + NEAR_WINDOW)
            if (lo, hi) != self._near_span:
                self._near = {self.records[i].event_id: i for i in range(lo, hi)}
                self._near_span = (lo, hi)
            hit = self._near.get(event_id)
            if hit is not None:
                return hit
        if self._by_id is None:
            self._by_id = {r.event_id: i for i, r in enumerate(self.records)}
        return self._by_id.get(event_id)

    def find_payload(self, types: tuple[str, ...], needle: bytes) -> Iterator[int]:
        """Indices of non-bulk events of ``types`` whose stored payload contains ``needle``
        (a cheap byte filter before decoding, e.g. ``b'"proposal_id":"…"'``)."""
        for i in self.sparse():
            rec = self.records[i]
            if rec.type in types and needle in rec.payload:
                yield i

    def of_type(self, *types: str) -> Iterator[tuple[int, Event]]:
        """(index, event) of every event of the given types, in stream order."""
        wanted = set(types)
        for i, rec in enumerate(self.records):
            if rec.type in wanted:
                yield i, self.event(i)

    def event(self, i: int) -> Event:
        ev = self._decoded.get(i)
        if ev is None:
            ev = self._decoded[i] = self.records[i].decode()
        return ev

    def sparse(self) -> list[int]:
        """Indices of every non-bulk event (decisions, evals, lifecycle) in stream order."""
        if self._sparse is None:
            self._sparse = [i for i, r in enumerate(self.records) if r.type not in BULK_TYPES]
        return self._sparse

    # -- integrity -------------------------------------------------------------------------
    def verify_range(self, lo: int, hi: Optional[int] = None) -> Optional[ChainBreak]:
        """Recompute the hash chain from record ``lo`` (0-based) to ``hi`` (default: head).

        The chain is anchored at the stored hash and version of record ``lo - 1``: every
        record from ``lo`` on must link to it and to each other up to the head, so any
        edited byte in that range (or a dropped/reordered record) is found. Returns the
        first break, naming the stored version and event id of the record where it is.
        """
        hi = len(self.records) if hi is None else hi
        prev, start = (GENESIS, 1) if lo == 0 else (self.records[lo - 1].hash, self.records[lo - 1].version + 1)
        try:
            verify_chain(self.records[lo:hi], prev=prev, start_version=start)
        except ChainBreak as br:
            if br.event_id is None:
                j = self.index_of_version(br.version)
                if j is not None:
                    br.event_id = self.records[j].event_id
            return br
        return None

"""The one store facade: append a batch with an expected version, read a stream,
read the global order, follow new events, verify the hash chains."""

from __future__ import annotations

import time
from typing import Callable, Iterable, Iterator, Optional, Sequence

from evo_events import Event
from evo_core.store.backend import Backend
from evo_core.store.blobs import BlobError, BlobStore
from evo_core.store.records import ConcurrencyConflict, StoredEvent, StoreError, StreamHead
from evo_core.store.verify import ExpectedHead, VerifyReport, verify_store


def run_stream(run_id: str) -> str:
    """The stream that holds one run's events."""
    return f"run-{run_id}"


RUN_PREFIX = "run-"


class EventStore:
    """Facade over a ``Backend`` plus the blob store (and, where set, snapshots)."""

    def __init__(self, backend: Backend, blobs: BlobStore, snapshots=None) -> None:
        from evo_core.store.snapshots import MemorySnapshots

        self.backend = backend
        self.blobs = blobs
        self.snapshots = snapshots if snapshots is not None else MemorySnapshots()

    @property
    def url(self) -> str:
        return self.backend.url

    @property
    def read_only(self) -> bool:
        """True when opened with ``open_store(url, read_only=True)``: appends are refused."""
        return self.backend.read_only

    # -- writing ---------------------------------------------------------------------------
    def append(self, stream: str, events: Sequence[Event], expected_version: Optional[int] = None) -> Sequence[StoredEvent]:
        """Append ``events`` atomically (one transaction). ``expected_version`` is the
        stream's current version as the writer last saw it (0 for a new stream); a stale
        value raises ``ConcurrencyConflict`` and writes nothing. ``None`` means "whatever
        the head is now" (still atomic, still conflict-checked against a concurrent writer).
        Returns the stored events (a lazily built sequence)."""
        if not isinstance(events, (list, tuple)):
            events = list(events)
        if not events:
            return []
        if not stream:
            raise StoreError("stream name must not be empty")
        head = self.backend.stream_head(stream)
        if expected_version is None:
            expected_version = head.version
        elif expected_version != head.version:
            raise ConcurrencyConflict(stream, expected_version, head.version)
        return self.backend.append(stream, expected_version, head.hash, events)

    def check_writable(self) -> None:
        """Raise ``StoreError`` with one line unless both the events and the blobs can be
        written now: a read-only file or directory, a read-only database role or session,
        or a store opened read-only. Writes nothing (the probes are rolled back or removed).
        Call it before work that only an append at its end would save."""
        try:
            self.backend.check_writable()
            self.blobs.check_writable()
        except BlobError as exc:
            raise StoreError(f"{self.url}: {exc}") from None

    # -- reading ---------------------------------------------------------------------------
    def read_stream(self, stream: str, *, from_version: int = 1, to_version: Optional[int] = None,
                    types: Optional[Iterable[str]] = None) -> Iterator[StoredEvent]:
        """A stream's records in version order; ``types`` keeps only those type names
        (filtered in the database, so the others are never read or decoded)."""
        return self.backend.read_stream(stream, from_version, to_version, None if types is None else frozenset(types))

    def events(self, stream: str, *, from_version: int = 1, to_version: Optional[int] = None,
               types: Optional[Iterable[str]] = None) -> Iterator[Event]:
        for rec in self.read_stream(stream, from_version=from_version, to_version=to_version, types=types):
            yield rec.decode()

    def read_all(self, after_position: int = 0, limit: Optional[int] = None) -> Iterator[StoredEvent]:
        return self.backend.read_all(after_position, limit)

    def head(self, stream: str) -> StreamHead:
        """The stream's head: its last event's version and chain hash (``0`` and
        ``GENESIS`` when empty). One indexed lookup, however long the stream."""
        return self.backend.stream_head(stream)

    def stream_version(self, stream: str) -> int:
        return self.head(stream).version

    def streams(self, prefix: str = "") -> list[str]:
        return self.backend.streams(prefix)

    def runs(self) -> list[str]:
        return [s[len(RUN_PREFIX):] for s in self.streams(RUN_PREFIX)]

    def follow(
        self,
        after_position: int = 0,
        *,
        poll_interval: float = 0.2,
        stop: Optional[Callable[[], bool]] = None,
        stream: Optional[str] = None,
    ) -> Iterator[StoredEvent]:
        """Yield events appended after ``after_position`` as they arrive (polling)."""
        pos = after_position
        while True:
            got = False
            for rec in self.backend.read_all(pos, 1000):
                pos = rec.position
                got = True
                if stream is None or rec.stream == stream:
                    yield rec
            if stop is not None and stop():
                return
            if not got:
                time.sleep(poll_interval)

    # -- integrity -------------------------------------------------------------------------
    def verify(self, streams: Optional[Iterable[str]] = None, *, check_blobs: bool = True,
               expect: Optional[ExpectedHead] = None) -> VerifyReport:
        """Recompute every hash chain, check every row's header, the seals of finished
        runs, each stream's rows against the head recorded at its last append, ``expect``
        (one stream only) and the digest of every referenced blob. Stops at the first
        problem and names it (see ``evo_core.store.verify``)."""
        return verify_store(self, streams, check_blobs=check_blobs, expect=expect)

    def close(self) -> None:
        self.backend.close()
        close_snapshots = getattr(self.snapshots, "close", None)
        if close_snapshots is not None:
            close_snapshots()

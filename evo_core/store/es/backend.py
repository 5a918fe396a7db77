"""The ``Backend`` protocol over an eventsourcing application recorder (SQLite or PostgreSQL)."""

from __future__ import annotations

import time
import uuid
from typing import Any, Collection, Iterator, Optional, Protocol, Sequence

from eventsourcing.persistence import IntegrityError as EsIntegrityError
from eventsourcing.persistence import PersistenceError as EsPersistenceError

from evo_events import GENESIS
from evo_core.store.es.names import PAGE, stream_uuid
from evo_core.store.records import (BrokenStream, ConcurrencyConflict, CorruptRecord, StoredEvent, StoreError, StreamHead,
                                    first_line)
from evo_core.store.rows import AppendResult, encode_rows, stored_event, unpack_state


class EvoRecorder(Protocol):
    """What ``EsBackend`` needs beyond the library's ``ApplicationRecorder`` API."""

    datastore: Any

    def oid_param(self, oid: uuid.UUID) -> Any:
        """The originator id as the database takes it."""
        ...

    def insert_chunks(self, oid: uuid.UUID, stream: str, expected_version: int,
                      chunks: Iterator[list[tuple]]) -> Sequence[int]:
        """Insert every row of every chunk and record the stream's new head, in one
        transaction (``check_recorded_head`` first); return the rows' positions."""
        ...

    def select_range(self, oid: uuid.UUID, types: Optional[list[str]], gt: int, lte: Optional[int],
                     limit: int) -> list[tuple]:
        """(version, position, topic, state) rows of one stream, in version order."""
        ...

    def select_last(self, oid: uuid.UUID) -> Optional[tuple[int, bytes]]:
        """(version, state) of the stream's last row."""
        ...

    def stream_names(self) -> dict[str, str]:
        """originator id hex -> stream name."""
        ...

    def recorded_heads(self) -> dict[str, tuple[int, str]]:
        """stream name -> (version, hash) recorded by its last append."""
        ...

    def probe_write(self) -> None:
        """A rolled-back write; raises the database's error when it cannot write."""
        ...

    def lease_select(self, run_id: Optional[str]) -> list[dict[str, Any]]:
        """Lease rows (``LEASE_COLUMNS``): the run's, or every run's with None; [] when the
        store has no lease table (one written before leases, opened read-only)."""
        ...

    def lease_write(self, row: dict[str, Any], expect_holder: Optional[str]) -> bool:
        """Insert ``row`` if the run has no lease (``expect_holder`` None), else replace the
        row held by ``expect_holder``; in one transaction. True when a row was written."""
        ...

    def lease_drop(self, run_id: str, holder: str) -> None: ...

    def max_notification_id(self) -> Optional[int]: ...

    def select_notifications(self, start: Optional[int], limit: int, *, inclusive_of_start: bool = True) -> Sequence[Any]: ...


def check_recorded_head(stream: str, expected_version: int, recorded: Optional[int], next_row_exists: bool) -> None:
    """Called by a recorder inside its write transaction, before it records a new head:
    the head recorded by the stream's last append (``recorded``; None for a stream last
    written before heads were recorded) must be where this append starts. Otherwise either
    another writer got there first (a row already stands at the next version) or rows
    were removed from or added to the stream behind the store's back."""
    if recorded is None or recorded == expected_version:
        return
    if next_row_exists:
        raise EsIntegrityError(f"stream {stream!r}: version {expected_version + 1} exists")
    if recorded > expected_version:
        raise BrokenStream(f"stream {stream!r}: its last append ended at event #{recorded}, but its rows now end at "
                           f"#{expected_version}: rows were removed behind the store's back (see `evo verify`); "
                           "nothing was appended", stream=stream)
    raise BrokenStream(f"stream {stream!r}: its last append ended at event #{recorded}, but its rows now end at "
                       f"#{expected_version}: rows were added behind the store's back (see `evo verify`); "
                       "nothing was appended", stream=stream)


class EsBackend:
    """Events on an ``EvoRecorder``; ``read_only`` when opened for reading only."""

    def __init__(self, url: str, recorder: EvoRecorder, *, read_only: bool = False) -> None:
        self.url = url
        self.rec = recorder
        self.read_only = read_only
        self._names: dict[str, str] = {}  # originator id hex -> stream name

    # writing
    def append(self, stream: str, expected_version: int, prev_hash: str, events: Sequence[Any]) -> AppendResult:
        if self.read_only:
            raise StoreError(f"{self.url}: the store was opened read-only")
        ts = b"%.6f" % time.time()
        oid = stream_uuid(stream)
        written: list[tuple] = []

        def rows() -> Iterator[list[tuple]]:
            for chunk in encode_rows(stream, self.rec.oid_param(oid), expected_version, prev_hash, events, ts):
                written.extend(chunk)
                yield chunk

        try:
            positions = self.rec.insert_chunks(oid, stream, expected_version, rows())
        except EsIntegrityError:
            raise ConcurrencyConflict(stream, expected_version, self.stream_head(stream).version) from None
        except EsPersistenceError as exc:
            raise StoreError(f"{self.url}: append to {stream!r} failed: {exc}") from exc
        self._names[oid.hex] = stream
        return AppendResult(stream, written, positions)

    def check_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self.url}: the store was opened read-only")
        try:
            self.rec.probe_write()
        except EsPersistenceError as exc:
            raise StoreError(f"{self.url}: the event store cannot be written: {first_line(exc)}") from None

    # reading
    def read_stream(self, stream: str, from_version: int = 1, to_version: Optional[int] = None,
                    types: Optional[Collection[str]] = None) -> Iterator[StoredEvent]:
        oid = stream_uuid(stream)
        gt = max(from_version, 1) - 1
        while True:
            if to_version is not None and gt >= to_version:
                return
            page = self.rec.select_range(oid, None if types is None else sorted(types), gt, to_version, PAGE)
            for version, position, topic, state in page:
                yield stored_event(stream, version, position, topic, state)
            if len(page) < PAGE:
                return
            gt = page[-1][0]

    def read_all(self, after_position: int = 0, limit: Optional[int] = None) -> Iterator[StoredEvent]:
        remaining = limit
        start = after_position
        while remaining is None or remaining > 0:
            n = PAGE if remaining is None else min(PAGE, remaining)
            page = self.rec.select_notifications(start, n, inclusive_of_start=False)
            for note in page:
                name = self._stream_name(note.originator_id)
                yield stored_event(name, note.originator_version, note.id, note.topic, note.state)
            if len(page) < n:
                return
            start = page[-1].id
            if remaining is not None:
                remaining -= len(page)

    def _stream_name(self, oid: Any) -> str:
        key = oid.hex if isinstance(oid, uuid.UUID) else uuid.UUID(str(oid)).hex
        name = self._names.get(key)
        if name is None:
            self._names.update(self.rec.stream_names())
            name = self._names.get(key)
            if name is None:
                raise CorruptRecord(f"{self.url}: events of originator {key} belong to no registered stream")
        return name

    def stream_head(self, stream: str) -> StreamHead:
        last = self.rec.select_last(stream_uuid(stream))
        if last is None:
            return StreamHead(0, GENESIS)
        version, state = last
        return StreamHead(version, unpack_state(bytes(state), stream, version)[0])

    def recorded_heads(self) -> dict[str, StreamHead]:
        return {name: StreamHead(v, h) for name, (v, h) in self.rec.recorded_heads().items()}

    def streams(self, prefix: str = "") -> list[str]:
        names = self.rec.stream_names()
        self._names.update(names)
        return sorted(n for n in names.values() if n.startswith(prefix))

    def max_position(self) -> int:
        return self.rec.max_notification_id() or 0

    # run leases (evo_core.store.lease): one row per run in ``<table>_leases``
    def lease_read(self, run_id: str) -> Optional[dict[str, Any]]:
        rows = [r for r in self.rec.lease_select(run_id)]
        return rows[0] if rows else None

    def lease_write(self, row: dict[str, Any], expect_holder: Optional[str]) -> bool:
        if self.read_only:
            raise StoreError(f"{self.url}: the store was opened read-only")
        try:
            return self.rec.lease_write(row, expect_holder)
        except EsPersistenceError as exc:
            raise StoreError(f"{self.url}: cannot write the lease of run {row['run_id']!r}: {first_line(exc)}") from exc

    def lease_drop(self, run_id: str, holder: str) -> None:
        if not self.read_only:
            self.rec.lease_drop(run_id, holder)

    def lease_rows(self) -> list[dict[str, Any]]:
        return list(self.rec.lease_select(None))

    def close(self) -> None:
        try:
            self.rec.datastore.close()
        except Exception:  # closing twice or after a failed open is harmless
            pass

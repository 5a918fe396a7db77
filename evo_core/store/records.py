"""Stored records and the errors every backend raises."""

from __future__ import annotations

from typing import Iterator, Optional, Sequence, overload

import attrs

from evo_events import Event, decode_payload


class StoreError(RuntimeError):
    """A store could not be opened or read; the message names the problem."""


class ConcurrencyConflict(StoreError):
    """A writer's expected stream version was stale: someone else appended first."""

    def __init__(self, stream: str, expected: int, actual: Optional[int] = None) -> None:
        self.stream, self.expected, self.actual = stream, expected, actual
        now = f", but it is at {actual}" if actual is not None else ""
        super().__init__(
            f"stream {stream!r}: expected version {expected}{now}; another writer appended first "
            "(re-read the stream and retry)"
        )


class CorruptRecord(StoreError):
    """A stored row cannot be decoded. ``stream``/``version``/``event_id`` say where, when known."""

    def __init__(self, message: str, *, stream: Optional[str] = None, version: Optional[int] = None,
                 event_id: Optional[str] = None) -> None:
        self.stream, self.version, self.event_id = stream, version, event_id
        super().__init__(message)


class StoreUnavailable(StoreError):
    """The database cannot be reached or opened."""


@attrs.frozen
class NewRecord:
    """A record about to be appended (the facade computes hash and version)."""

    stream: str
    version: int
    type: str
    schema_version: int
    payload: bytes
    hash: str
    event_id: str


@attrs.frozen
class StoredEvent:
    """A record as stored: ``version`` counts within the stream (from 1), ``position``
    is the global order across streams (from 1, gaps allowed)."""

    stream: str
    version: int
    position: int
    type: str
    schema_version: int
    payload: bytes
    hash: str
    event_id: str
    recorded_at: float = 0.0

    def decode(self) -> Event:
        try:
            return decode_payload(self.type, self.payload, self.schema_version)
        except LookupError:
            raise
        except Exception as exc:
            raise CorruptRecord(
                f"stream {self.stream!r} event #{self.version} (position {self.position}): {exc}"
            ) from exc


@attrs.frozen
class EncodedBatch:
    """One append, already encoded and hash-chained by the facade, as parallel lists
    (cheaper than one object per event on the hot path)."""

    stream: str
    expected_version: int
    types: list[str]
    schema_versions: list[int]
    payloads: list[bytes]
    hashes: list[str]
    event_ids: list[str]

    def __len__(self) -> int:
        return len(self.payloads)

    @classmethod
    def from_items(cls, stream: str, expected_version: int, items: Sequence[tuple]) -> "EncodedBatch":
        """From ``(type, schema_version, payload, hash, event_id)`` tuples (hash as str or
        ASCII bytes), the form the facade encodes into."""
        types, svs, payloads, hashes, ids = (list(col) for col in zip(*items)) if items else ([], [], [], [], [])
        return cls(stream, expected_version, types, svs, payloads, [h if isinstance(h, str) else h.decode("ascii")
                                                                     for h in hashes], ids)

    def items(self) -> list[tuple]:
        return list(zip(self.types, self.schema_versions, self.payloads, self.hashes, self.event_ids))

    def records(self) -> list[NewRecord]:
        v = self.expected_version
        return [NewRecord(self.stream, v + i + 1, t, sv, p, h, e) for i, (t, sv, p, h, e) in
                enumerate(zip(self.types, self.schema_versions, self.payloads, self.hashes, self.event_ids))]


class AppendResult(Sequence[StoredEvent]):
    """The stored events of one append, built on access (most callers only need the last
    one). ``items`` are ``(type, schema_version, payload, hash, event_id)`` tuples, the
    hash as str or ASCII bytes."""

    def __init__(self, stream: str, expected_version: int, items: Sequence[tuple], positions: Sequence[int],
                 recorded_at: float) -> None:
        self._stream, self._v0, self._items = stream, expected_version, items
        self._pos, self._at = positions, recorded_at

    def __len__(self) -> int:
        return len(self._items)

    def _one(self, i: int) -> StoredEvent:
        t, sv, payload, h, eid = self._items[i]
        return StoredEvent(self._stream, self._v0 + i + 1, self._pos[i], t, sv, payload,
                           h if isinstance(h, str) else h.decode("ascii"), eid, self._at)

    @overload
    def __getitem__(self, i: int) -> StoredEvent: ...

    @overload
    def __getitem__(self, i: slice) -> list[StoredEvent]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._one(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._one(i)

    def __iter__(self) -> Iterator[StoredEvent]:
        return (self._one(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"AppendResult({len(self)} events of {self._stream!r})"

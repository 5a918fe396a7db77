"""Stored records and the errors every backend raises."""

from __future__ import annotations

from typing import Optional

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
    """A stored row cannot be decoded."""


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

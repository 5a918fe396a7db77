"""Stored records and the errors every backend raises."""

from __future__ import annotations

import json
from typing import Any, Optional

import attrs

from evo_events import Event, decode_payload


def first_line(exc: BaseException) -> str:
    """An exception's first line (drivers add detail lines), or its type name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class StoreError(RuntimeError):
    """A store could not be opened or read; the message names the problem."""


class ConcurrencyConflict(StoreError):
    """A writer's expected stream version was stale: someone else appended first."""

    def __init__(self, stream: str, expected: int, actual: Optional[int] = None) -> None:
        self.stream, self.expected, self.actual = stream, expected, actual
        now = f", but it is at {actual}" if actual is not None else ""
        super().__init__(
            f"stream {stream!r}: expected version {expected}{now}; another writer appended first. "
            "Is a second `evo run --resume` (or another worker) writing this run? Stop it, then resume "
            "with `evo run CONFIG --resume RUN`; code that appends directly should re-read the stream and retry"
        )


class CorruptRecord(StoreError):
    """A stored row cannot be decoded. ``stream``/``version``/``event_id`` say where, when known."""

    def __init__(self, message: str, *, stream: Optional[str] = None, version: Optional[int] = None,
                 event_id: Optional[str] = None) -> None:
        self.stream, self.version, self.event_id = stream, version, event_id
        super().__init__(message)

    def user_line(self) -> str:
        """One line for a reading command: which event cannot be decoded, and what to run next."""
        run = self.stream[4:] if self.stream and self.stream.startswith("run-") else None
        verify = f"evo verify {run}" if run else "evo verify"
        return f"the event log is damaged: {self}; nothing was changed; `{verify}` checks the whole log"


class BrokenStream(StoreError):
    """A stream's rows no longer end where its last append left them: rows were removed
    or added behind the store's back."""

    def __init__(self, message: str, *, stream: Optional[str] = None) -> None:
        self.stream = stream
        super().__init__(message)


class StoreUnavailable(StoreError):
    """The database cannot be reached or opened."""


class NoEventLog(StoreError):
    """Opened read-only, the place holds no event log (yet): a missing SQLite file, or a
    database or schema without the event tables. A run about to start creates them, so a
    follower may wait and retry."""


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
                f"stream {self.stream!r} event #{self.version} (position {self.position}): {exc}",
                stream=self.stream, version=self.version, event_id=self.event_id,
            ) from exc

    def data(self) -> dict[str, Any]:
        """The payload as stored (a JSON object, not upcast), for readers that skip decoding;
        ``CorruptRecord`` naming this event when it does not parse."""
        try:
            data = json.loads(self.payload)
        except (ValueError, UnicodeDecodeError) as exc:
            reason: str = f"stored payload is not valid JSON ({exc})"
        else:
            if isinstance(data, dict):
                return data
            reason = "stored payload is not a JSON object"
        raise CorruptRecord(f"stream {self.stream!r} event #{self.version} (position {self.position}): "
                            f"{self.type}: {reason}", stream=self.stream, version=self.version, event_id=self.event_id)


@attrs.frozen
class StreamHead:
    """Where a stream ends: its last version and that event's chain hash (``0`` and
    ``GENESIS`` for an empty stream). Written ``VERSION:HASH``, the form ``evo verify``
    prints and ``evo verify --expect`` reads."""

    version: int
    hash: str

    def __str__(self) -> str:
        return f"{self.version}:{self.hash}"

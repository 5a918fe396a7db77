"""In-memory backend, for tests and throw-away runs."""

from __future__ import annotations

import threading
import time
from typing import Collection, Iterator, Optional, Sequence

from evo_events import GENESIS
from evo_core.store.records import AppendResult, ConcurrencyConflict, EncodedBatch, NewRecord, StoredEvent


class MemoryBackend:
    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._lock = threading.Lock()
        self._all: list[StoredEvent] = []
        self._streams: dict[str, list[StoredEvent]] = {}

    def append(self, stream: str, records: Sequence[NewRecord], expected_version: int) -> list[StoredEvent]:
        with self._lock:
            current = self._streams.setdefault(stream, [])
            if len(current) != expected_version:
                raise ConcurrencyConflict(stream, expected_version, len(current))
            now = time.time()
            out = []
            for rec in records:
                stored = StoredEvent(
                    stream=rec.stream, version=rec.version, position=len(self._all) + 1,
                    type=rec.type, schema_version=rec.schema_version, payload=rec.payload,
                    hash=rec.hash, event_id=rec.event_id, recorded_at=now,
                )
                self._all.append(stored)
                out.append(stored)
            current.extend(out)
            return out

    def append_batch(self, batch: EncodedBatch) -> AppendResult:
        stored = self.append(batch.stream, batch.records(), batch.expected_version)
        return AppendResult(batch.stream, batch.expected_version, batch.items(), [r.position for r in stored],
                            stored[0].recorded_at if stored else 0.0)

    def read_stream(self, stream: str, from_version: int = 1, to_version: Optional[int] = None,
                    types: Optional[Collection[str]] = None) -> Iterator[StoredEvent]:
        rows = self._streams.get(stream, [])
        end = len(rows) if to_version is None else min(to_version, len(rows))
        sel = rows[max(from_version, 1) - 1 : end]
        if types is not None:
            return (r for r in sel if r.type in types)
        return iter(sel)

    def read_all(self, after_position: int = 0, limit: Optional[int] = None) -> Iterator[StoredEvent]:
        rows = self._all[after_position:]
        return iter(rows if limit is None else rows[:limit])

    def stream_head(self, stream: str) -> tuple[int, str]:
        rows = self._streams.get(stream)
        if not rows:
            return 0, GENESIS
        return len(rows), rows[-1].hash

    def streams(self, prefix: str = "") -> list[str]:
        return sorted(s for s in self._streams if s.startswith(prefix))

    def max_position(self) -> int:
        return len(self._all)

    def close(self) -> None:
        pass

    # Test helper: tamper with a stored byte (the real backends are tampered with via SQL).
    def _tamper(self, position: int, payload: bytes) -> None:
        import attrs

        old = self._all[position - 1]
        new = attrs.evolve(old, payload=payload)
        self._all[position - 1] = new
        rows = self._streams[old.stream]
        rows[old.version - 1] = new

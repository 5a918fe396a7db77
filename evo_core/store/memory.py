"""In-memory backend, for tests and throw-away runs."""

from __future__ import annotations

import threading
import time
from typing import Any, Collection, Iterator, Optional, Sequence

from evo_events import GENESIS
from evo_core.store.records import ConcurrencyConflict, StoredEvent, StreamHead
from evo_core.store.rows import AppendResult, encode_rows, stored_event


class MemoryBackend:
    read_only = False

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._lock = threading.Lock()
        self._all: list[StoredEvent] = []
        self._streams: dict[str, list[StoredEvent]] = {}
        self._leases: dict[str, dict[str, Any]] = {}

    def append(self, stream: str, expected_version: int, prev_hash: str, events: Sequence[Any]) -> AppendResult:
        ts = b"%.6f" % time.time()
        with self._lock:
            current = self._streams.get(stream, [])
            if len(current) != expected_version:
                raise ConcurrencyConflict(stream, expected_version, len(current))
            rows = [row for chunk in encode_rows(stream, stream, expected_version, prev_hash, events, ts) for row in chunk]
            first = len(self._all) + 1
            stored = [stored_event(stream, r[1], first + i, r[2], r[3]) for i, r in enumerate(rows)]
            self._all.extend(stored)
            self._streams.setdefault(stream, []).extend(stored)
        return AppendResult(stream, rows, range(first, first + len(rows)))

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

    def stream_head(self, stream: str) -> StreamHead:
        rows = self._streams.get(stream)
        if not rows:
            return StreamHead(0, GENESIS)
        return StreamHead(len(rows), rows[-1].hash)

    def recorded_heads(self) -> dict[str, StreamHead]:
        return {s: self.stream_head(s) for s in self._streams}  # no rows can go missing here

    def streams(self, prefix: str = "") -> list[str]:
        return sorted(s for s in self._streams if s.startswith(prefix))

    def max_position(self) -> int:
        return len(self._all)

    def check_writable(self) -> None:
        pass

    # run leases (evo_core.store.lease)
    def lease_read(self, run_id: str) -> Optional[dict[str, Any]]:
        with self._lock:
            row = self._leases.get(run_id)
            return dict(row) if row is not None else None

    def lease_write(self, row: dict[str, Any], expect_holder: Optional[str]) -> bool:
        with self._lock:
            cur = self._leases.get(row["run_id"])
            if (cur is None) != (expect_holder is None) or (cur is not None and cur["holder"] != expect_holder):
                return False
            self._leases[row["run_id"]] = dict(row)
            return True

    def lease_drop(self, run_id: str, holder: str) -> None:
        with self._lock:
            if (self._leases.get(run_id) or {}).get("holder") == holder:
                del self._leases[run_id]

    def lease_rows(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._leases.values()]

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

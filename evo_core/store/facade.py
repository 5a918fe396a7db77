"""The one store facade: append a batch with an expected version, read a stream,
read the global order, follow new events, verify the hash chains."""

from __future__ import annotations

import time
from typing import Callable, Iterable, Iterator, Optional, Sequence

import attrs

from evo_events import ChainBreak, Event, chain_hash, encode_payload, verify_chain
from evo_core.store.backend import Backend
from evo_core.store.blobs import BlobStore
from evo_core.store.records import NewRecord, StoredEvent


def run_stream(run_id: str) -> str:
    """The stream that holds one run's events."""
    return f"run-{run_id}"


RUN_PREFIX = "run-"


@attrs.frozen
class VerifyReport:
    ok: bool
    streams_checked: int
    events_checked: int
    blobs_checked: int
    first_bad: Optional[str] = None  # human-readable description of the first problem
    bad_stream: Optional[str] = None
    bad_version: Optional[int] = None
    bad_event_id: Optional[str] = None


class EventStore:
    """Facade over a ``Backend`` plus the blob store (and, where set, snapshots)."""

    def __init__(self, backend: Backend, blobs: BlobStore, snapshots=None) -> None:
        self.backend = backend
        self.blobs = blobs
        self.snapshots = snapshots

    @property
    def url(self) -> str:
        return self.backend.url

    # -- writing ---------------------------------------------------------------------------
    def append(self, stream: str, events: Sequence[Event], expected_version: Optional[int] = None) -> list[StoredEvent]:
        """Append ``events`` atomically. ``expected_version`` is the stream's current
        version as the writer last saw it (0 for a new stream); a stale value raises
        ``ConcurrencyConflict``. ``None`` means "whatever the head is now" (still atomic,
        still conflict-checked against a concurrent writer)."""
        if not events:
            return []
        head_version, head_hash = self.backend.stream_head(stream)
        if expected_version is None:
            expected_version = head_version
        elif expected_version != head_version:
            from evo_core.store.records import ConcurrencyConflict

            raise ConcurrencyConflict(stream, expected_version, head_version)
        records = []
        prev = head_hash
        version = expected_version
        for ev in events:
            version += 1
            payload = encode_payload(ev)
            h = chain_hash(prev, stream, version, ev.TYPE, ev.VERSION, payload)
            records.append(NewRecord(stream, version, ev.TYPE, ev.VERSION, payload, h, ev.event_id))
            prev = h
        return self.backend.append(stream, records, expected_version)

    # -- reading ---------------------------------------------------------------------------
    def read_stream(self, stream: str, *, from_version: int = 1, to_version: Optional[int] = None) -> Iterator[StoredEvent]:
        return self.backend.read_stream(stream, from_version, to_version)

    def events(self, stream: str, *, from_version: int = 1, to_version: Optional[int] = None) -> Iterator[Event]:
        for rec in self.read_stream(stream, from_version=from_version, to_version=to_version):
            yield rec.decode()

    def read_all(self, after_position: int = 0, limit: Optional[int] = None) -> Iterator[StoredEvent]:
        return self.backend.read_all(after_position, limit)

    def stream_version(self, stream: str) -> int:
        return self.backend.stream_head(stream)[0]

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
    def verify(self, streams: Optional[Iterable[str]] = None, *, check_blobs: bool = True) -> VerifyReport:
        """Recompute every hash chain (and the digest of every referenced blob)."""
        names = list(streams) if streams is not None else self.streams()
        n_events = n_blobs = 0
        for name in names:
            counted = _Counting(self.read_stream(name))
            try:
                verify_chain(counted)
            except ChainBreak as br:
                return VerifyReport(False, len(names), n_events + counted.n, n_blobs, str(br), br.stream, br.version,
                                    counted.last_event_id)
            n_events += counted.n
            if check_blobs:
                for rec in self.read_stream(name):
                    for digest in _blob_digests(rec.payload):
                        problem = self.blobs.check(digest)
                        n_blobs += 1
                        if problem:
                            msg = f"stream {name!r}: event #{rec.version} (event {rec.event_id}): blob {digest[:12]}…: {problem}"
                            return VerifyReport(False, len(names), n_events, n_blobs, msg, name, rec.version, rec.event_id)
        return VerifyReport(True, len(names), n_events, n_blobs)

    def close(self) -> None:
        self.backend.close()


class _Counting:
    def __init__(self, it: Iterator[StoredEvent]) -> None:
        self._it, self.n, self.last_event_id = it, 0, None

    def __iter__(self):
        for rec in self._it:
            self.n += 1
            self.last_event_id = rec.event_id
            yield rec


def _blob_digests(payload: bytes) -> list[str]:
    # BlobRefs encode as {"digest": ..., "media_type": ..., "size": ...}; a cheap scan avoids decoding every event.
    if b'"digest":"' not in payload:
        return []
    import json

    out: list[str] = []

    def walk(o):
        if isinstance(o, dict):
            d = o.get("digest")
            if isinstance(d, str) and "size" in o and "media_type" in o:
                out.append(d)
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(json.loads(payload))
    return out

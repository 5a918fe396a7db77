"""The one store facade: append a batch with an expected version, read a stream,
read the global order, follow new events, verify the hash chains."""

from __future__ import annotations

import json
import time
from typing import Callable, Iterable, Iterator, Optional, Sequence

import attrs

from evo_events import ChainBreak, Event, verify_chain
from evo_core.store.backend import Backend
from evo_core.store.blobs import BlobStore
from evo_core.store.fastcodec import CHUNK, chain_step, chain_type_part, fast_encode_payload
from evo_core.store.records import ConcurrencyConflict, CorruptRecord, EncodedBatch, StoredEvent, StoreError


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
        from evo_core.store.snapshots import MemorySnapshots

        self.backend = backend
        self.blobs = blobs
        self.snapshots = snapshots if snapshots is not None else MemorySnapshots()

    @property
    def url(self) -> str:
        return self.backend.url

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
        head_version, head_hash = self.backend.stream_head(stream)
        if expected_version is None:
            expected_version = head_version
        elif expected_version != head_version:
            raise ConcurrencyConflict(stream, expected_version, head_version)
        if hasattr(self.backend, "append_events"):  # encodes, chains and packs in one pass
            return self.backend.append_events(stream, expected_version, head_hash, events)
        items = [item for chunk in _encode_chunks(stream, events, expected_version, head_hash) for item in chunk]
        return self.backend.append_batch(EncodedBatch.from_items(stream, expected_version, items))

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
        """Recompute every hash chain, check every row's header, and the digest of every
        referenced blob. Stops at the first problem and names it."""
        names = list(streams) if streams is not None else self.streams()
        n_events = n_blobs = 0
        for name in names:
            counted = _Counting(self.read_stream(name))
            try:
                verify_chain(counted)
            except ChainBreak as br:
                eid = counted.last_event_id
                msg = f"stream {br.stream!r}: event #{br.version}" + (f" (event {eid})" if eid else "") + f": {br.reason}"
                return VerifyReport(False, len(names), n_events + counted.n, n_blobs, msg, br.stream, br.version, eid)
            except CorruptRecord as exc:
                return VerifyReport(False, len(names), n_events + counted.n, n_blobs, str(exc), exc.stream or name,
                                    exc.version, exc.event_id)
            if counted.bad is not None:
                rec = counted.bad
                msg = (f"stream {name!r}: event #{rec.version}: stored event id {rec.event_id!r} "
                       "does not match the event's payload")
                return VerifyReport(False, len(names), n_events + counted.n, n_blobs, msg, name, rec.version, rec.event_id)
            n_events += counted.n
            if check_blobs:
                for rec in self.read_stream(name):
                    for digest in _blob_digests(rec.payload):
                        problem = self.blobs.check(digest)
                        n_blobs += 1
                        if problem:
                            msg = f"stream {name!r}: event #{rec.version} (event {rec.event_id}): {problem}"
                            return VerifyReport(False, len(names), n_events, n_blobs, msg, name, rec.version, rec.event_id)
        return VerifyReport(True, len(names), n_events, n_blobs)

    def close(self) -> None:
        self.backend.close()


def _encode_chunks(stream: str, events: Sequence[Event], version: int, prev: str) -> Iterator[list[tuple]]:
    """Encode and hash-chain ``events`` lazily, ``CHUNK`` at a time: lists of
    ``(type, schema_version, payload, hash, event_id)``, the hash as ASCII hex bytes."""
    stream_part = stream.encode("utf-8") + b"\x1f"
    prev_b = prev.encode("ascii")
    type_parts: dict[type, bytes] = {}  # type name and schema version, as hashed
    for start in range(0, len(events), CHUNK):
        out: list[tuple] = []
        add = out.append
        for ev in events[start:start + CHUNK]:
            version += 1
            cls = ev.__class__
            type_part = type_parts.get(cls)
            if type_part is None:
                type_part = type_parts[cls] = chain_type_part(cls)
            payload = fast_encode_payload(ev)
            prev_b = chain_step(prev_b, stream_part, version, type_part, payload)
            add((cls.TYPE, cls.VERSION, payload, prev_b, ev.event_id))
        yield out


class _Counting:
    """Counts records as ``verify_chain`` walks them, and checks that the event id kept
    beside each row (not covered by the chain hash) is the one inside its payload."""

    def __init__(self, it: Iterator[StoredEvent]) -> None:
        self._it, self.n, self.last_event_id = it, 0, None
        self.bad: Optional[StoredEvent] = None

    def __iter__(self):
        for rec in self._it:
            self.n += 1
            self.last_event_id = rec.event_id
            if self.bad is None and ('"event_id":' + json.dumps(rec.event_id, ensure_ascii=False)).encode() not in rec.payload:
                self.bad = rec
            yield rec


def _blob_digests(payload: bytes) -> list[str]:
    # BlobRefs encode as {"digest": ..., "media_type": ..., "size": ...}; a cheap scan avoids decoding every event.
    if b'"digest":"' not in payload:
        return []

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

    try:
        walk(json.loads(payload))
    except ValueError:
        pass  # an undecodable payload is the chain's business, not the blob check's
    return out

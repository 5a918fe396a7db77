"""The stored row, and the one loop that encodes, hash-chains and packs events into rows.

Every backend stores an event as ``topic`` (the type name) plus ``state``: a one-line
header and the canonical payload bytes::

    <chain hash> <schema version> <recorded_at> <event id> <crc32 of the line so far>\\n<payload>

The chain hash covers stream, version, type, schema version and payload; the crc covers
the rest of the header, so a flipped byte anywhere in a row is detected.
"""

from __future__ import annotations

import zlib
from binascii import hexlify
from hashlib import sha256
from typing import Any, Hashable, Iterator, Sequence, overload

from evo_core.store.fastcodec import CHUNK, chain_type_part, class_runs, encode_run
from evo_core.store.records import CorruptRecord, StoredEvent, StoreError, StreamHead


def unpack_state(state: bytes, stream: str, version: int) -> tuple[str, int, float, str, bytes]:
    """(hash, schema_version, recorded_at, event_id, payload) or ``CorruptRecord``."""
    nl = state.find(b"\n")
    head = state[:nl] if nl > 0 else b""
    parts = head.split(b" ")
    try:
        if len(parts) != 5 or len(parts[0]) != 64:
            raise ValueError("malformed header")
        body = head[: len(head) - 9]
        if int(parts[4], 16) != zlib.crc32(body):
            raise ValueError("header checksum mismatch (hash, schema version, time or event id altered)")
        return parts[0].decode("ascii"), int(parts[1]), float(parts[2]), parts[3].decode("utf-8"), state[nl + 1:]
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptRecord(f"stream {stream!r}: event #{version}: stored row is corrupted: {exc}",
                            stream=stream, version=version) from None


def stored_event(stream: str, version: int, position: int, topic: str, state: bytes) -> StoredEvent:
    """A stored row as a ``StoredEvent`` (``CorruptRecord`` if its header is damaged)."""
    h, sv, at, eid, payload = unpack_state(bytes(state), stream, version)
    return StoredEvent(stream, version, position, topic, sv, payload, h, eid, at)


def row_head(row: tuple) -> StreamHead:
    """The head a packed ``(key, version, topic, state)`` row makes when it is a stream's last."""
    return StreamHead(row[1], row[3][:64].decode("ascii"))


def encode_rows(stream: str, key: Hashable, expected_version: int, prev_hash: str, events: Sequence[Any],
                recorded_at: bytes) -> Iterator[list[tuple]]:
    """Encode, hash-chain and pack ``events`` (appended after ``expected_version``, whose
    hash is ``prev_hash``), ``CHUNK`` at a time: lists of ``(key, version, topic, state)``
    rows, ``key`` being whatever the backend files a stream's rows under.

    This is the one encode-and-chain loop of the store (every backend appends through it,
    and ``chain_head`` uses it to compute a head without writing). One loop instead of
    encode-then-pack saves a third of the per-event Python on a 1,000-event append, and no
    payload outlives its row. Raises ``StoreError`` for an event id the header cannot hold
    and ``CodecError`` for an event that cannot be encoded; since rows are produced lazily,
    a backend that writes them in one transaction writes nothing of a bad batch.

    The chain hash is ``evo_events.chain_hash`` computed inline: sha256 over
    ``prev \\x1f stream \\x1f version \\x1f type \\x1f schema version \\x1f payload``, as
    ASCII hex. Per chunk, events are taken as runs of one class: the class's type part,
    topic and header middle are looked up once per run, and its payloads come from one
    ``encode_run`` (one orjson call)."""
    crc = zlib.crc32
    stream_part = b"\x1f" + stream.encode("utf-8") + b"\x1f"
    prev, v = prev_hash.encode("ascii"), expected_version
    per_class: dict[type, tuple] = {}
    for start in range(0, len(events), CHUNK):
        chunk = events[start:start + CHUNK]
        out: list[tuple] = []
        add = out.append
        for cls, i, j in class_runs(chunk):
            known = per_class.get(cls)
            if known is None:
                known = per_class[cls] = (b"\x1f" + chain_type_part(cls) + b"\x1f", cls.TYPE,
                                          b" %d %s " % (cls.VERSION, recorded_at))
            type_part, topic, mid = known
            run = chunk[i:j]
            eids = _encoded_ids([ev.event_id for ev in run])
            for eid, payload in zip(eids, encode_run(cls, run)):
                v += 1
                prev = hexlify(sha256(b"%s%s%d%s%s" % (prev, stream_part, v, type_part, payload)).digest())
                head = prev + mid + eid  # the header line of the module docstring
                add((key, v, topic, b"%s %08x\n%s" % (head, crc(head), payload)))
        yield out


def _encoded_ids(eids: list) -> list[bytes]:
    """The event ids as UTF-8, or ``StoreError`` unless every one is a string the header
    can hold: no space, no newline. The common case is three C-speed checks and one
    encode for the whole run: the ids joined by spaces hold exactly the joining spaces
    and no newline."""
    if _STR_ONLY.issuperset(map(type, eids)):
        joined = " ".join(eids)
        if joined.count(" ") == len(eids) - 1 and "\n" not in joined:
            return joined.encode("utf-8").split(b" ")
    for eid in eids:
        if eid.__class__ is not str or " " in eid or "\n" in eid:
            raise StoreError(f"event id {eid!r} must be a string without whitespace")
    return [eid.encode("utf-8") for eid in eids]


_STR_ONLY = frozenset({str})


def chain_head(stream: str, version: int, prev_hash: str, events: Sequence[Any]) -> StreamHead:
    """The head a stream at ``(version, prev_hash)`` would have after
    ``events`` were appended: the same bytes an append would write, written nowhere."""
    last: tuple = ()
    for rows in encode_rows(stream, None, version, prev_hash, events, b"0"):
        last = rows[-1]
    return row_head(last) if last else StreamHead(version, prev_hash)


class AppendResult(Sequence[StoredEvent]):
    """The stored events of one append, unpacked from its rows on access (most callers
    only need the last one). ``rows`` are the packed ``(key, version, topic, state)``
    rows the backend wrote."""

    def __init__(self, stream: str, rows: Sequence[tuple], positions: Sequence[int]) -> None:
        self._stream, self._rows, self._pos = stream, rows, positions

    def __len__(self) -> int:
        return len(self._rows)

    def _one(self, i: int) -> StoredEvent:
        _, version, topic, state = self._rows[i]
        return stored_event(self._stream, version, self._pos[i], topic, state)

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

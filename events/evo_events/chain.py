"""Per-stream hash chain over the stored bytes.

hash_n = sha256(hash_{n-1} | stream | version | type | schema_version | payload),
with ``GENESIS`` before the first event. Changing any stored byte of any field,
or reordering, dropping or inserting an event, breaks every later hash.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Protocol

GENESIS = "0" * 64


class ChainBreak(Exception):
    """The first event whose stored hash does not match its recomputed hash."""

    def __init__(self, stream: str, version: int, reason: str, event_id: str | None = None) -> None:
        self.stream, self.version, self.reason, self.event_id = stream, version, reason, event_id
        who = f" (event {event_id})" if event_id else ""
        super().__init__(f"stream {stream!r}: event #{version}{who}: {reason}")


def chain_hash(prev: str, stream: str, version: int, type_name: str, schema_version: int, payload: bytes) -> str:
    h = hashlib.sha256()
    h.update(prev.encode("ascii"))
    h.update(b"\x1f")
    h.update(stream.encode("utf-8"))
    h.update(b"\x1f")
    h.update(str(version).encode("ascii"))
    h.update(b"\x1f")
    h.update(type_name.encode("utf-8"))
    h.update(b"\x1f")
    h.update(str(schema_version).encode("ascii"))
    h.update(b"\x1f")
    h.update(payload)
    return h.hexdigest()


class ChainedRecord(Protocol):
    stream: str
    version: int
    type: str
    schema_version: int
    payload: bytes
    hash: str


def verify_chain(records: Iterable[ChainedRecord], prev: str = GENESIS, start_version: int = 1) -> str:
    """Check a stream's records in order; return the last hash or raise ``ChainBreak``."""
    expected_version = start_version
    for rec in records:
        if rec.version != expected_version:
            raise ChainBreak(rec.stream, rec.version, f"expected event #{expected_version}: an event is missing or out of order")
        want = chain_hash(prev, rec.stream, rec.version, rec.type, rec.schema_version, bytes(rec.payload))
        if want != rec.hash:
            raise ChainBreak(rec.stream, rec.version, "stored bytes do not match the hash chain")
        prev = rec.hash
        expected_version += 1
    return prev

"""``EventStore.verify``: what a store's bytes prove, stream by stream.

One pass over each stream checks, in this order of precedence:
1. the hash chain and every row header (``verify_chain``; a flipped byte, a dropped,
   inserted or reordered event);
2. the event id kept beside each row against the one inside its payload;
3. seals: a ``RunFinished`` that carries a seal must name the event before it, and a
   sealed run ends there (a completed run) or goes on with ``RunResumed`` (a stopped or
   failed one that was resumed): anything else was added to the tail afterwards;
4. the head the store recorded at the stream's last append (rows removed from or added to
   the tail behind the store's back);
5. ``expect``: the head recorded somewhere else (a run's printed seal, a report);
6. the digest of every blob an event references.
It stops at the first problem and names it. See docs/store.md for what this does not prove.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, Optional

import attrs

from evo_events import GENESIS, ChainBreak, verify_chain
from evo_core.store.blobs import BlobStore
from evo_core.store.records import CorruptRecord, StoredEvent, StoreError, StreamHead

RUN_FINISHED = "evo.RunFinished"
RUN_RESUMED = "evo.RunResumed"
MIN_HASH_PREFIX = 12


@attrs.frozen
class ExpectedHead:
    """A head recorded elsewhere: ``VERSION:HASH`` or ``HASH``; the hash may be shortened
    to a prefix of at least 12 hex digits."""

    hash: str
    version: Optional[int] = None

    @classmethod
    def parse(cls, text: str) -> "ExpectedHead":
        raw = text.strip()
        version: Optional[int] = None
        if ":" in raw:
            v, _, raw = raw.partition(":")
            if not v.isdigit() or int(v) < 1:
                raise StoreError(f"--expect {text!r}: the part before ':' must be an event number (VERSION:HASH)")
            version = int(v)
        h = raw.lower()
        if not (MIN_HASH_PREFIX <= len(h) <= 64 and all(c in "0123456789abcdef" for c in h)):
            raise StoreError(f"--expect {text!r}: give VERSION:HASH or HASH, the hash as {MIN_HASH_PREFIX} to 64 "
                             "hex digits (as `evo verify` prints it)")
        return cls(h, version)

    def matches(self, version: int, hash_: str) -> bool:
        return hash_.startswith(self.hash) and (self.version is None or self.version == version)

    def __str__(self) -> str:
        return self.hash if self.version is None else f"{self.version}:{self.hash}"


@attrs.frozen
class StreamReport:
    stream: str
    events: int
    head: str  # VERSION:HASH of the last event (0:GENESIS when empty)
    finished: Optional[str] = None  # status of the RunFinished the stream ends with, if it does
    sealed: bool = False  # ... and that RunFinished carries a seal that matches
    recorded_head: Optional[str] = None  # the head the store recorded at the last append, if it did


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
    streams: tuple[StreamReport, ...] = ()  # every stream checked (up to the bad one)


@attrs.frozen
class _Problem:
    message: str
    version: Optional[int] = None
    event_id: Optional[str] = None


class _Walk:
    """Watches the records as ``verify_chain`` consumes them: counts them, and notes (without
    interrupting the chain check, which takes precedence) the first event-id, seal,
    expected-head and blob problem."""

    def __init__(self, stream: str, records: Iterator[StoredEvent], blobs: Optional[BlobStore],
                 expect: Optional[ExpectedHead]) -> None:
        self.stream, self._records, self._blobs, self._expect = stream, records, blobs, expect
        self.n = self.blobs_checked = 0
        self.last: Optional[StoredEvent] = None
        self.bad_id: Optional[StoredEvent] = None
        self.seal_problem: Optional[_Problem] = None
        self.blob_problem: Optional[_Problem] = None
        self.expect_hit: Optional[StoredEvent] = None
        self.finished: Optional[str] = None  # status of the last record, when it is a RunFinished
        self.sealed = False
        self._seal: Optional[tuple[int, str]] = None  # (version, status) of a seal the next event must respect

    def __iter__(self) -> Iterator[StoredEvent]:
        for rec in self._records:
            self.n += 1
            if self.bad_id is None and ('"event_id":' + json.dumps(rec.event_id, ensure_ascii=False)).encode() \
                    not in rec.payload:
                self.bad_id = rec
            self._after_seal(rec)
            self.finished, self.sealed = None, False
            if rec.type == RUN_FINISHED:
                self._run_finished(rec)
            if self._expect is not None and self._expect.matches(rec.version, rec.hash):
                self.expect_hit = rec
            if self._blobs is not None:
                self._check_blobs(rec)
            self.last = rec
            yield rec

    def _after_seal(self, rec: StoredEvent) -> None:
        if self._seal is None:
            return
        version, status = self._seal
        self._seal = None
        if self.seal_problem is not None:
            return
        if status == "completed":
            self.seal_problem = _Problem(f"a {rec.type} follows the seal of the completed run at #{version}: events "
                                         "were added after the run was sealed", rec.version, rec.event_id)
        elif rec.type != RUN_RESUMED:
            self.seal_problem = _Problem(f"a {rec.type} follows the seal at #{version} without a RunResumed: events "
                                         "were added after the run was sealed", rec.version, rec.event_id)

    def _run_finished(self, rec: StoredEvent) -> None:
        try:
            data = json.loads(rec.payload)
        except ValueError:
            return  # the chain check names a damaged payload
        if not isinstance(data, dict):
            return
        self.finished = str(data.get("status"))
        seal_version, seal_hash = data.get("head_version"), data.get("head_hash")
        if seal_version is None and seal_hash is None:
            return  # written before runs were sealed
        before = self.last
        want = (before.version, before.hash) if before is not None else (0, GENESIS)
        if (seal_version, seal_hash) != want:
            if self.seal_problem is None:
                self.seal_problem = _Problem(f"RunFinished is sealed at head {seal_version}:{seal_hash}, but the event "
                                             f"before it is {want[0]}:{want[1]}", rec.version, rec.event_id)
            return
        self.sealed = True
        self._seal = (rec.version, self.finished)

    def _check_blobs(self, rec: StoredEvent) -> None:
        for digest in _blob_digests(rec.payload):
            self.blobs_checked += 1
            if self.blob_problem is None:
                problem = self._blobs.check(digest)  # type: ignore[union-attr]
                if problem:
                    self.blob_problem = _Problem(problem, rec.version, rec.event_id)


def verify_store(store: Any, streams: Optional[Iterable[str]] = None, *, check_blobs: bool = True,
                 expect: Optional[ExpectedHead] = None) -> VerifyReport:
    names = list(streams) if streams is not None else store.streams()
    if expect is not None and len(names) != 1:
        raise StoreError("an expected head names one stream's head: verify one run with it")
    recorded = store.backend.recorded_heads()
    n_events = n_blobs = 0
    reports: list[StreamReport] = []

    def failed(stream: str, problem: _Problem, events: int, blobs: int) -> VerifyReport:
        where = f"stream {stream!r}: " + (f"event #{problem.version}" if problem.version is not None else "")
        if problem.event_id and problem.event_id not in problem.message:
            where += f" (event {problem.event_id})"
        msg = f"{where}: {problem.message}" if problem.version is not None else where + problem.message
        return VerifyReport(False, len(names), events, blobs, msg, stream, problem.version, problem.event_id,
                            tuple(reports))

    for name in names:
        walk = _Walk(name, store.read_stream(name), store.blobs if check_blobs else None, expect)
        try:
            verify_chain(walk)
        except ChainBreak as br:
            eid = walk.last.event_id if walk.last is not None and walk.last.version == br.version else None
            return failed(br.stream, _Problem(br.reason, br.version, eid), n_events + walk.n, n_blobs + walk.blobs_checked)
        except CorruptRecord as exc:
            return VerifyReport(False, len(names), n_events + walk.n, n_blobs + walk.blobs_checked, str(exc),
                                exc.stream or name, exc.version, exc.event_id, tuple(reports))
        events, blobs = n_events + walk.n, n_blobs + walk.blobs_checked
        if walk.bad_id is not None:
            rec = walk.bad_id
            return failed(name, _Problem(f"stored event id {rec.event_id!r} does not match the event's payload",
                                         rec.version, rec.event_id), events, blobs)
        head = StreamHead(walk.last.version, walk.last.hash) if walk.last is not None else StreamHead(0, GENESIS)
        rec_head = recorded.get(name)
        reports.append(StreamReport(name, walk.n, str(head), walk.finished, walk.sealed,
                                    None if rec_head is None else str(rec_head)))
        if walk.seal_problem is not None:
            return failed(name, walk.seal_problem, events, blobs)
        problem = _recorded_head_problem(head, _settled(store, name, head, rec_head))
        if problem is None and expect is not None:
            problem = _expect_problem(head, expect, walk.expect_hit)
        if problem is None and walk.blob_problem is not None:
            problem = walk.blob_problem
        if problem is not None:
            return failed(name, problem, events, blobs)
        n_events, n_blobs = events, blobs
    return VerifyReport(True, len(names), n_events, n_blobs, streams=tuple(reports))


def _settled(store: Any, name: str, head: StreamHead, recorded: Optional[StreamHead]) -> Optional[StreamHead]:
    """The recorded head to hold the rows read (ending at ``head``) to. On a live store a
    writer may append between reading the recorded heads and reading the rows: then, asked
    again, the rows end where the recorded head now says, at or after ``head``, and the rows
    read are a prefix the chain check vouched for (None: nothing to hold them to)."""
    for _ in range(3):
        if recorded is None or recorded == head:
            return None
        now, recorded_now = store.head(name), store.backend.recorded_heads().get(name)
        if recorded_now == now and now.version >= head.version:
            return None
        recorded = recorded_now
    return recorded


def _recorded_head_problem(head: StreamHead, recorded: Optional[StreamHead]) -> Optional[_Problem]:
    if recorded is None or recorded == head:
        return None
    if recorded.version > head.version:
        return _Problem(f"the store recorded its last append ending at #{recorded.version} ({recorded.hash}), but its "
                        f"rows end at #{head.version}: {recorded.version - head.version} event(s) were removed from "
                        "the tail behind the store's back")
    if recorded.version < head.version:
        return _Problem(f"the store recorded its last append ending at #{recorded.version}, but its rows go on to "
                        f"#{head.version}: events were added behind the store's back")
    return _Problem(f"the store recorded its last append ending at #{recorded.version} with hash {recorded.hash}, "
                    f"but the event there has hash {head.hash}: the tail was rewritten behind the store's back")


def _expect_problem(head: StreamHead, expect: ExpectedHead, hit: Optional[StoredEvent]) -> Optional[_Problem]:
    if hit is not None and hit.version == head.version:
        return None
    if hit is not None:
        return _Problem(f"the expected head {expect} is event #{hit.version}, but the stream goes on to "
                        f"#{head.version} ({head.hash}): {head.version - hit.version} event(s) were added after it")
    if expect.version is not None and expect.version > head.version:
        return _Problem(f"the stream ends at #{head.version} ({head.hash}), short of the expected head {expect}: "
                        f"{expect.version - head.version} event(s) are missing from the tail, or this is another log")
    return _Problem(f"no event of the stream has the expected head {expect} (its head is {head}): "
                    "this is not the log whose head was recorded, or it was rewritten")


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

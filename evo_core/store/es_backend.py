"""SQLite and PostgreSQL backends on the ``eventsourcing`` library's recorders.

This is the only module in EvoTrainer that imports ``eventsourcing``.

Mapping onto the library:
- a stream is an originator: ``originator_id = uuid5(STREAM_NS, stream name)``; the names
  live in a ``<table>_streams`` table written in the same transaction as a stream's
  first batch, so ``streams()`` and ``read_all()`` can name them;
- a stream version is ``originator_version``; the recorder's unique
  ``(originator_id, originator_version)`` is the optimistic-concurrency check: a writer
  with a stale expected version collides on the first version it tries to write and
  gets ``ConcurrencyConflict`` with nothing written;
- the global position is the application recorder's notification id (SQLite rowid,
  PostgreSQL ``bigserial`` under the library's table lock, so ids follow commit order);
- ``topic`` is the event type name; ``state`` is a one-line header plus the canonical
  payload bytes::

      <chain hash> <schema version> <recorded_at> <event id> <crc32 of the line so far>\\n<payload>

  The chain hash covers stream, version, type, schema version and payload; the crc
  covers the rest of the header, so a flipped byte anywhere in a row is detected.
- snapshots are the library's snapshot pattern: an aggregate recorder (table
  ``<table>_snapshots``) whose originator is ``uuid5(stream + fold fingerprint)`` and whose
  version is the stream version the state was folded up to.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
import zlib
from typing import Any, Collection, Iterator, Optional, Sequence

import structlog

from eventsourcing.persistence import IntegrityError as EsIntegrityError
from eventsourcing.persistence import PersistenceError as EsPersistenceError
from eventsourcing.persistence import StoredEvent as EsStoredEvent

from evo_events import GENESIS
from evo_core.store.blobs import BlobError, BlobStore
from evo_core.store.fastcodec import (
    CHUNK,
    FALLBACK_ERRORS,
    chain_step,
    chain_type_part,
    fast_encode_payload,
    first_path,
)
from evo_core.store.records import (
    AppendResult,
    ConcurrencyConflict,
    CorruptRecord,
    EncodedBatch,
    StoredEvent,
    StoreError,
    StoreUnavailable,
)

log = structlog.get_logger("evo.store")

STREAM_NS = uuid.UUID("6f1d3c2e-5b7a-4e08-9a51-2d0c7e3f9b11")
DEFAULT_TABLE = "evo_events"
# The one high-volume type: a partial index over everything else makes "state-relevant"
# reads (checkout, runs) skip the rollouts without decoding them.
BULK_TYPE = "evo.RolloutCompleted"
PAGE = 5000


def stream_uuid(stream: str) -> uuid.UUID:
    return uuid.uuid5(STREAM_NS, stream)


# --- row codec ----------------------------------------------------------------------------


def pack_state(hash_: str, schema_version: int, recorded_at: bytes, event_id: str, payload: bytes) -> bytes:
    head = b"%s %d %s %s" % (hash_.encode("ascii"), schema_version, recorded_at, event_id.encode("utf-8"))
    return b"%s %08x\n%s" % (head, zlib.crc32(head), payload)


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


class _RowItems(Sequence[tuple]):
    """An append's ``(type, schema_version, payload, hash, event_id)`` items, read back
    from its packed rows on access (an append's caller rarely looks at more than one)."""

    def __init__(self, stream: str, rows: list[tuple]) -> None:
        self._stream, self._rows = stream, rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):  # type: ignore[override]
        _, version, topic, state = self._rows[i]
        h, sv, _, eid, payload = unpack_state(state, self._stream, version)
        return topic, sv, payload, h, eid


def _stored(stream: str, version: int, position: int, topic: str, state: bytes) -> StoredEvent:
    h, sv, at, eid, payload = unpack_state(bytes(state), stream, version)
    return StoredEvent(stream, version, position, topic, sv, payload, h, eid, at)


# --- backend over either recorder ---------------------------------------------------------


class EsBackend:
    """The ``Backend`` protocol over an ``_EvoRecorder`` (SQLite or PostgreSQL flavour)."""

    def __init__(self, url: str, recorder: "_EvoRecorder", snapshot_recorder: Any) -> None:
        self.url = url
        self.rec = recorder
        self.snapshot_recorder = snapshot_recorder
        self._names: dict[str, str] = {}  # originator id hex -> stream name

    # writing
    def append_batch(self, batch: EncodedBatch) -> AppendResult:
        return self.append_chunks(batch.stream, batch.expected_version, len(batch), iter([batch.items()]))

    def append_chunks(self, stream: str, expected_version: int, size: int, chunks: Iterator[list[tuple]]) -> AppendResult:
        """Append one batch handed over as encoded chunks (lists of ``(type,
        schema_version, payload, hash, event_id)``), in one transaction."""
        now = time.time()
        ts = b"%.6f" % now
        oid = stream_uuid(stream)
        oid_key = self.rec.oid_param(oid)
        items: list[tuple] = []

        def rows() -> Iterator[list[tuple]]:
            crc = zlib.crc32
            v = expected_version
            for chunk in chunks:
                ids = " ".join([item[4] for item in chunk])
                if ids.count(" ") != len(chunk) - 1 or "\n" in ids:
                    bad = next(item[4] for item in chunk if " " in item[4] or "\n" in item[4])
                    raise StoreError(f"event id {bad!r} contains whitespace")
                out = []
                add = out.append
                for t, sv, p, h, eid in chunk:
                    v += 1
                    if h.__class__ is str:
                        h = h.encode("ascii")
                    head = b"%s %d %s %s" % (h, sv, ts, eid.encode("utf-8"))  # see pack_state
                    add((oid_key, v, t, b"%s %08x\n%s" % (head, crc(head), p)))
                items.extend(chunk)
                yield out

        positions = self._insert(oid, stream, expected_version, size, rows())
        return AppendResult(stream, expected_version, items, positions, float(ts))

    def append_events(self, stream: str, expected_version: int, prev_hash: str, events: Sequence[Any]) -> AppendResult:
        """The facade's hot path: encode, hash-chain and pack ``events`` in one pass (the
        same codec functions the facade uses for every other backend), then insert them in
        one transaction. One loop instead of encode-then-pack saves a third of the
        per-event Python on a 1,000-event append, and no payload outlives its row."""
        ts = b"%.6f" % time.time()
        oid = stream_uuid(stream)
        oid_key = self.rec.oid_param(oid)
        stream_part = stream.encode("utf-8") + b"\x1f"
        all_rows: list[tuple] = []

        def rows() -> Iterator[list[tuple]]:
            crc, step, fallback_errors = zlib.crc32, chain_step, FALLBACK_ERRORS
            prev, v = prev_hash.encode("ascii"), expected_version
            per_class: dict[type, tuple] = {}
            for start in range(0, len(events), CHUNK):
                out: list[tuple] = []
                add = out.append
                for ev in events[start:start + CHUNK]:
                    v += 1
                    cls = ev.__class__
                    known = per_class.get(cls)
                    if known is None:
                        known = per_class[cls] = (chain_type_part(cls), first_path(cls), cls.TYPE,
                                                  b" %d %s " % (cls.VERSION, ts))
                    part, encode, topic, mid = known
                    try:
                        payload = encode(ev)
                    except fallback_errors:
                        payload = fast_encode_payload(ev)
                    prev = step(prev, stream_part, v, part, payload)
                    eid = ev.event_id
                    if eid.__class__ is not str or (not eid.isalnum() and (" " in eid or "\n" in eid)):
                        raise StoreError(f"event id {eid!r} must be a string without whitespace")
                    head = b"%s%s%s" % (prev, mid, eid.encode("utf-8"))  # see pack_state
                    add((oid_key, v, topic, b"%s %08x\n%s" % (head, crc(head), payload)))
                all_rows.extend(out)
                yield out

        positions = self._insert(oid, stream, expected_version, len(events), rows())
        return AppendResult(stream, expected_version, _RowItems(stream, all_rows), positions, float(ts))

    def _insert(self, oid: uuid.UUID, stream: str, expected_version: int, size: int,
                rows: Iterator[list[tuple]]) -> Sequence[int]:
        try:
            positions = self.rec.insert_chunks(oid, stream, rows, new_stream=expected_version == 0, size=size)
        except EsIntegrityError:
            raise ConcurrencyConflict(stream, expected_version, self.stream_head(stream)[0]) from None
        except EsPersistenceError as exc:
            raise StoreError(f"{self.url}: append to {stream!r} failed: {exc}") from exc
        self._names[oid.hex] = stream
        return positions

    def append(self, stream: str, records, expected_version: int) -> list[StoredEvent]:
        batch = EncodedBatch(stream, expected_version, [r.type for r in records], [r.schema_version for r in records],
                             [r.payload for r in records], [r.hash for r in records], [r.event_id for r in records])
        return list(self.append_batch(batch))

    # reading
    def read_stream(self, stream: str, from_version: int = 1, to_version: Optional[int] = None,
                    types: Optional[Collection[str]] = None) -> Iterator[StoredEvent]:
        oid = stream_uuid(stream)
        gt = max(from_version, 1) - 1
        while True:
            lte = None if to_version is None else to_version
            if lte is not None and gt >= lte:
                return
            page = self.rec.select_range(oid, None if types is None else sorted(types), gt, lte, PAGE)
            for version, position, topic, state in page:
                yield _stored(stream, version, position, topic, state)
            if len(page) < PAGE:
                return
            gt = page[-1][0]

    def read_all(self, after_position: int = 0, limit: Optional[int] = None) -> Iterator[StoredEvent]:
        remaining = limit
        start = after_position
        while remaining is None or remaining > 0:
            n = PAGE if remaining is None else min(PAGE, remaining)
            page = self.rec.select_notifications(start, n, inclusive_of_start=False)
            for note in page:
                name = self._stream_name(note.originator_id)
                yield _stored(name, note.originator_version, note.id, note.topic, note.state)
            if len(page) < n:
                return
            start = page[-1].id
            if remaining is not None:
                remaining -= len(page)

    def _stream_name(self, oid: Any) -> str:
        key = oid.hex if isinstance(oid, uuid.UUID) else uuid.UUID(str(oid)).hex
        name = self._names.get(key)
        if name is None:
            self._names.update(self.rec.stream_names())
            name = self._names.get(key)
            if name is None:
                raise CorruptRecord(f"{self.url}: events of originator {key} belong to no registered stream")
        return name

    def stream_head(self, stream: str) -> tuple[int, str]:
        rows = self.rec.select_events(stream_uuid(stream), desc=True, limit=1)
        if not rows:
            return 0, GENESIS
        r = rows[0]
        return r.originator_version, unpack_state(r.state, stream, r.originator_version)[0]

    def streams(self, prefix: str = "") -> list[str]:
        names = self.rec.stream_names()
        self._names.update(names)
        return sorted(n for n in names.values() if n.startswith(prefix))

    def max_position(self) -> int:
        return self.rec.max_notification_id() or 0

    def close(self) -> None:
        for ds in {id(self.rec.datastore): self.rec.datastore,
                   id(self.snapshot_recorder.datastore): self.snapshot_recorder.datastore}.values():
            try:
                ds.close()
            except Exception:  # closing twice or after a failed open is harmless
                pass


class _EvoRecorder:
    """What ``EsBackend`` needs beyond the library's ``ApplicationRecorder`` API."""

    datastore: Any

    def oid_param(self, oid: uuid.UUID) -> Any: ...

    def insert_chunks(self, oid: uuid.UUID, stream: str, chunks: Iterator[list[tuple]], new_stream: bool,
                      size: int) -> Sequence[int]:
        """Insert every row of every chunk in one transaction; return their positions."""
        ...

    def select_range(self, oid: uuid.UUID, types: Optional[list[str]], gt: int, lte: Optional[int],
                     limit: int) -> list[tuple]:
        """(version, position, topic, state) rows of one stream, in version order."""
        ...

    def stream_names(self) -> dict[str, str]: ...


# --- snapshots (the library's aggregate recorder in its own table) -----------------------


class EsSnapshots:
    """Snapshot cache on an ``AggregateRecorder``; see ``evo_core.store.snapshots``."""

    def __init__(self, recorder: Any) -> None:
        self.rec = recorder

    @staticmethod
    def _oid(stream: str, fingerprint: str) -> uuid.UUID:
        return uuid.uuid5(STREAM_NS, f"snapshot\x1f{stream}\x1f{fingerprint}")

    def save(self, stream: str, fingerprint: str, version: int, event_hash: str, state: dict) -> None:
        data = json.dumps({"hash": event_hash, "state": state}, sort_keys=True, separators=(",", ":")).encode()
        ev = EsStoredEvent(originator_id=self._oid(stream, fingerprint), originator_version=version,
                           topic="evo.HarnessStateSnapshot", state=data)
        try:
            self.rec.insert_events([ev])
        except EsIntegrityError:
            pass  # another process cached the same version first: same answer

    def latest(self, stream: str, fingerprint: str, at_most: int) -> Optional[tuple[int, str, dict]]:
        rows = self.rec.select_events(self._oid(stream, fingerprint), lte=at_most, desc=True, limit=1)
        if not rows:
            return None
        try:
            data = json.loads(rows[0].state)
            return rows[0].originator_version, data["hash"], data["state"]
        except (ValueError, KeyError, TypeError):
            return None  # a damaged cache entry is ignored, never trusted

    def clear(self) -> int:
        return self.rec.clear_all()


# --- SQLite -------------------------------------------------------------------------------


def open_sqlite_backend(path: str, url: str, *, synchronous: str = "FULL", table: str = DEFAULT_TABLE,
                        lock_timeout: int = 30):
    """(EsBackend, EsSnapshots) over the SQLite file at ``path``."""
    import sqlite3

    from eventsourcing.sqlite import SQLiteAggregateRecorder, SQLiteApplicationRecorder, SQLiteDatastore

    class SQLiteEvoRecorder(SQLiteApplicationRecorder):
        def __init__(self, datastore: SQLiteDatastore) -> None:
            super().__init__(datastore, events_table_name=table)
            self.streams_table = f"{table}_streams"

        def construct_create_table_statements(self) -> list[str]:
            stmts = super().construct_create_table_statements()
            stmts.append(f"CREATE TABLE IF NOT EXISTS {table}_streams (originator_id TEXT PRIMARY KEY, "
                         "name TEXT NOT NULL UNIQUE)")
            stmts.append(f"CREATE INDEX IF NOT EXISTS {table}_control ON {table} (originator_id, originator_version) "
                         f"WHERE topic <> '{BULK_TYPE}'")
            return stmts

        def oid_param(self, oid: uuid.UUID) -> str:
            return oid.hex

        def insert_chunks(self, oid, stream, chunks, new_stream, size):
            # One IMMEDIATE transaction (the write lock up front, so the rowids of this batch
            # are consecutive and no reader sees part of it), one executemany per chunk.
            return self._insert(oid, stream, chunks, new_stream)

        def _insert(self, oid, stream, chunks, new_stream) -> range:
            n = 0
            with self.datastore.get_connection(commit=True) as conn:
                c = conn.cursor()
                try:
                    c.execute("BEGIN IMMEDIATE")
                    try:
                        if new_stream:
                            c.execute(f"INSERT OR IGNORE INTO {table}_streams VALUES (?, ?)", (oid.hex, stream))
                        for rows in chunks:
                            c.executemany(self.insert_events_statement, rows)
                            n += len(rows)
                        c.execute(f"SELECT MAX(rowid) FROM {table}")
                        last = c.fetchone()[0]
                        conn.commit()
                    except BaseException:
                        conn.rollback()
                        raise
                except sqlite3.IntegrityError as exc:
                    raise EsIntegrityError(exc) from exc
                except sqlite3.Error as exc:
                    raise EsPersistenceError(exc) from exc
                finally:
                    c.sqlite_cursor.close()
            return range(last - n + 1, last + 1)

        def select_range(self, oid, types, gt, lte, limit):
            sql = f"SELECT originator_version, rowid, topic, state FROM {table} WHERE originator_id = ? "
            params: list[Any] = [oid.hex]
            if types is not None:
                if BULK_TYPE not in types:  # lets SQLite use the partial index that skips rollouts
                    sql += f"AND topic <> '{BULK_TYPE}' "
                sql += f"AND topic IN ({','.join('?' * len(types))}) "
                params += types
            sql += "AND originator_version > ?"
            params.append(gt)
            if lte is not None:
                sql += " AND originator_version <= ?"
                params.append(lte)
            sql += " ORDER BY originator_version LIMIT ?"
            params.append(limit)
            with self.datastore.transaction(commit=False) as c:
                c.execute(sql, params)
                return [tuple(r) for r in c.fetchall()]

        def stream_names(self) -> dict[str, str]:
            with self.datastore.transaction(commit=False) as c:
                c.execute(f"SELECT originator_id, name FROM {table}_streams")
                return {r[0]: r[1] for r in c.fetchall()}

    class SQLiteSnapshotRecorder(SQLiteAggregateRecorder):
        def clear_all(self) -> int:
            with self.datastore.transaction(commit=True) as c:
                c.execute(f"DELETE FROM {self.events_table_name}")
                return c.sqlite_cursor.rowcount

    try:
        probe = sqlite3.connect(path, timeout=lock_timeout)
        try:
            probe.execute("PRAGMA journal_mode=WAL")
            probe.execute("PRAGMA user_version").fetchone()
        finally:
            probe.close()
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailable(f"{url}: cannot open SQLite database {path!r}: {exc}") from None

    datastore = SQLiteDatastore(path, lock_timeout=lock_timeout)
    _configure_sqlite_pool(datastore, synchronous)
    rec = SQLiteEvoRecorder(datastore)
    # Snapshots are a cache: their commits need not be fsynced. NORMAL (not OFF) keeps the
    # shared WAL safe from corruption; a snapshot lost to a power cut is simply recomputed.
    snap_store = SQLiteDatastore(path, lock_timeout=lock_timeout, pool_size=1, max_overflow=2)
    _configure_sqlite_pool(snap_store, "NORMAL" if synchronous in ("FULL", "EXTRA") else synchronous)
    snaps = SQLiteSnapshotRecorder(snap_store, events_table_name=f"{table}_snapshots")
    try:
        rec.create_table()
        snaps.create_table()
    except EsPersistenceError as exc:
        raise StoreUnavailable(f"{url}: cannot create the event tables in {path!r}: {exc}") from None
    return EsBackend(url, rec, snaps), EsSnapshots(snaps)


def _configure_sqlite_pool(datastore: Any, synchronous: str) -> None:
    """Apply the durability setting on every pooled connection the library creates."""
    pool = datastore.pool
    create = pool._create_connection

    def create_with_pragmas():
        conn = create()
        cur = conn.cursor()
        cur.execute(f"PRAGMA synchronous={synchronous}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.sqlite_cursor.close()
        return conn

    pool._create_connection = create_with_pragmas


# --- PostgreSQL ---------------------------------------------------------------------------


def open_postgres_backend(*, url: str, dbname: str, host: str, port: int, user: str, password: str,
                          schema: str = "public", table: str = DEFAULT_TABLE, connect_timeout: float = 5.0,
                          pool_size: int = 2):
    """(EsBackend, EsSnapshots, PgBlobStore) over one PostgreSQL database/schema."""
    try:
        import psycopg
        from psycopg.sql import SQL, Identifier

        from eventsourcing.postgres import PostgresAggregateRecorder, PostgresApplicationRecorder, PostgresDatastore
    except ImportError as exc:
        raise StoreUnavailable(f"PostgreSQL stores need the postgres extra ({exc.name} is missing): "
                               "pip install 'evotrainer[postgres]'") from None

    # Fail fast with one clear line (the library's pool would retry for a long time).
    # Many processes open the same store at once (workers of one run), and PostgreSQL DDL
    # (CREATE SCHEMA IF NOT EXISTS, CREATE OR REPLACE FUNCTION) fails when run concurrently,
    # so this connection holds an advisory lock until the tables exist.
    try:
        lock_conn = psycopg.connect(dbname=dbname, host=host, port=port, user=user, password=password or None,
                                    connect_timeout=max(1, int(connect_timeout)), autocommit=True)
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreUnavailable(f"cannot reach PostgreSQL at {host}:{port}/{dbname}: {first}") from None
    try:
        lock_conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"evo-store:{schema}.{table}",))
        lock_conn.execute(SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(schema)))
        return _open_postgres_locked(url=url, dbname=dbname, host=host, port=port, user=user, password=password,
                                     schema=schema, table=table, connect_timeout=connect_timeout,
                                     pool_size=pool_size)
    except psycopg.Error as exc:
        raise StoreUnavailable(f"{url}: cannot prepare the event tables: {exc}") from None
    finally:
        lock_conn.close()  # releases the advisory lock


def _open_postgres_locked(*, url: str, dbname: str, host: str, port: int, user: str, password: str, schema: str,
                          table: str, connect_timeout: float, pool_size: int):
    from psycopg.sql import SQL, Identifier

    from eventsourcing.postgres import PostgresAggregateRecorder, PostgresApplicationRecorder, PostgresDatastore

    ident = Identifier(schema)

    class PostgresEvoRecorder(PostgresApplicationRecorder):
        def __init__(self, datastore: PostgresDatastore) -> None:
            super().__init__(datastore, events_table_name=table)
            self.sql_create_statements.append(SQL(
                "CREATE TABLE IF NOT EXISTS {s}.{t} (originator_id uuid PRIMARY KEY, name text NOT NULL UNIQUE)"
            ).format(s=ident, t=Identifier(f"{table}_streams")))
            self.sql_create_statements.append(SQL(
                "CREATE INDEX IF NOT EXISTS {i} ON {s}.{t} (originator_id, originator_version) WHERE topic <> {b}"
            ).format(i=Identifier(f"{table}_control"), s=ident, t=Identifier(table), b=BULK_TYPE))
            self._pending_stream: Optional[tuple[uuid.UUID, str]] = None

        def oid_param(self, oid: uuid.UUID) -> uuid.UUID:
            return oid

        def insert_chunks(self, oid, stream, chunks, new_stream, size):
            events = [EsStoredEvent(originator_id=r[0], originator_version=r[1], topic=r[2], state=r[3])
                      for rows in chunks for r in rows]
            ids = self.insert_events(events, evo_stream=(oid, stream) if new_stream else None)
            return list(ids or [])

        def _insert_events(self, curs, stored_events, **kwargs):
            # Runs inside the library's insert transaction: the stream's name is written
            # atomically with its first batch.
            named = kwargs.get("evo_stream")
            if named is not None:
                curs.execute(SQL("INSERT INTO {s}.{t} VALUES (%s, %s) ON CONFLICT DO NOTHING").format(
                    s=ident, t=Identifier(f"{table}_streams")), named)

        def select_range(self, oid, types, gt, lte, limit):
            q = SQL("SELECT originator_version, notification_id, topic, state FROM {s}.{t} WHERE originator_id = %s"
                    ).format(s=ident, t=Identifier(table))
            params: list[Any] = [oid]
            if types is not None:
                if BULK_TYPE not in types:
                    q += SQL(" AND topic <> {b}").format(b=BULK_TYPE)
                q += SQL(" AND topic = ANY(%s)")
                params.append(list(types))
            q += SQL(" AND originator_version > %s")
            params.append(gt)
            if lte is not None:
                q += SQL(" AND originator_version <= %s")
                params.append(lte)
            q += SQL(" ORDER BY originator_version LIMIT %s")
            params.append(limit)
            with self.datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute(q, params)
                return [(r["originator_version"], r["notification_id"], r["topic"], bytes(r["state"]))
                        for r in curs.fetchall()]

        def stream_names(self) -> dict[str, str]:
            with self.datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute(SQL("SELECT originator_id, name FROM {s}.{t}").format(
                    s=ident, t=Identifier(f"{table}_streams")))
                return {r["originator_id"].hex: r["name"] for r in curs.fetchall()}

    class PostgresSnapshotRecorder(PostgresAggregateRecorder):
        def clear_all(self) -> int:
            with self.datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute(SQL("DELETE FROM {s}.{t}").format(s=ident, t=Identifier(self.events_table_name)))
                return curs.rowcount

    datastore = PostgresDatastore(dbname=dbname, host=host, port=port, user=user, password=password,
                                  connect_timeout=connect_timeout, pool_size=pool_size, max_overflow=4,
                                  schema=schema, lock_timeout=30, pool_open_timeout=connect_timeout)
    rec = PostgresEvoRecorder(datastore)
    snaps = PostgresSnapshotRecorder(datastore, events_table_name=f"{table}_snapshots")
    blobs = PgBlobStore(datastore, schema, f"{table}_blobs")
    try:
        rec.create_table()
        snaps.create_table()
        blobs.create_table()
    except EsPersistenceError as exc:
        datastore.close()
        raise StoreUnavailable(f"{url}: cannot create the event tables: {exc}") from None
    return EsBackend(url, rec, snaps), EsSnapshots(snaps), blobs


class PgBlobStore(BlobStore):
    """Content-addressed blobs in a PostgreSQL table, so every machine of a run sees them.

    Write-once (``ON CONFLICT DO NOTHING``) and verified on every read."""

    def __init__(self, datastore: Any, schema: str, table: str) -> None:
        from psycopg.sql import Identifier

        self._ds = datastore
        self._t = (Identifier(schema), Identifier(table))
        self.table = f"{schema}.{table}"

    def _sql(self, text: str):
        from psycopg.sql import SQL

        return SQL(text).format(s=self._t[0], t=self._t[1])

    def create_table(self) -> None:
        with self._ds.transaction(commit=True) as curs:
            curs.execute(self._sql("CREATE TABLE IF NOT EXISTS {s}.{t} (digest text PRIMARY KEY, "
                                   "media_type text NOT NULL, size bigint NOT NULL, data bytea NOT NULL)"))

    def put(self, data: bytes, media_type: str = "application/octet-stream"):
        from evo_events import BlobRef

        d = hashlib.sha256(data).hexdigest()
        with self._ds.transaction(commit=True) as curs:
            curs.execute(self._sql("INSERT INTO {s}.{t} VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING"),
                         (d, media_type, len(data), bytes(data)))
        return BlobRef(d, len(data), media_type)

    def get(self, ref) -> bytes:
        d = ref if isinstance(ref, str) else ref.digest
        with self._ds.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self._sql("SELECT data FROM {s}.{t} WHERE digest = %s"), (d,))
            row = curs.fetchone()
        if row is None:
            raise BlobError(f"blob {d[:12]}… is missing from {self.table}")
        data = bytes(row["data"])
        if hashlib.sha256(data).hexdigest() != d:
            raise BlobError(f"blob {d[:12]}… is corrupted: its bytes do not match its digest")
        return data

    def exists(self, digest: str) -> bool:
        with self._ds.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self._sql("SELECT 1 FROM {s}.{t} WHERE digest = %s"), (digest,))
            return curs.fetchone() is not None

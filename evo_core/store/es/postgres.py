"""The PostgreSQL recorder, its blob table, and how a PostgreSQL store is opened."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any, Callable, Optional

import psycopg
from psycopg.sql import SQL, Identifier

from eventsourcing.persistence import PersistenceError as EsPersistenceError
from eventsourcing.persistence import StoredEvent as EsStoredEvent
from eventsourcing.postgres import PostgresAggregateRecorder, PostgresApplicationRecorder, PostgresDatastore

from evo_core.store.blobs import BlobError, BlobStore
from evo_core.store.es.backend import EsBackend, check_recorded_head
from evo_core.store.es.names import BULK_TYPE, DEFAULT_TABLE, LEASE_COLUMNS
from evo_core.store.es.snapshots import EsSnapshots
from evo_core.store.records import NoEventLog, StoreUnavailable, first_line
from evo_core.store.snapshots import MemorySnapshots

PROBE_ID = uuid.UUID(int=0)  # the key of the rolled-back row that check_writable writes


class PostgresEvoRecorder(PostgresApplicationRecorder):
    """The library's application recorder plus the stream names, the recorded heads and a
    partial index that skips rollouts."""

    def __init__(self, datastore: PostgresDatastore, table: str = DEFAULT_TABLE) -> None:
        super().__init__(datastore, events_table_name=table)
        s = Identifier(datastore.schema)
        self._events = SQL("{}.{}").format(s, Identifier(table))
        self._streams = SQL("{}.{}").format(s, Identifier(f"{table}_streams"))
        self._heads = SQL("{}.{}").format(s, Identifier(f"{table}_heads"))
        self._leases = SQL("{}.{}").format(s, Identifier(f"{table}_leases"))
        self.has_heads = True  # False for a store read before any writer created the heads table
        self.has_leases = True  # likewise for the leases table
        self.sql_create_statements += [
            SQL("CREATE TABLE IF NOT EXISTS {} (originator_id uuid PRIMARY KEY, name text NOT NULL UNIQUE)"
                ).format(self._streams),
            SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} (originator_id, originator_version) WHERE topic <> {b}"
                ).format(i=Identifier(f"{table}_control"), t=self._events, b=BULK_TYPE),
            SQL("CREATE TABLE IF NOT EXISTS {} (originator_id uuid PRIMARY KEY, version bigint NOT NULL, "
                "hash text NOT NULL)").format(self._heads),
            SQL("CREATE TABLE IF NOT EXISTS {} (run_id text PRIMARY KEY, holder text NOT NULL, host text NOT NULL, "
                "pid bigint NOT NULL, pid_started double precision NOT NULL, acquired_at double precision NOT NULL, "
                "renewed_at double precision NOT NULL)").format(self._leases),
        ]

    def oid_param(self, oid: uuid.UUID) -> uuid.UUID:
        return oid

    def insert_chunks(self, oid, stream, expected_version, chunks) -> list[int]:
        events = [EsStoredEvent(originator_id=r[0], originator_version=r[1], topic=r[2], state=r[3])
                  for rows in chunks for r in rows]
        return list(self.insert_events(events, evo_append=(oid, stream, expected_version)) or [])

    def _insert_events(self, curs, stored_events, **kwargs) -> None:
        # Runs inside the library's insert transaction, before the rows go in: the
        # recorded head is checked and moved, and a new stream named, atomically with them.
        append = kwargs.get("evo_append")
        if append is None or not stored_events:
            return
        oid, stream, expected = append
        curs.execute(SQL("SELECT version FROM {} WHERE originator_id = %s FOR UPDATE").format(self._heads), (oid,))
        row = curs.fetchone()
        if row is not None and row["version"] != expected:
            curs.execute(SQL("SELECT 1 FROM {} WHERE originator_id = %s AND originator_version = %s").format(
                self._events), (oid, expected + 1))
            check_recorded_head(stream, expected, row["version"], curs.fetchone() is not None)
        if expected == 0:
            curs.execute(SQL("INSERT INTO {} VALUES (%s, %s) ON CONFLICT DO NOTHING").format(self._streams), (oid, stream))
        last = stored_events[-1]
        curs.execute(SQL("INSERT INTO {} VALUES (%s, %s, %s) ON CONFLICT (originator_id) DO UPDATE "
                         "SET version = EXCLUDED.version, hash = EXCLUDED.hash").format(self._heads),
                     (oid, last.originator_version, bytes(last.state[:64]).decode("ascii")))

    def select_range(self, oid, types, gt, lte, limit) -> list[tuple]:
        q = SQL("SELECT originator_version, notification_id, topic, state FROM {} WHERE originator_id = %s"
                ).format(self._events)
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

    def select_last(self, oid) -> Optional[tuple[int, bytes]]:
        rows = self.select_events(oid, desc=True, limit=1)
        return (rows[0].originator_version, rows[0].state) if rows else None

    def stream_names(self) -> dict[str, str]:
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(SQL("SELECT originator_id, name FROM {}").format(self._streams))
            return {r["originator_id"].hex: r["name"] for r in curs.fetchall()}

    def recorded_heads(self) -> dict[str, tuple[int, str]]:
        if not self.has_heads:
            return {}
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(SQL("SELECT s.name, h.version, h.hash FROM {h} h JOIN {s} s USING (originator_id)").format(
                h=self._heads, s=self._streams))
            return {r["name"]: (r["version"], r["hash"]) for r in curs.fetchall()}

    def lease_select(self, run_id: Optional[str]) -> list[dict[str, Any]]:
        if not self.has_leases:
            return []
        cols = SQL(", ").join(Identifier(c) for c in LEASE_COLUMNS)
        sql = SQL("SELECT {} FROM {}").format(cols, self._leases)
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            if run_id is None:
                curs.execute(sql)
            else:
                curs.execute(sql + SQL(" WHERE run_id = %s"), (run_id,))
            return [{k: r[k] for k in LEASE_COLUMNS} for r in curs.fetchall()]

    def lease_write(self, row: dict[str, Any], expect_holder: Optional[str]) -> bool:
        values = tuple(row[k] for k in LEASE_COLUMNS)
        with self.datastore.transaction(commit=True) as curs:
            if expect_holder is None:  # the primary key decides between two inserting writers
                curs.execute(SQL("INSERT INTO {} VALUES ({}) ON CONFLICT (run_id) DO NOTHING").format(
                    self._leases, SQL(", ").join(SQL("%s") for _ in values)), values)
            else:
                sets = SQL(", ").join(SQL("{} = %s").format(Identifier(k)) for k in LEASE_COLUMNS[1:])
                curs.execute(SQL("UPDATE {} SET {} WHERE run_id = %s AND holder = %s").format(self._leases, sets),
                             values[1:] + (row["run_id"], expect_holder))
            return curs.rowcount == 1

    def lease_drop(self, run_id: str, holder: str) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(SQL("DELETE FROM {} WHERE run_id = %s AND holder = %s").format(self._leases), (run_id, holder))

    def probe_write(self) -> None:
        with self.datastore.transaction(commit=False) as curs:  # always rolled back
            curs.execute(SQL("INSERT INTO {} VALUES (%s, 0, '') ON CONFLICT (originator_id) DO UPDATE "
                             "SET version = 0").format(self._heads), (PROBE_ID,))


class PostgresSnapshotRecorder(PostgresAggregateRecorder):
    def clear_all(self) -> int:
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(SQL("DELETE FROM {}.{}").format(Identifier(self.datastore.schema),
                                                          Identifier(self.events_table_name)))
            return curs.rowcount


class ReadOnlyPostgresDatastore(PostgresDatastore):
    """Every session of this pool is ``default_transaction_read_only``."""

    def after_connect_func(self) -> Callable[[Any], None]:
        setup = super().after_connect_func()

        def after_connect(conn) -> None:
            setup(conn)
            conn.cursor().execute("SET default_transaction_read_only = on")

        return after_connect


class PgBlobStore(BlobStore):
    """Content-addressed blobs in a PostgreSQL table, so every machine of a run sees them.

    Write-once (``ON CONFLICT DO NOTHING``) and verified on every read."""

    def __init__(self, datastore: Any, schema: str, table: str, *, read_only: bool = False) -> None:
        self._ds = datastore
        self._t = SQL("{}.{}").format(Identifier(schema), Identifier(table))
        self.table = f"{schema}.{table}"
        self.read_only = read_only

    def create_table(self) -> None:
        with self._ds.transaction(commit=True) as curs:
            curs.execute(SQL("CREATE TABLE IF NOT EXISTS {} (digest text PRIMARY KEY, media_type text NOT NULL, "
                             "size bigint NOT NULL, data bytea NOT NULL)").format(self._t))

    def put(self, data: bytes, media_type: str = "application/octet-stream"):
        from evo_events import BlobRef

        if self.read_only:
            raise BlobError(f"blob table {self.table} was opened read-only")
        d = hashlib.sha256(data).hexdigest()
        with self._ds.transaction(commit=True) as curs:
            curs.execute(SQL("INSERT INTO {} VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING").format(self._t),
                         (d, media_type, len(data), bytes(data)))
        return BlobRef(d, len(data), media_type)

    def get(self, ref) -> bytes:
        d = ref if isinstance(ref, str) else ref.digest
        with self._ds.get_connection() as conn, conn.cursor() as curs:
            curs.execute(SQL("SELECT data FROM {} WHERE digest = %s").format(self._t), (d,))
            row = curs.fetchone()
        if row is None:
            raise BlobError(f"blob {d[:12]}… is missing from {self.table}")
        data = bytes(row["data"])
        if hashlib.sha256(data).hexdigest() != d:
            raise BlobError(f"blob {d[:12]}… is corrupted: its bytes do not match its digest")
        return data

    def exists(self, digest: str) -> bool:
        with self._ds.get_connection() as conn, conn.cursor() as curs:
            curs.execute(SQL("SELECT 1 FROM {} WHERE digest = %s").format(self._t), (digest,))
            return curs.fetchone() is not None

    def check_writable(self) -> None:
        if self.read_only:
            raise BlobError(f"blob table {self.table} was opened read-only")
        try:
            with self._ds.transaction(commit=False) as curs:  # always rolled back
                curs.execute(SQL("INSERT INTO {} VALUES ('evo-write-probe', '', 0, '') ON CONFLICT DO NOTHING"
                                 ).format(self._t))
        except EsPersistenceError as exc:
            raise BlobError(f"blob table {self.table} cannot be written: {first_line(exc)}") from None


def open_postgres_backend(*, url: str, dbname: str, host: str, port: int, user: str, password: str,
                          schema: str = "public", table: str = DEFAULT_TABLE, connect_timeout: float = 5.0,
                          pool_size: int = 2, read_only: bool = False):
    """(EsBackend, snapshots, PgBlobStore) over one PostgreSQL database/schema."""
    # Fail fast with one clear line (the library's pool would retry for a long time).
    try:
        first_conn = psycopg.connect(dbname=dbname, host=host, port=port, user=user, password=password or None,
                                     connect_timeout=max(1, int(connect_timeout)), autocommit=True)
    except psycopg.Error as exc:
        raise StoreUnavailable(f"cannot reach PostgreSQL at {host}:{port}/{dbname}: {first_line(exc)}") from None
    opts = dict(dbname=dbname, host=host, port=port, user=user, password=password, connect_timeout=connect_timeout,
                pool_size=pool_size, max_overflow=4, schema=schema, lock_timeout=30,
                pool_open_timeout=connect_timeout)
    try:
        if read_only:
            tables = _existing_tables(first_conn, schema, table)
            if table not in tables or f"{table}_streams" not in tables:
                raise NoEventLog(f"{url}: schema {schema!r} holds no EvoTrainer event log (no {table} table)")
            datastore: PostgresDatastore = ReadOnlyPostgresDatastore(**opts)
            return _recorders(url, datastore, schema, table, read_only=True, tables=tables)
        # Many processes open the same store at once (workers of one run), and PostgreSQL DDL
        # (CREATE SCHEMA IF NOT EXISTS, CREATE OR REPLACE FUNCTION) fails when run concurrently,
        # so this connection holds an advisory lock until the tables exist.
        first_conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"evo-store:{schema}.{table}",))
        first_conn.execute(SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(schema)))
        return _recorders(url, PostgresDatastore(**opts), schema, table, read_only=False, tables=None)
    except psycopg.Error as exc:
        raise StoreUnavailable(f"{url}: cannot prepare the event tables: {exc}") from None
    finally:
        first_conn.close()  # releases the advisory lock


def _existing_tables(conn: Any, schema: str, table: str) -> set[str]:
    names = [table] + [f"{table}_{s}" for s in ("streams", "heads", "snapshots", "blobs", "leases")]
    rows = conn.execute("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = %s AND c.relname = ANY(%s)", (schema, names)).fetchall()
    return {r[0] for r in rows}


def _recorders(url: str, datastore: PostgresDatastore, schema: str, table: str, *, read_only: bool,
               tables: Optional[set[str]]):
    rec = PostgresEvoRecorder(datastore, table)
    blobs = PgBlobStore(datastore, schema, f"{table}_blobs", read_only=read_only)
    if read_only:
        assert tables is not None
        rec.has_heads = f"{table}_heads" in tables
        rec.has_leases = f"{table}_leases" in tables
        snaps: Any = MemorySnapshots()
        if f"{table}_snapshots" in tables:
            snaps = EsSnapshots(PostgresSnapshotRecorder(datastore, events_table_name=f"{table}_snapshots"),
                                read_only=True)
        return EsBackend(url, rec, read_only=True), snaps, blobs
    snap_rec = PostgresSnapshotRecorder(datastore, events_table_name=f"{table}_snapshots")
    try:
        rec.create_table()
        snap_rec.create_table()
        blobs.create_table()
    except EsPersistenceError as exc:
        datastore.close()
        raise StoreUnavailable(f"{url}: cannot create the event tables: {exc}") from None
    return EsBackend(url, rec), EsSnapshots(snap_rec), blobs

"""The SQLite recorder, and how a SQLite store is opened for writing or for reading only."""

from __future__ import annotations

import os
import sqlite3
import uuid
from contextlib import contextmanager
from typing import Any, Iterator, Optional
from urllib.parse import quote

from eventsourcing.persistence import IntegrityError as EsIntegrityError
from eventsourcing.persistence import PersistenceError as EsPersistenceError
from eventsourcing.sqlite import SQLiteAggregateRecorder, SQLiteApplicationRecorder, SQLiteDatastore

from evo_core.store.es.backend import EsBackend, check_recorded_head
from evo_core.store.es.names import BULK_TYPE, DEFAULT_TABLE, LEASE_COLUMNS
from evo_core.store.es.snapshots import EsSnapshots
from evo_core.store.records import NoEventLog, StoreUnavailable
from evo_core.store.snapshots import MemorySnapshots

PROBE_ID = "evo-write-probe"  # the key of the rolled-back row that check_writable writes


class SQLiteEvoRecorder(SQLiteApplicationRecorder):
    """The library's application recorder plus the stream names, the recorded heads, a
    partial index that skips rollouts, and one-transaction chunked inserts."""

    def __init__(self, datastore: SQLiteDatastore, table: str = DEFAULT_TABLE) -> None:
        super().__init__(datastore, events_table_name=table)
        self.streams_table = f"{table}_streams"
        self.heads_table = f"{table}_heads"
        self.leases_table = f"{table}_leases"
        self.has_heads = True  # False for a store read before any writer created the heads table
        self.has_leases = True  # likewise for the leases table

    def construct_create_table_statements(self) -> list[str]:
        t = self.events_table_name
        return super().construct_create_table_statements() + [
            f"CREATE TABLE IF NOT EXISTS {t}_streams (originator_id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
            f"CREATE INDEX IF NOT EXISTS {t}_control ON {t} (originator_id, originator_version) "
            f"WHERE topic <> '{BULK_TYPE}'",
            f"CREATE TABLE IF NOT EXISTS {t}_heads (originator_id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
            "hash TEXT NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {t}_leases (run_id TEXT PRIMARY KEY, holder TEXT NOT NULL, host TEXT NOT NULL, "
            "pid INTEGER NOT NULL, pid_started REAL NOT NULL, acquired_at REAL NOT NULL, renewed_at REAL NOT NULL)",
        ]

    def oid_param(self, oid: uuid.UUID) -> str:
        return oid.hex

    @contextmanager
    def _write(self, *, commit: bool) -> Iterator[Any]:
        """A cursor in one ``BEGIN IMMEDIATE`` transaction (the write lock up front, so the
        rowids of a batch are consecutive and no reader sees part of it), committed when
        ``commit`` and nothing raised, else rolled back; sqlite3 errors as the library's."""
        with self.datastore.get_connection(commit=True) as conn:
            c = conn.cursor()
            try:
                c.execute("BEGIN IMMEDIATE")
                try:
                    yield c
                    if commit:
                        conn.commit()
                    else:
                        conn.rollback()
                except BaseException:
                    conn.rollback()
                    raise
            except sqlite3.IntegrityError as exc:
                raise EsIntegrityError(exc) from exc
            except sqlite3.Error as exc:
                raise EsPersistenceError(exc) from exc
            finally:
                c.sqlite_cursor.close()

    def insert_chunks(self, oid, stream, expected_version, chunks) -> range:
        key, t = oid.hex, self.events_table_name
        n, last = 0, None
        with self._write(commit=True) as c:
            c.execute(f"SELECT version FROM {self.heads_table} WHERE originator_id = ?", (key,))
            recorded = c.fetchone()
            if recorded is not None and recorded[0] != expected_version:
                c.execute(f"SELECT 1 FROM {t} WHERE originator_id = ? AND originator_version = ?",
                          (key, expected_version + 1))
                check_recorded_head(stream, expected_version, recorded[0], c.fetchone() is not None)
            if expected_version == 0:
                c.execute(f"INSERT OR IGNORE INTO {self.streams_table} VALUES (?, ?)", (key, stream))
            for rows in chunks:  # one executemany per chunk
                c.executemany(self.insert_events_statement, rows)
                n += len(rows)
                last = rows[-1]
            if last is not None:
                c.execute(f"INSERT OR REPLACE INTO {self.heads_table} VALUES (?, ?, ?)",
                          (key, last[1], last[3][:64].decode("ascii")))
            c.execute(f"SELECT MAX(rowid) FROM {t}")
            last_id = c.fetchone()[0] or 0
        return range(last_id - n + 1, last_id + 1)

    def select_range(self, oid, types, gt, lte, limit) -> list[tuple]:
        t = self.events_table_name
        sql = f"SELECT originator_version, rowid, topic, state FROM {t} WHERE originator_id = ? "
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

    def select_last(self, oid) -> Optional[tuple[int, bytes]]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT originator_version, state FROM {self.events_table_name} WHERE originator_id = ? "
                      "ORDER BY originator_version DESC LIMIT 1", (oid.hex,))
            row = c.fetchone()
        return None if row is None else (row[0], row[1])

    def stream_names(self) -> dict[str, str]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT originator_id, name FROM {self.streams_table}")
            return {r[0]: r[1] for r in c.fetchall()}

    def recorded_heads(self) -> dict[str, tuple[int, str]]:
        if not self.has_heads:
            return {}
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT s.name, h.version, h.hash FROM {self.heads_table} h "
                      f"JOIN {self.streams_table} s ON s.originator_id = h.originator_id")
            return {r[0]: (r[1], r[2]) for r in c.fetchall()}

    def lease_select(self, run_id: Optional[str]) -> list[dict[str, Any]]:
        if not self.has_leases:
            return []
        sql = f"SELECT {', '.join(LEASE_COLUMNS)} FROM {self.leases_table}"
        with self.datastore.transaction(commit=False) as c:
            c.execute(sql + (" WHERE run_id = ?" if run_id is not None else ""), () if run_id is None else (run_id,))
            return [dict(zip(LEASE_COLUMNS, r)) for r in c.fetchall()]

    def lease_write(self, row: dict[str, Any], expect_holder: Optional[str]) -> bool:
        values = tuple(row[k] for k in LEASE_COLUMNS)
        with self._write(commit=True) as c:  # BEGIN IMMEDIATE: the check and the write are one step
            if expect_holder is None:
                c.execute(f"INSERT OR IGNORE INTO {self.leases_table} VALUES ({', '.join('?' * len(values))})", values)
            else:
                sets = ", ".join(f"{k} = ?" for k in LEASE_COLUMNS[1:])
                c.execute(f"UPDATE {self.leases_table} SET {sets} WHERE run_id = ? AND holder = ?",
                          values[1:] + (row["run_id"], expect_holder))
            return c.sqlite_cursor.rowcount == 1

    def lease_drop(self, run_id: str, holder: str) -> None:
        with self._write(commit=True) as c:
            c.execute(f"DELETE FROM {self.leases_table} WHERE run_id = ? AND holder = ?", (run_id, holder))

    def probe_write(self) -> None:
        with self._write(commit=False) as c:
            c.execute(f"INSERT OR REPLACE INTO {self.heads_table} VALUES (?, 0, '')", (PROBE_ID,))


class SQLiteSnapshotRecorder(SQLiteAggregateRecorder):
    def clear_all(self) -> int:
        with self.datastore.transaction(commit=True) as c:
            c.execute(f"DELETE FROM {self.events_table_name}")
            return c.sqlite_cursor.rowcount


def open_sqlite_backend(path: str, url: str, *, synchronous: str = "FULL", table: str = DEFAULT_TABLE,
                        lock_timeout: int = 30, read_only: bool = False):
    """(EsBackend, snapshots) over the SQLite file at ``path``."""
    if read_only:
        return _open_read_only(path, url, table, lock_timeout)
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
    _on_connect(datastore, [f"PRAGMA synchronous={synchronous}", "PRAGMA foreign_keys=ON"])
    rec = SQLiteEvoRecorder(datastore, table)
    # Snapshots are a cache: their commits need not be fsynced. NORMAL (not OFF) keeps the
    # shared WAL safe from corruption; a snapshot lost to a power cut is simply recomputed.
    snap_store = SQLiteDatastore(path, lock_timeout=lock_timeout, pool_size=1, max_overflow=2)
    _on_connect(snap_store, [f"PRAGMA synchronous={'NORMAL' if synchronous in ('FULL', 'EXTRA') else synchronous}",
                             "PRAGMA foreign_keys=ON"])
    snaps = SQLiteSnapshotRecorder(snap_store, events_table_name=f"{table}_snapshots")
    try:
        rec.create_table()
        snaps.create_table()
    except EsPersistenceError as exc:
        raise StoreUnavailable(f"{url}: cannot create the event tables in {path!r}: {exc}") from None
    return EsBackend(url, rec), EsSnapshots(snaps, owns_datastore=True)


def _open_read_only(path: str, url: str, table: str, lock_timeout: int):
    """Open without writing anything: no journal-mode change, no DDL, ``query_only``.

    ``mode=ro`` reads a WAL database whose ``-shm`` index exists or can be created. In a
    read-only directory after a clean close neither is true, and no writer can be active
    (it could not create its WAL either), so the file is opened ``immutable``; with a
    ``-wal`` file present that would skip its committed pages, so that case stays ``mode=ro``."""
    base = "file:" + quote(os.path.abspath(path))
    tables: Optional[set[str]] = None
    for uri in (base + "?mode=ro", base + "?mode=ro&immutable=1"):
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=lock_timeout)
            try:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            finally:
                conn.close()
            break
        except sqlite3.OperationalError as exc:
            if "immutable" in uri or os.path.exists(path + "-wal"):
                raise StoreUnavailable(f"{url}: cannot read SQLite database {path!r}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise StoreUnavailable(f"{url}: cannot open SQLite database {path!r}: {exc}") from None
    assert tables is not None
    if table not in tables or f"{table}_streams" not in tables:
        raise NoEventLog(f"{url}: {path!r} holds no EvoTrainer event log (no {table} table)")
    datastore = SQLiteDatastore(uri, lock_timeout=lock_timeout, pool_size=2, max_overflow=2)
    datastore.pool.is_journal_mode_wal = True  # the library would otherwise switch the file to WAL
    _on_connect(datastore, ["PRAGMA query_only=ON"])
    rec = SQLiteEvoRecorder(datastore, table)
    rec.has_heads = f"{table}_heads" in tables
    rec.has_leases = f"{table}_leases" in tables
    snaps: Any = MemorySnapshots()
    if f"{table}_snapshots" in tables:
        snaps = EsSnapshots(SQLiteSnapshotRecorder(datastore, events_table_name=f"{table}_snapshots"), read_only=True)
    return EsBackend(url, rec, read_only=True), snaps


def _on_connect(datastore: SQLiteDatastore, pragmas: list[str]) -> None:
    """Run ``pragmas`` on every pooled connection the library creates."""
    pool = datastore.pool
    create = pool._create_connection

    def create_with_pragmas():
        conn = create()
        cur = conn.cursor()
        for pragma in pragmas:
            cur.execute(pragma)
        cur.sqlite_cursor.close()
        return conn

    pool._create_connection = create_with_pragmas

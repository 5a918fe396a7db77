"""Shared helpers for the core tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from evo_core.testing import run_evo

ROOT = Path(__file__).resolve().parents[2]




def evo(*args: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """Run the ``evo`` CLI in a fresh process (what a user sees), from the repository root."""
    return run_evo(*args, env=env, timeout=timeout, cwd=ROOT)


def flip_byte(data: bytes, index: int) -> bytes:
    b = bytearray(data)
    b[index] ^= 0x01
    return bytes(b)


def write_sealed_run(store, *, run_id: str = "sealed", steps: int = 4, rollouts_per_step: int = 100, seed: int = 0,
                     status: str = "completed") -> str:
    """A generated run whose ``RunFinished`` is sealed, as the run loop writes it."""
    import attrs

    from evo_events import RunFinished
    from evo_core.store import run_stream, seal_run_finished
    from evo_core.synthetic import iter_run_batches

    stream, v = run_stream(run_id), store.stream_version(run_stream(run_id))
    for batch in iter_run_batches(run_id, steps=steps, rollouts_per_step=rollouts_per_step, seed=seed,
                                  blobs=store.blobs):
        if isinstance(batch[-1], RunFinished):
            fin = attrs.evolve(batch[-1], status=status)
            batch = batch[:-1] + [seal_run_finished(store, fin, expected_version=v, preceding=batch[:-1])]
        store.append(stream, batch, expected_version=v)
        v += len(batch)
    return run_id


def sql_delete_tail(url: str, stream: str, keep: int, *, also_heads: bool = False) -> None:
    """Delete a stream's rows after version ``keep`` with plain SQL, as someone with the
    database file (or a database login) could; ``also_heads`` also rewrites the head the
    store recorded, as a careful forger would."""
    from evo_core.store.es import DEFAULT_TABLE, stream_uuid

    oid = stream_uuid(stream)
    if url.startswith("sqlite:///"):
        import sqlite3

        from evo_core.store.sqlite import sqlite_path

        conn = sqlite3.connect(sqlite_path(url)[0])
        conn.execute(f"DELETE FROM {DEFAULT_TABLE} WHERE originator_id = ? AND originator_version > ?", (oid.hex, keep))
        if also_heads:
            h = conn.execute(f"SELECT substr(state, 1, 64) FROM {DEFAULT_TABLE} WHERE originator_id = ? AND "
                             "originator_version = ?", (oid.hex, keep)).fetchone()[0]
            conn.execute(f"UPDATE {DEFAULT_TABLE}_heads SET version = ?, hash = ? WHERE originator_id = ?",
                         (keep, bytes(h).decode(), oid.hex))
        conn.commit()
        conn.close()
        return
    import psycopg

    from evo_core.store.postgres import parse_postgres_url

    cfg = parse_postgres_url(url)
    t = f'"{cfg["schema"]}".{DEFAULT_TABLE}'
    with psycopg.connect(dbname=cfg["dbname"], host=cfg["host"], port=cfg["port"], user=cfg["user"],
                         autocommit=True) as conn:
        conn.execute(f"DELETE FROM {t} WHERE originator_id = %s AND originator_version > %s", (oid, keep))
        if also_heads:
            h = conn.execute(f"SELECT substr(state, 1, 64) FROM {t} WHERE originator_id = %s AND originator_version = %s",
                             (oid, keep)).fetchone()[0]
            conn.execute(f"UPDATE {t}_heads SET version = %s, hash = %s WHERE originator_id = %s",
                         (keep, bytes(h).decode(), oid))

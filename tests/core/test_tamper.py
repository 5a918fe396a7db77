"""A flipped stored byte — in an event row (SQLite, PostgreSQL) or a blob file — is caught
by ``evo verify``, which exits 1 naming the first bad event."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from evo_core.store import open_store, run_stream
from evo_core.store.es import DEFAULT_TABLE
from evo_core.synthetic import generate_run
from tests.core.helpers import evo, flip_byte


def _sqlite_flip(path: Path, version: int, where: str) -> str:
    conn = sqlite3.connect(path)
    rowid, state = conn.execute(f"SELECT rowid, state FROM {DEFAULT_TABLE} WHERE originator_version = ?",
                                (version,)).fetchone()
    nl = state.index(b"\n")
    idx = {"payload": nl + 20, "hash": 3, "time": 70, "event_id": nl - 12}[where]
    conn.execute(f"UPDATE {DEFAULT_TABLE} SET state = ? WHERE rowid = ?", (flip_byte(state, idx), rowid))
    conn.commit()
    conn.close()
    return state[nl + 1:].split(b'"event_id":"')[1][:32].decode()


@pytest.fixture
def sqlite_run(tmp_path):
    url = f"sqlite:///{tmp_path}/s/evo.sqlite"
    st = open_store(url)
    run_id = generate_run(st, steps=3, rollouts_per_step=4, trajectories=True)
    st.close()
    return url, tmp_path / "s" / "evo.sqlite", run_id


@pytest.mark.parametrize("where", ["payload", "hash", "time", "event_id"])
def test_sqlite_flipped_byte_detected(sqlite_run, where):
    url, path, run_id = sqlite_run
    _sqlite_flip(path, 7, where)
    rep = open_store(url).verify()
    assert not rep.ok and rep.bad_version == 7 and rep.bad_stream == run_stream(run_id), rep
    assert "#7" in rep.first_bad


def test_evo_verify_cli_names_the_bad_event(sqlite_run):
    url, path, run_id = sqlite_run
    assert evo("verify", "--store", url).returncode == 0
    _sqlite_flip(path, 9, "payload")
    r = evo("verify", "--store", url)
    assert r.returncode == 1, r.stderr
    assert "event #9" in r.stderr and "run-synthetic-0" in r.stderr and "Traceback" not in r.stderr
    assert evo("verify", run_id, "--store", url).returncode == 1


def test_flipped_blob_byte_detected(sqlite_run):
    url, path, run_id = sqlite_run
    blob = next(p for p in (path.parent / "blobs").rglob("*") if p.is_file())
    digest = blob.parent.name + blob.name
    os.chmod(blob, 0o644)
    blob.write_bytes(flip_byte(blob.read_bytes(), 5))
    r = evo("verify", "--store", url)
    assert r.returncode == 1
    assert digest[:12] in r.stderr and "corrupted" in r.stderr
    # the chain alone is still intact
    assert open_store(url).verify(check_blobs=False).ok


@pytest.mark.postgres
def test_postgres_flipped_byte_detected(pg_url):
    import psycopg

    from tests.core.conftest import pg_base_url

    st = open_store(pg_url)
    run_id = generate_run(st, steps=2, rollouts_per_step=4)
    st.close()
    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(pg_base_url(), autocommit=True) as conn:
        nid, state = conn.execute(
            f'SELECT notification_id, state FROM "{schema}".{DEFAULT_TABLE} WHERE originator_version = 5').fetchone()
        state = bytes(state)
        conn.execute(f'UPDATE "{schema}".{DEFAULT_TABLE} SET state = %s WHERE notification_id = %s',
                     (flip_byte(state, state.index(b"\n") + 30), nid))
    r = evo("verify", "--store", pg_url)
    assert r.returncode == 1 and "event #5" in r.stderr and f"run-{run_id}" in r.stderr


def test_corrupted_header_and_unknown_type_are_clear(sqlite_run):
    url, path, run_id = sqlite_run
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE {DEFAULT_TABLE} SET state = ? WHERE originator_version = 4", (b"garbage",))
    conn.execute(f"UPDATE {DEFAULT_TABLE} SET topic = 'acme.Mystery' WHERE originator_version = 6")
    conn.commit()
    conn.close()
    rep = open_store(url).verify()
    assert not rep.ok and rep.bad_version == 4 and "corrupted" in rep.first_bad
    r = evo("log", run_id, "--store", url)
    assert r.returncode != 0 and "event #4" in r.stderr and "corrupted" in r.stderr and "Traceback" not in r.stderr
    conn = sqlite3.connect(path)
    conn.execute(f"DELETE FROM {DEFAULT_TABLE} WHERE originator_version = 4")
    conn.commit()
    conn.close()
    r = evo("log", run_id, "-t", "RolloutCompleted,StepCompleted", "-n", "3", "--store", url)
    assert r.returncode == 0, r.stderr
    r = evo("log", run_id, "--store", url)
    assert r.returncode != 0 and "unknown event type 'acme.Mystery'" in r.stderr and "Traceback" not in r.stderr
    st = open_store(url)
    rec = next(iter(st.read_stream(run_stream(run_id), from_version=6, to_version=6)))
    with pytest.raises(LookupError, match="unknown event type 'acme.Mystery'"):
        rec.decode()

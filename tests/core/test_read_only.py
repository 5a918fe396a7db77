"""A store that cannot be written: the reading commands still read it, and a writer finds
out with one line before any training (``EventStore.check_writable``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evo_core.testing import EVO_MAIN

from evo_events import StepCompleted
from evo_core.store import BlobError, StoreError, open_store, run_stream
from evo_core.synthetic import generate_run
from tests.core.helpers import ROOT, write_sealed_run



def _no_write_access() -> list[str]:
    """A command prefix under which file modes are obeyed: nothing for an ordinary user;
    for root, ``setpriv`` without the capabilities that override them."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: file modes cannot be made to bind")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}"]


def _as_reader(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EVO_NO_PLUGIN_COMMANDS": "1"}
    return subprocess.run([*_no_write_access(), *argv], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)


def _evo_as_reader(*args: str) -> subprocess.CompletedProcess:
    return _as_reader(sys.executable, "-c", EVO_MAIN, *args)


@pytest.fixture
def frozen(tmp_path):
    """Make a directory tree read-only (files 0444, directories 0555); restored afterwards."""
    frozen_dirs: list[Path] = []

    def freeze(d: Path) -> None:
        for p in sorted(d.rglob("*"), reverse=True):
            p.chmod(0o555 if p.is_dir() else 0o444)
        d.chmod(0o555)
        frozen_dirs.append(d)

    yield freeze
    for d in frozen_dirs:
        d.chmod(0o755)
        for p in d.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)


def _listing(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(d.rglob("*"))}


@pytest.mark.parametrize("writer_left_wal", [False, True], ids=["closed", "wal-left-behind"])
def test_reading_commands_work_in_a_read_only_directory(tmp_path, frozen, writer_left_wal):
    d = tmp_path / "store"
    url = f"sqlite:///{d}/evo.sqlite"
    st = open_store(url)
    run_id = generate_run(st, steps=10, rollouts_per_step=4, trajectories=True)
    st.close()
    if writer_left_wal:  # a writer killed mid-run leaves its -wal and -shm behind
        code = ("import os; from evo_core.store import open_store; from evo_events import StepCompleted; "
                f"s = open_store({url!r}); s.append('run-other', [StepCompleted(run_id='other', step=1, "
                "policy_version=1, harness_version=0, metrics={})], expected_version=0); os._exit(0)")
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
        assert (d / "evo.sqlite-wal").exists()
    frozen(d)
    before = _listing(d)
    for args in (["verify"], ["runs"], ["log", run_id, "-n", "3"], ["audit", run_id], ["checkout", run_id],
                 ["verify", run_id, "--json"]):
        r = _evo_as_reader(*args, "--store", url)
        assert r.returncode == 0, (args, r.stderr)
        assert "Traceback" not in r.stderr
    r = _evo_as_reader("runs", "--store", url, "--json")
    assert run_id in r.stdout and ("other" in r.stdout) == writer_left_wal  # the WAL's commits are read
    assert _listing(d) == before  # nothing was created or changed


def test_check_writable_fails_fast_where_opening_succeeds(tmp_path, frozen):
    """A read-only database file in a writable directory opens fine (SQLite falls back to
    reading) and used to fail only at the first append, after SFT."""
    url = f"sqlite:///{tmp_path}/s/evo.sqlite"
    open_store(url).close()
    (tmp_path / "s" / "evo.sqlite").chmod(0o444)
    code = ("from evo_core.store import open_store, StoreError\n"
            f"s = open_store({url!r}); print('opened')\n"
            "try:\n    s.check_writable()\nexcept StoreError as exc:\n    print('refused:', exc)\n")
    r = _as_reader(sys.executable, "-c", code)
    assert r.returncode == 0, r.stderr
    opened, refused = r.stdout.strip().splitlines()
    assert opened == "opened" and refused.startswith("refused: ") and "cannot be written" in refused
    assert "readonly" in refused


def test_check_writable_names_an_unwritable_blob_directory(tmp_path, frozen):
    url = f"sqlite:///{tmp_path}/s/evo.sqlite"
    open_store(url).close()
    frozen(tmp_path / "s" / "blobs")
    code = ("from evo_core.store import open_store, StoreError\n"
            f"s = open_store({url!r})\n"
            "try:\n    s.check_writable()\nexcept StoreError as exc:\n    print('refused:', exc)\n")
    r = _as_reader(sys.executable, "-c", code)
    assert r.returncode == 0 and r.stdout.startswith("refused:") and "cannot write blobs under" in r.stdout, r


def test_check_writable_passes_and_leaves_nothing_behind(store):
    store.append("run-a", [StepCompleted(run_id="a", step=1, policy_version=1, harness_version=0, metrics={})])
    heads, pos = store.backend.recorded_heads(), store.backend.max_position()
    store.check_writable()
    assert store.backend.recorded_heads() == heads and store.backend.max_position() == pos
    assert store.streams() == ["run-a"] and store.verify().ok
    root = getattr(store.blobs, "root", None)
    if root is not None:
        assert not any(root.iterdir())  # the probe file is gone


def test_a_read_only_open_refuses_writes_and_changes_nothing(durable_url):
    st = open_store(durable_url)
    run_id = write_sealed_run(st, steps=2, rollouts_per_step=3)
    st.close()
    db = Path(durable_url[len("sqlite:///"):]) if durable_url.startswith("sqlite") else None
    digest = hashlib.sha256(db.read_bytes()).hexdigest() if db else None
    ro = open_store(durable_url, read_only=True)
    assert ro.read_only and ro.runs() == [run_id] and ro.verify().ok
    with pytest.raises(StoreError, match="read-only"):
        ro.append(run_stream(run_id), [StepCompleted(run_id=run_id, step=9, policy_version=9, harness_version=0,
                                                     metrics={})])
    with pytest.raises(StoreError, match="read-only"):
        ro.check_writable()
    with pytest.raises(BlobError, match="read-only"):
        ro.blobs.put(b"x")
    ro.snapshots.save(run_stream(run_id), "fp", 1, "0" * 64, {})  # a cache: silently kept nowhere
    with pytest.raises(StoreError, match="read-only"):
        ro.snapshots.clear()
    ro.close()
    if db is not None:
        assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert open_store(durable_url).verify().ok


def test_read_only_open_of_what_is_not_a_store(tmp_path):
    with pytest.raises(StoreError, match="no store at"):
        open_store(f"sqlite:///{tmp_path}/none.sqlite", read_only=True)
    assert not (tmp_path / "none.sqlite").exists()
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(StoreError, match="holds no EvoTrainer event log"):
        open_store(f"sqlite:///{other}", read_only=True)
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="cannot"):
        open_store(f"sqlite:///{garbage}", read_only=True)


def test_a_store_written_before_heads_were_recorded_still_reads(tmp_path):
    url = f"sqlite:///{tmp_path}/old.sqlite"
    st = open_store(url)
    generate_run(st, steps=2, rollouts_per_step=2)
    st.close()
    conn = sqlite3.connect(tmp_path / "old.sqlite")
    conn.execute("DROP TABLE evo_events_heads")
    conn.commit()
    conn.close()
    rep = open_store(url, read_only=True).verify()
    assert rep.ok and rep.streams[0].recorded_head is None
    st = open_store(url)  # a writer brings the table back, and records heads from its next append on
    st.append("run-synthetic-0", [StepCompleted(run_id="synthetic-0", step=3, policy_version=3, harness_version=0,
                                                metrics={})])
    rep = st.verify()
    assert rep.ok and rep.streams[0].recorded_head == rep.streams[0].head

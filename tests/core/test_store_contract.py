"""The store facade behaves the same on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import attrs
import pytest

from evo_events import GENESIS, RunStarted, StepCompleted, chain_hash
from evo_core.store import ConcurrencyConflict, StoreError, open_store, run_stream
from evo_core.synthetic import generate_run


def _steps(run_id: str, n: int, start: int = 1):
    return [StepCompleted(run_id=run_id, step=i, policy_version=i, harness_version=0, metrics={"loss": 0.5 / i})
            for i in range(start, start + n)]


def test_append_read_positions_and_versions(store):
    out = store.append("run-a", _steps("a", 3), expected_version=0)
    assert [r.version for r in out] == [1, 2, 3]
    store.append("run-b", _steps("b", 2), expected_version=0)
    out2 = store.append("run-a", _steps("a", 2, 4), expected_version=3)
    assert [r.version for r in out2] == [4, 5]
    assert out2[-1].position > out[-1].position
    recs = list(store.read_stream("run-a"))
    assert [r.version for r in recs] == [1, 2, 3, 4, 5]
    assert [e.step for e in store.events("run-a")] == [1, 2, 3, 4, 5]
    assert [r.version for r in store.read_stream("run-a", from_version=2, to_version=4)] == [2, 3, 4]
    # the stored hash is the chain over the stored bytes
    r1 = recs[0]
    assert r1.hash == chain_hash(GENESIS, "run-a", 1, r1.type, r1.schema_version, r1.payload)
    # global order: every event once, positions increasing, stream names recovered
    allr = list(store.read_all())
    assert len(allr) == 7
    assert [r.position for r in allr] == sorted(r.position for r in allr)
    assert {r.stream for r in allr} == {"run-a", "run-b"}
    assert [r.stream for r in store.read_all(after_position=allr[2].position, limit=2)] == [allr[3].stream, allr[4].stream]
    assert store.streams() == ["run-a", "run-b"]
    assert store.runs() == ["a", "b"]
    assert store.stream_version("run-a") == 5 and store.stream_version("nope") == 0
    assert store.backend.max_position() == allr[-1].position


def test_type_filtered_read(store):
    run_id = generate_run(store, steps=6, rollouts_per_step=4)
    stream = run_stream(run_id)
    want = [r.version for r in store.read_stream(stream) if r.type in ("evo.Promoted", "evo.StepCompleted")]
    got = [r.version for r in store.read_stream(stream, types={"evo.Promoted", "evo.StepCompleted"})]
    assert got == want and len(got) == 7
    # with the bulk type included, the other query path
    got = [r.version for r in store.read_stream(stream, types={"evo.RolloutCompleted"}, to_version=10)]
    assert got == [r.version for r in store.read_stream(stream, to_version=10) if r.type == "evo.RolloutCompleted"]


def test_stale_expected_version_conflicts_and_writes_nothing(store):
    store.append("run-a", _steps("a", 2), expected_version=0)
    with pytest.raises(ConcurrencyConflict) as ei:
        store.append("run-a", _steps("a", 3, 3), expected_version=1)
    assert "expected version 1" in str(ei.value) and "at 2" in str(ei.value)
    assert store.stream_version("run-a") == 2
    with pytest.raises(ConcurrencyConflict):
        store.append("run-new", _steps("n", 1), expected_version=3)
    store.append("run-a", _steps("a", 1, 3))  # None: whatever the head is
    assert store.stream_version("run-a") == 3


def test_blobs_roundtrip_and_write_once(store):
    ref = store.blobs.put(b"trajectory bytes", "text/plain")
    assert store.blobs.get(ref) == b"trajectory bytes"
    assert store.blobs.put(b"trajectory bytes", "text/plain") == ref
    assert store.blobs.exists(ref.digest) and store.blobs.check(ref.digest) is None
    assert "missing" in store.blobs.check("0" * 64)


def test_verify_clean_run_with_blobs(store):
    generate_run(store, steps=3, rollouts_per_step=4, trajectories=True)
    rep = store.verify()
    assert rep.ok and rep.events_checked > 10 and rep.blobs_checked == 12


def test_bad_urls_are_one_clear_line(tmp_path):
    with pytest.raises(StoreError, match="unsupported store URL"):
        open_store("mysql://x")
    with pytest.raises(StoreError, match="unknown option"):
        open_store(f"sqlite:///{tmp_path}/a.sqlite?journal=off")
    with pytest.raises(StoreError, match="synchronous must be"):
        open_store(f"sqlite:///{tmp_path}/a.sqlite?synchronous=sometimes")
    (tmp_path / "dir.sqlite").mkdir()
    with pytest.raises(StoreError, match="is a directory"):
        open_store(f"sqlite:///{tmp_path}/dir.sqlite")
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="cannot open SQLite database"):
        open_store(f"sqlite:///{garbage}")


def test_unreachable_postgres_is_a_clear_error():
    with pytest.raises(StoreError, match=r"cannot reach PostgreSQL at 127\.0\.0\.1:1/"):
        open_store("postgresql://postgres:secret@127.0.0.1:1/test?connect_timeout=1")


def test_sqlite_durability_setting_applied(tmp_path):
    s = open_store(f"sqlite:///{tmp_path}/d.sqlite")
    s.append("run-a", _steps("a", 1), expected_version=0)
    ds = s.backend.rec.datastore
    with ds.transaction(commit=False) as c:
        c.execute("PRAGMA synchronous")
        assert c.fetchone()[0] == 2  # FULL
        c.execute("PRAGMA journal_mode")
        assert c.fetchone()[0] == "wal"
    s.close()


def test_reopen_sees_the_same_log(tmp_path):
    url = f"sqlite:///{tmp_path}/r.sqlite"
    s = open_store(url)
    s.append("run-a", [RunStarted(run_id="a", config={"run": {"name": "x"}}, config_hash="h", seed=1,
                                  harness_mode="fixed", code_version="t", started_at="2026-01-01T00:00:00Z")],
             expected_version=0)
    s.close()
    s2 = open_store(url)
    ev = next(iter(s2.events("run-a")))
    assert isinstance(ev, RunStarted) and ev.config == {"run": {"name": "x"}}
    assert s2.runs() == ["a"]


def test_a_big_sqlite_append_is_one_transaction(tmp_path):
    from evo_events import CodecError

    store = open_store(f"sqlite:///{tmp_path}/p.sqlite")
    run_id = generate_run(store, steps=2, rollouts_per_step=700)
    stream = run_stream(run_id)
    n = store.stream_version(stream)
    assert store.verify().ok and [r.version for r in store.read_stream(stream)] == list(range(1, n + 1))
    # an event that cannot be encoded, deep in a big batch: nothing of the batch is written
    bad = _steps("a", 900)
    bad[800] = StepCompleted(run_id="a", step=1, policy_version=1, harness_version=0, metrics={"x": object()})
    with pytest.raises(CodecError):
        store.append(stream, bad, expected_version=n)
    assert store.stream_version(stream) == n
    # a stale writer of a big batch, past the facade's check: the insert collides, nothing is written
    head = store.head(stream)
    with pytest.raises(ConcurrencyConflict):
        store.backend.append(stream, n - 1, head.hash, _steps("a", 900))
    assert store.stream_version(stream) == n and store.verify().ok
    store.close()


def test_only_the_es_package_imports_eventsourcing():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    pat = re.compile(r"^\s*(from|import)\s+eventsourcing\b", re.M)
    hits = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                  if not {".venv", "site-packages", "build"} & set(p.parts)  # build/: `pip wheel .`'s copy
                  and pat.search(p.read_text(errors="replace")))
    assert hits and all(h.startswith("evo_core/store/es/") for h in hits), hits
    # naming a table (what tests and benchmarks import) does not load the library
    import subprocess
    import sys

    code = "import sys, evo_core.store, evo_core.store.es; print('eventsourcing' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=root).stdout.strip() == "False"


def test_follow_sees_new_events_in_global_order(store):
    store.append("run-a", _steps("a", 2), expected_version=0)
    start = store.backend.max_position()
    store.append("run-b", _steps("b", 2), expected_version=0)
    store.append("run-a", _steps("a", 1, 3), expected_version=2)
    seen = []
    polls = iter(range(3))
    for rec in store.follow(start, poll_interval=0.01, stop=lambda: next(polls, None) is None):
        seen.append((rec.stream, rec.version))
    assert seen == [("run-b", 1), ("run-b", 2), ("run-a", 3)]
    only_a = [r.version for r in store.follow(0, poll_interval=0.01, stop=lambda: True, stream="run-a")]
    assert only_a == [1, 2, 3]


@pytest.mark.parametrize("bad_id", ["has space", "two\nlines", 17])
def test_an_event_id_the_row_header_cannot_hold_is_refused_and_nothing_written(store_url, bad_id):
    store = open_store(store_url)  # every backend stores the same packed rows
    store.append("run-a", _steps("a", 2), expected_version=0)
    batch = _steps("a", 3, 3)
    batch[1] = attrs.evolve(batch[1], event_id=bad_id)
    with pytest.raises(StoreError, match="event id"):
        store.append("run-a", batch, expected_version=2)
    assert store.stream_version("run-a") == 2 and store.verify().ok
    store.close()


def test_a_stale_writer_past_the_facade_check_conflicts_and_writes_nothing(store):
    """Two writers read the same head; the second one's append reaches the backend after the
    first committed (the recorded head and the rows' unique key both see it)."""
    store.append("run-a", _steps("a", 3), expected_version=0)
    stale = store.head("run-a")
    store.append("run-a", _steps("a", 2, 4), expected_version=3)
    with pytest.raises(ConcurrencyConflict):
        store.backend.append("run-a", stale.version, stale.hash, _steps("a", 2, 4))
    assert store.stream_version("run-a") == 5 and store.verify().ok
    assert store.backend.recorded_heads()["run-a"] == store.head("run-a")

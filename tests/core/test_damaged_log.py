"""A damaged log names the damage: one flipped payload byte makes every reading command say
which event cannot be decoded and suggest `evo verify`, in one line, exit 2."""

from __future__ import annotations

import sqlite3

import pytest

from evo_core.store import CorruptRecord, open_store, run_stream
from evo_core.store.es import DEFAULT_TABLE
from evo_core.synthetic import generate_run
from tests.core.helpers import evo

VICTIM = 150  # a RolloutCompleted well inside the run (before its first promotion's window ends)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    path = tmp_path_factory.mktemp("damaged") / "evo.sqlite"
    url = f"sqlite:///{path}"
    st = open_store(url)
    run_id = generate_run(st, steps=20, rollouts_per_step=8)
    rec = next(iter(st.read_stream(run_stream(run_id), from_version=VICTIM, to_version=VICTIM)))
    assert rec.type == "evo.RolloutCompleted"
    st.close()
    conn = sqlite3.connect(path)
    rowid, state = conn.execute(f"SELECT rowid, state FROM {DEFAULT_TABLE} WHERE originator_version = ?",
                                (VICTIM,)).fetchone()
    body = state.index(b"\n") + 1
    flipped = bytearray(state)
    flipped[body + 1] ^= 0x01  # the payload's first quote: '{"' becomes '{#'
    conn.execute(f"UPDATE {DEFAULT_TABLE} SET state = ? WHERE rowid = ?", (bytes(flipped), rowid))
    conn.commit()
    conn.close()
    return url, run_id


def test_the_record_names_itself(damaged):
    url, run_id = damaged
    st = open_store(url, read_only=True)
    rec = next(iter(st.read_stream(run_stream(run_id), from_version=VICTIM, to_version=VICTIM)))
    for read in (rec.decode, rec.data):
        with pytest.raises(CorruptRecord) as ei:
            read()
        assert ei.value.version == VICTIM and ei.value.stream == run_stream(run_id)
        assert f"event #{VICTIM}" in ei.value.user_line() and f"evo verify {run_id}" in ei.value.user_line()
    st.close()


@pytest.mark.parametrize("cmd", [
    ["audit", "RUN"], ["audit", "RUN", "--json"], ["report", "RUN", "-o", "OUT"], ["log", "RUN"],
    ["replay", "RUN", "--no-write"], ["tail", "RUN", "--no-follow", "-n", "100000"], ["skills"],
])
def test_every_reading_command_names_the_event(damaged, tmp_path, cmd):
    url, run_id = damaged
    args = [run_id if a == "RUN" else str(tmp_path / "out") if a == "OUT" else a for a in cmd]
    r = evo(*args, "--store", url)
    # (replay logs a warning first: the synthetic run names a diagnostic that is not installed)
    err = [x for x in r.stderr.splitlines() if x.startswith("error")]
    assert r.returncode == 2, (cmd, r.stderr[-2000:])
    assert len(err) == 1 and "Traceback" not in r.stderr and "JSONDecodeError" not in err[0], err
    assert f"event #{VICTIM}" in err[0] and "damaged" in err[0] and f"evo verify {run_id}" in err[0], err


def test_verify_agrees(damaged):
    url, run_id = damaged
    r = evo("verify", run_id, "--store", url, "--no-blobs")
    assert r.returncode == 1 and f"#{VICTIM}" in r.stderr

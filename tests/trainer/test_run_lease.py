"""One writer per run, across processes: a second `evo run --resume` is refused at once and
loses nothing; a killed holder's lease is taken over at once; `evo runs` says interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from evo_core.store import open_store, run_stream
from evo_core.store.lease import read_lease
from tests.core.conftest import pg_url  # noqa: F401  (the fixture)
from tests.core.helpers import evo

from .test_loop import TOML, _steps

HOLD = """
import sys, time
from evo_core.store import open_store
from evo_core.store.lease import RunLease
st = open_store(sys.argv[1])
RunLease(st, "held-run").acquire()
print("held", flush=True)
time.sleep(600)
"""

TAKE = """
import sys
from evo_core.store import open_store
from evo_core.store.lease import LeaseHeld, RunLease
st = open_store(sys.argv[1])
try:
    lease = RunLease(st, "held-run", timeout=3600).acquire()
except LeaseHeld as exc:
    print("refused:", exc)
else:
    print("took over:", lease.took_over)
"""


def _py(code: str, url: str, **kw):
    return subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, timeout=60, **kw)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/evo.sqlite"
    return request.getfixturevalue("pg_url")


def test_two_processes_one_lease(url):
    open_store(url).close()  # create the tables before two processes race to
    holder = subprocess.Popen([sys.executable, "-c", HOLD, url], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = _py(TAKE, url)
        assert r.stdout.startswith("refused:") and f"process {holder.pid}" in r.stdout, r.stdout + r.stderr
        holder.send_signal(signal.SIGKILL)  # dies holding it: no release
        holder.wait()
        r = _py(TAKE, url)  # the timeout is an hour: only the dead pid lets it in
        assert r.stdout.startswith("took over:") and f"process {holder.pid}" in r.stdout and "gone" in r.stdout, \
            r.stdout + r.stderr
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def _runs(url: str) -> dict[str, str]:
    r = evo("runs", "--store", url, "--json")
    assert r.returncode == 0, r.stderr
    return {row["run_id"]: row["status"] for row in json.loads(r.stdout)}


def test_a_second_resume_is_refused_at_once_and_nothing_is_lost(tmp_path):
    steps = 400  # never reached: the run is killed, then stopped
    cfg = tmp_path / "lease.toml"
    cfg.write_text(TOML.format(steps=steps, ck=tmp_path / "ck"))
    url = f"sqlite:///{tmp_path / 'log.sqlite'}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "EVO_NO_PLUGIN_COMMANDS": "1"}
    cli = [sys.executable, "-c", "from evo_core.cli.app import main; main()"]
    first = subprocess.Popen([*cli, "run", str(cfg), "--store", url, "--no-progress"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run_id, committed = None, 0
    try:
        deadline = time.time() + 240
        while time.time() < deadline and first.poll() is None and committed < 3:
            time.sleep(0.1)
            st = open_store(url, read_only=True) if (tmp_path / "log.sqlite").exists() else None
            if st is not None:
                try:
                    if st.runs():
                        run_id = st.runs()[0]
                        committed = len(_steps(st.events(run_stream(run_id))))
                except Exception:  # the tables are being created
                    pass
                finally:
                    st.close()
        assert run_id and committed >= 3, first.stderr.read().decode()[-2000:] if first.poll() is not None else ""
        assert _runs(url)[run_id] == "running"
        # the second writer: refused before it builds a model or touches the checkpoints
        second = subprocess.run([*cli, "run", str(cfg), "--store", url, "--resume", "kill@last", "--no-progress"],
                                env=env, capture_output=True, text=True, timeout=120)
        err = [x for x in second.stderr.splitlines() if x.strip()]
        assert second.returncode == 2, second.stderr[-2000:]
        assert len(err) == 1 and "being written by process" in err[0] and str(first.pid) in err[0], err
        assert first.poll() is None  # the first one never noticed
        first.send_signal(signal.SIGKILL)
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    st = open_store(url, read_only=True)
    assert read_lease(st, run_id) is not None  # a killed holder cannot release …
    st.close()
    assert _runs(url)[run_id] == "interrupted"  # … but it is gone, and `evo runs` says so
    st = open_store(url, read_only=True)
    killed_at = len(_steps(st.events(run_stream(run_id))))
    st.close()
    # the next resume takes the dead holder's lease over at once, goes on, and SIGTERM stops it (143)
    third = subprocess.Popen([*cli, "run", str(cfg), "--store", url, "--resume", run_id, "--no-progress"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and third.poll() is None:
            time.sleep(0.1)
            st = open_store(url, read_only=True)
            try:
                if len(_steps(st.events(run_stream(run_id)))) >= killed_at + 2:
                    break
            finally:
                st.close()
        third.send_signal(signal.SIGTERM)
        err3 = third.communicate(timeout=120)[1].decode()
    finally:
        if third.poll() is None:
            third.kill()
            third.wait()
    assert third.returncode == 143, err3[-2000:]
    assert "run lease taken over" in err3
    from evo_events import RunFinished, RunResumed

    st = open_store(url, read_only=True)
    try:
        events = list(st.events(run_stream(run_id)))
        done = _steps(events)
        assert done == list(range(1, len(done) + 1)) and len(done) >= killed_at + 2  # every step exactly once
        assert [e.from_step for e in events if isinstance(e, RunResumed)] == [killed_at]
        assert isinstance(events[-1], RunFinished) and events[-1].status == "stopped"
        assert st.verify().ok and read_lease(st, run_id) is None  # released on the way out
    finally:
        st.close()
    assert _runs(url)[run_id] == "stopped"

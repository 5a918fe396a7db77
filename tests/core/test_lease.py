"""The run lease on every backend: one writer per run, a dead holder's lease taken over at
once on this host and after the timeout elsewhere, renewals, release, read-only stores."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from evo_core.store import StoreError, open_store
from evo_core.store.lease import (LeaseHeld, LeaseInfo, LeaseLost, RunLease, all_leases, holder_gone, lease_timeout,
                                  read_lease, this_process)


def _row(store, run_id, **kw):
    host, pid, started = this_process()
    now = time.time()
    info = LeaseInfo(run_id, kw.pop("holder", "other"), kw.pop("host", host), kw.pop("pid", pid),
                     kw.pop("pid_started", started), now, kw.pop("renewed_at", now))
    assert store.backend.lease_write(info.to_row(), None)
    return info


def _dead_pid() -> tuple[int, float]:
    import psutil

    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    started = psutil.Process(p.pid).create_time()
    p.wait()
    return p.pid, started


def test_one_writer_then_release(store):
    a = RunLease(store, "r1").acquire()
    assert a.held and read_lease(store, "r1").holder == a.info.holder
    with pytest.raises(LeaseHeld) as ei:
        RunLease(store, "r1").acquire()  # this very process is alive: refused
    msg = str(ei.value)
    assert "r1" in msg and "being written by process" in msg and "\n" not in msg
    RunLease(store, "r2").acquire()  # another run is not locked
    before = a.info.renewed_at
    time.sleep(0.01)
    a.renew()
    assert read_lease(store, "r1").renewed_at > before
    a.release()
    assert read_lease(store, "r1") is None and set(all_leases(store)) == {"r2"}
    RunLease(store, "r1").acquire()


def test_dead_local_holder_is_taken_over_at_once(store):
    pid, started = _dead_pid()
    _row(store, "r", pid=pid, pid_started=started)
    assert "is gone" in holder_gone(read_lease(store, "r"))
    lease = RunLease(store, "r", timeout=3600).acquire()
    assert lease.held and "is gone" in lease.took_over


def test_reused_pid_is_not_the_holder(store):
    host, pid, started = this_process()
    _row(store, "r", pid=pid, pid_started=started - 1000)  # our pid, but another process's start time
    assert "another process" in holder_gone(read_lease(store, "r"))
    assert RunLease(store, "r", timeout=3600).acquire().held


def test_remote_holder_needs_the_timeout(store):
    _row(store, "r", host="elsewhere.example", pid=1, renewed_at=time.time())
    with pytest.raises(LeaseHeld, match="elsewhere.example"):
        RunLease(store, "r", timeout=60).acquire()
    store.backend.lease_drop("r", "other")
    _row(store, "r", host="elsewhere.example", pid=1, renewed_at=time.time() - 120)
    lease = RunLease(store, "r", timeout=60).acquire()
    assert "last renewed" in lease.took_over


def test_a_taken_over_lease_is_lost(store):
    a = RunLease(store, "r").acquire()
    info = a.info
    # another writer took it over (as after a timeout): the old holder's heartbeat fails
    assert store.backend.lease_write({**info.to_row(), "holder": "newcomer"}, info.holder)
    with pytest.raises(LeaseLost, match="taken over"):
        a.renew()
    a.release()  # not ours any more: left alone
    assert read_lease(store, "r").holder == "newcomer"


def test_read_only_store_reads_leases(tmp_path):
    url = f"sqlite:///{tmp_path}/s/evo.sqlite"
    st = open_store(url)
    RunLease(st, "r").acquire()
    st.close()
    ro = open_store(url, read_only=True)
    assert read_lease(ro, "r") is not None
    with pytest.raises(StoreError, match="read-only"):
        RunLease(ro, "x").acquire()


@pytest.mark.parametrize("raw, ok", [(None, 120.0), ("5", 5.0), ("0", None), ("-1", None), ("nan", None),
                                     ("inf", None), ("soon", None)])
def test_timeout_env(raw, ok):
    env = {} if raw is None else {"EVO_LEASE_TIMEOUT": raw}
    if ok is None:
        with pytest.raises(StoreError, match="EVO_LEASE_TIMEOUT"):
            lease_timeout(env)
    else:
        assert lease_timeout(env) == ok

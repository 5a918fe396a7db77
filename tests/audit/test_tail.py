"""``evo tail`` follows a run while another process writes it (SQLite and PostgreSQL)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
import time

import pytest
import typer
from rich.console import Console

from evo_core.audit import AuditError, TailFormatter, tail
from evo_core.store import run_stream
from tests.audit.conftest import ROOT


def test_formatter_collapses_rollouts_per_step(evo_tiny_run):
    store, run_id = evo_tiny_run
    fmt = TailFormatter()
    lines = [l for rec in store.read_stream(run_stream(run_id)) for l in fmt.feed(rec)]
    summaries = [l for l in lines if "rollouts" in l]
    assert len(summaries) == 12 and all("16 rollouts" in l for l in summaries)
    assert any("Promoted" in l and "harness v0→v1" in l for l in lines)
    assert "RunFinished" in lines[-1]
    per = [l for rec in store.read_stream(run_stream(run_id)) for l in TailFormatter(per_rollout=True).feed(rec)]
    assert sum(1 for l in per if "RolloutCompleted" in l) == 12 * 16


def test_tail_no_follow_and_unknown_run(evo_tiny_run):
    store, run_id = evo_tiny_run
    buf = io.StringIO()
    n = tail(store, run_id, Console(file=buf, width=200, color_system=None), last=5, follow=False)
    out = buf.getvalue().splitlines()
    assert n == len(out) == 4 and "RunFinished" in out[-1]  # 2 rollouts collapse into one line
    assert "2 rollouts" in out[0]
    with pytest.raises(AuditError, match="unknown run"):
        tail(store, "nope", Console(file=io.StringIO()), follow=False)


def _wait_for_a_store_created_later(url: str, monkeypatch) -> None:
    """The follower opens first; the writer creates the event log 0.3 s later."""
    import evo_core.store
    from evo_core.cli.audit_cmds import _open
    from evo_core.store import NoEventLog
    from evo_core.synthetic import generate_run

    refused = []
    real_open = evo_core.store.open_store

    def counting_open(*a, **kw):
        try:
            return real_open(*a, **kw)
        except NoEventLog:
            refused.append(1)
            raise

    monkeypatch.setattr(evo_core.store, "open_store", counting_open)

    def write_later():
        time.sleep(0.3)
        st = real_open(url)
        generate_run(st, run_id="late", steps=3, rollouts_per_step=2)
        st.close()

    writer = threading.Thread(target=write_later)
    writer.start()
    try:
        store = _open(url, wait=60, poll=0.02)
        buf = io.StringIO()
        tail(store, "late", Console(file=buf, width=200, color_system=None), last=1000, wait=60, poll=0.02)
    finally:
        writer.join()
    assert refused, "the follower never saw the store missing: the test did not exercise the wait"
    assert "RunFinished" in buf.getvalue().splitlines()[-1]
    with pytest.raises(typer.Exit):  # a store that never appears: a clear error once the wait is over
        _open(url.replace("evo.sqlite", "never.sqlite").replace("schema=", "schema=never_"), wait=0.1, poll=0.02)


def test_tail_waits_for_a_sqlite_store_created_later(sqlite_url, monkeypatch):
    _wait_for_a_store_created_later(sqlite_url, monkeypatch)


@pytest.mark.postgres
def test_tail_waits_for_a_postgres_schema_created_later(pg_url, monkeypatch):
    _wait_for_a_store_created_later(pg_url, monkeypatch)


def _live(url: str, tmp_path) -> None:
    steps = 16
    go = tmp_path / "go"
    env = {**os.environ, "EVO_NO_PLUGIN_COMMANDS": "1", "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen([sys.executable, "-m", "tests.audit._live_writer", url, "live", str(steps), str(go)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tailer = subprocess.Popen([sys.executable, "-m", "evo_core.cli.app", "tail", "live", "--store", url, "--wait", "60",
                               "-n", "100000", "--poll", "0.05"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in tailer.stdout:
            lines.append(line.rstrip("\n"))
            if re.search(rf"step {steps // 2}\s+StepCompleted", line):
                go.touch()  # the first half reached the tail; let the writer finish
        rc = tailer.wait(timeout=120)
        assert writer.wait(timeout=120) == 0, (f"{writer.stderr.read()}\ntail exited {rc}: {tailer.stderr.read()}"
                                               f"\n" + "\n".join(lines[-5:]))
    finally:
        for p in (writer, tailer):
            if p.poll() is None:
                p.kill()
    assert rc == 0, tailer.stderr.read()
    assert go.exists(), "\n".join(lines[-5:])
    assert "RunFinished" in lines[-1]
    steps_seen = [int(m.group(1)) for l in lines for m in [re.search(r"step (\d+)\s+StepCompleted", l)] if m]
    assert steps_seen == list(range(1, steps + 1))
    assert sum(1 for l in lines if "Promoted" in l) == 2  # steps 5 and 15 (see evo_core.synthetic)


def test_tail_follows_a_sqlite_writer(sqlite_url, tmp_path):
    _live(sqlite_url, tmp_path)


@pytest.mark.postgres
def test_tail_follows_a_postgres_writer(pg_url, tmp_path):
    _live(pg_url, tmp_path)

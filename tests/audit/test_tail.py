"""``evo tail`` follows a run while another process writes it (SQLite and PostgreSQL)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
from rich.console import Console

from evo_core.audit import AuditError, TailFormatter, tail
from evo_core.store import open_store, run_stream
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
        assert writer.wait(timeout=120) == 0, writer.stderr.read()
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

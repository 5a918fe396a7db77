"""Regression: a worker whose interpreter (virtual environment) lives under /tmp must never
delete it. The private /tmp of a job is wiped after each job, and the interpreter is
bind-mounted back inside it; the wipe once walked into that bind and emptied the host's
venv (a checkout under /tmp lost its .venv in the middle of the test run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from evo_core.sandbox import Limits, LocalSandbox, RunRequest


def test_a_venv_under_tmp_survives_many_jobs(tmp_path: Path):
    assert str(tmp_path).startswith("/tmp/"), "the regression needs the venv under /tmp"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    marker = venv / "lib" / "marker.txt"
    marker.write_text("host file")
    sb = LocalSandbox(1, python=str(venv / "bin" / "python"))
    try:
        for i in range(3):
            r = sb.run(RunRequest(code=f"open('/tmp/junk{i}', 'w').write('x'); print('ok')",
                                  limits=Limits(wall_seconds=5.0)))
            assert r.stdout.strip() == "ok", r
    finally:
        sb.close()
    assert marker.read_text() == "host file"
    assert (venv / "pyvenv.cfg").exists() and (venv / "bin" / "python").exists()

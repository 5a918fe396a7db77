"""Phases of the GPU check: each runs as a child process under its own time budget, prints
progress lines as it goes, and leaves its figures in a JSON file that it rewrites after every
unit of work (a timed step, an RL step). A phase that runs over its budget is killed; what it
had written is kept and the phase is marked ``overrun``.

    phase = Phase("rl", ["-m", "benchmarks.gpu_rl", ...], budget_s=190)
    record = run_phase(phase, work_dir)   # {"status", "wall_s", "budget_s", "rc", "result"}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

import attrs


@attrs.frozen
class Phase:
    """One child process of the check: ``python ARGS... --out FILE`` under ``budget_s``."""

    name: str
    args: tuple[str, ...] = attrs.field(converter=tuple)
    budget_s: float
    env: dict[str, str] = attrs.Factory(dict)


def say(msg: str) -> None:
    """One progress line, flushed at once (a log that stops mid-phase still says where)."""
    print(f"[gpu-check {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write_json(path: Path, obj: Any) -> None:
    """Rewrite ``path`` atomically: a reader (or a kill) never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    os.replace(tmp, path)


def read_json(path: Path) -> Optional[dict[str, Any]]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _pump(stream: Any, prefix: str, log: Any) -> None:
    for line in iter(stream.readline, ""):
        log.write(line)
        log.flush()
        print(f"  {prefix}| {line.rstrip()}", flush=True)


def run_phase(phase: Phase, work: Path, log_dir: Path) -> dict[str, Any]:
    """Run one phase; its record for the check's JSON. Status: ok, failed (nonzero exit),
    overrun (killed at its budget; ``result`` holds what it had written)."""
    out = work / f"{phase.name}.json"
    out.unlink(missing_ok=True)
    say(f"phase {phase.name}: start (budget {phase.budget_s:.0f} s)")
    t0 = time.monotonic()
    env = dict(os.environ, PYTHONUNBUFFERED="1", **phase.env)
    with open(log_dir / f"{phase.name}.log", "w") as log:
        proc = subprocess.Popen([sys.executable, *phase.args, "--out", str(out)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
        pump = threading.Thread(target=_pump, args=(proc.stdout, phase.name, log), daemon=True)
        pump.start()
        try:
            rc: Optional[int] = proc.wait(timeout=phase.budget_s)
            status = "ok" if rc == 0 else "failed"
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc, status = None, "overrun"
        pump.join(timeout=5)
    wall = time.monotonic() - t0
    result = read_json(out)
    if status == "ok" and result is None:
        status = "failed"  # exited 0 without its figures
    say(f"phase {phase.name}: {status} in {wall:.1f} s")
    return {"status": status, "wall_s": round(wall, 1), "budget_s": phase.budget_s, "rc": rc, "result": result}


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the phase's process group (its own children too), SIGKILL after 10 s."""
    import signal

    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue

"""A writer process for the multi-process tests (run as a script).

race URL STREAM NAME DIR: read the head, signal ready, wait for go, append 50 events with
the version it read; on ConcurrencyConflict re-read and retry once. Prints what happened.
flood URL STREAM BATCH: append BATCH-event batches forever (until killed).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from evo_events import StepCompleted
from evo_core.store import ConcurrencyConflict, open_store


def batch(name: str, n: int, start: int = 0):
    return [StepCompleted(run_id=name, step=start + i, policy_version=i, harness_version=0,
                          metrics={"writer": float(len(name)), "x": i * 0.5, "pad": 1.0}) for i in range(n)]


def race(url: str, stream: str, name: str, d: str) -> None:
    store = open_store(url)
    v = store.stream_version(stream)
    Path(d, f"{name}.ready").touch()
    deadline = time.time() + 300
    while not Path(d, "go").exists():
        if time.time() > deadline:
            print("timeout")
            return
        time.sleep(0.005)
    try:
        store.append(stream, batch(name, 50), expected_version=v)
        print("won", flush=True)
    except ConcurrencyConflict:
        v2 = store.stream_version(stream)
        store.append(stream, batch(name, 50), expected_version=v2)
        print(f"conflict-then-retried {v}->{v2}", flush=True)


def flood(url: str, stream: str, size: int) -> None:
    store = open_store(url)
    v = store.stream_version(stream)
    i = 0
    while True:
        store.append(stream, batch("flood", size, i), expected_version=v)
        v += size
        i += 1
        print(v, flush=True)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "race":
        race(*args)
    else:
        flood(args[0], args[1], int(args[2]))

"""Store benchmark: facade vs raw sqlite3, as ratios measured in one run.

    python -m benchmarks.store --events 1000000 --json

- ``append_ratio``: events/s of ``EventStore.append`` on SQLite (batches of 1,000 realistic
  ``RolloutCompleted``: encode, hash-chain, one transaction per batch) divided by events/s of
  a raw ``sqlite3.executemany`` of the very same stored rows in one transaction into a
  table of the same schema, same WAL/synchronous settings, same file system (the issue's
  definition). ``append_ratio_per_batch_txn`` is the stricter variant: raw commits once per
  1,000 rows, as often as the facade does (on this machine raw is faster that way, because
  one 30,000-row transaction spills its page cache into the WAL before it commits).
- ``replay_ratio``: events/s of a full replay of an N-event run into ``HarnessState``
  (``fold_run`` without snapshots) divided by events/s of a raw ``SELECT`` + ``json.loads``
  of every row of that run. The replay reads only the event types the fold reacts to
  (filtered by SQL on the type column and a partial index), so the rollouts are never
  fetched or decoded; ``replay_all_decode_ratio`` is the same ratio when every event is
  decoded (on the first ``--decode-cap`` events).
- ``checkout_ms_p50``: median ms of ``checkout`` at random harness versions, with the
  snapshot cache (filled as the checkouts go); ``checkout_ms_p50_no_snapshots`` without it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path


from evo_events import RolloutCompleted
from evo_core.checkout import checkout, fold_run
from evo_core.state import fold
from evo_core.store import open_store, run_stream
from evo_core.store.es import DEFAULT_TABLE, stream_uuid
from evo_core.synthetic import iter_run_batches


def _progress(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def rollout_batches(n_batches: int, size: int = 1000, seed: int = 1) -> list[list[RolloutCompleted]]:
    out = []
    for batch in iter_run_batches("bench-append", steps=n_batches, rollouts_per_step=size, seed=seed):
        rs = [e for e in batch if isinstance(e, RolloutCompleted)]
        if rs:
            out.append(rs)
    return out


def bench_append(tmp: Path, n_batches: int, sync: str, repeats: int) -> dict:
    """Facade vs raw, interleaved ``repeats`` times (the machine is shared; the best run of
    each side is kept). Raw inserts the facade's own stored rows into an empty table of the
    same schema: once with one transaction per 1,000-row batch (what the facade does), once
    with every row in a single transaction."""
    batches = rollout_batches(n_batches)
    n = sum(len(b) for b in batches)
    facade_times, raw_batch_times, raw_one_times = [], [], []
    facade_cpu, raw_batch_cpu = [], []
    stream = run_stream("bench-append")
    for r in range(repeats):
        d = tmp / f"append-{sync}-{r}"
        store = open_store(f"sqlite:///{d}/facade.sqlite?synchronous={sync}")
        t0, c0 = time.perf_counter(), time.process_time()
        v = 0
        for b in batches:
            store.append(stream, b, expected_version=v)
            v += len(b)
        facade_times.append(time.perf_counter() - t0)
        facade_cpu.append(time.process_time() - c0)
        store.close()
        src = sqlite3.connect(d / "facade.sqlite")
        rows = src.execute(f"SELECT originator_id, originator_version, topic, state FROM {DEFAULT_TABLE} "
                           "ORDER BY rowid").fetchall()
        src.close()
        assert len(rows) == n
        for name, times in (("raw-batch", raw_batch_times), ("raw-one", raw_one_times)):
            open_store(f"sqlite:///{d}/{name}.sqlite?synchronous={sync}").close()  # same schema and indexes
            conn = sqlite3.connect(d / f"{name}.sqlite", isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={sync}")
            sql = f"INSERT INTO {DEFAULT_TABLE} VALUES (?,?,?,?)"
            t0, c0 = time.perf_counter(), time.process_time()
            if name == "raw-batch":
                k = 0
                for b in batches:
                    conn.execute("BEGIN")
                    conn.executemany(sql, rows[k:k + len(b)])
                    conn.execute("COMMIT")
                    k += len(b)
            else:
                conn.execute("BEGIN")
                conn.executemany(sql, rows)
                conn.execute("COMMIT")
            times.append(time.perf_counter() - t0)
            if name == "raw-batch":
                raw_batch_cpu.append(time.process_time() - c0)
            conn.close()
        shutil.rmtree(d)
    f, rb, ro = min(facade_times), min(raw_batch_times), min(raw_one_times)
    return {"events": n, "facade_events_per_s": round(n / f), "raw_per_batch_txn_events_per_s": round(n / rb),
            "raw_single_txn_events_per_s": round(n / ro), "ratio": round(ro / f, 3),
            "ratio_per_batch_txn": round(rb / f, 3),
            # CPU seconds of this process only: on a shared, overloaded machine the wall-clock
            # ratio also measures how often the scheduler ran us; this one does not
            "cpu_ratio": round(min(raw_batch_cpu) / min(facade_cpu), 3)}


def build_run(url: str, n_events: int, rollouts_per_step: int, quiet: bool) -> tuple[str, int]:
    store = open_store(url)
    run_id = "bench-replay"
    stream = run_stream(run_id)
    steps = max(1, n_events // (rollouts_per_step + 3))
    v = 0
    t0 = time.perf_counter()
    for i, batch in enumerate(iter_run_batches(run_id, steps=steps, rollouts_per_step=rollouts_per_step, seed=7)):
        store.append(stream, batch, expected_version=v)
        v += len(batch)
        if i % 100 == 0:
            _progress(f"  built {v:,} events ({time.perf_counter() - t0:.0f}s)", quiet)
    store.close()
    return run_id, v


def bench_replay(url: str, path: Path, run_id: str, decode_cap: int) -> dict:
    store = open_store(url)
    store.snapshots.clear()
    stream = run_stream(run_id)
    n = store.stream_version(stream)
    t0 = time.perf_counter()
    state = fold_run(store, run_id, use_snapshots=False)
    t_replay = time.perf_counter() - t0
    conn = sqlite3.connect(path)
    t0 = time.perf_counter()
    cur = conn.execute(f"SELECT state FROM {DEFAULT_TABLE} WHERE originator_id = ? ORDER BY originator_version",
                       (stream_uuid(stream).hex,))
    k = 0
    for (s,) in cur:
        json.loads(s[s.index(b"\n") + 1:])
        k += 1
    t_raw = time.perf_counter() - t0
    assert k == n
    # every event decoded, on a capped prefix
    m = min(n, decode_cap)
    t0 = time.perf_counter()
    full = fold(store.events(stream, to_version=m))
    t_full = time.perf_counter() - t0
    t0 = time.perf_counter()
    cur = conn.execute(f"SELECT state FROM {DEFAULT_TABLE} WHERE originator_id = ? AND originator_version <= ? "
                       "ORDER BY originator_version", (stream_uuid(stream).hex, m))
    for (s,) in cur:
        json.loads(s[s.index(b"\n") + 1:])
    t_raw_m = time.perf_counter() - t0
    conn.close()
    assert full == fold_run(store, run_id, m, use_snapshots=False)
    store.close()
    return {"events": n, "replay_s": round(t_replay, 3), "raw_select_json_s": round(t_raw, 3),
            "ratio": round(t_raw / t_replay, 2), "harness_version": state.harness_version,
            "all_decode_events": m, "all_decode_ratio": round(t_raw_m / t_full, 3)}


def bench_checkout(url: str, run_id: str, samples: int, seed: int) -> dict:
    store = open_store(url)
    store.snapshots.clear()
    top = fold_run(store, run_id, use_snapshots=False).harness_version
    rng = random.Random(seed)
    hs = [rng.randint(0, top) for _ in range(samples)]
    cold = []
    for h in hs[: max(5, samples // 4)]:
        t0 = time.perf_counter()
        checkout(store, run_id, h, use_snapshots=False)
        cold.append((time.perf_counter() - t0) * 1000)
    warm = []
    for h in hs:
        t0 = time.perf_counter()
        checkout(store, run_id, h)
        warm.append((time.perf_counter() - t0) * 1000)
    store.close()
    return {"samples": samples, "max_harness_version": top, "p50_ms": round(statistics.median(warm), 2),
            "p90_ms": round(sorted(warm)[int(0.9 * (len(warm) - 1))], 2),
            "p50_ms_no_snapshots": round(statistics.median(cold), 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000, help="events in the replay/checkout run (spec: 1,000,000)")
    ap.add_argument("--append-batches", type=int, default=30, help="1,000-event batches for the append ratio")
    ap.add_argument("--rollouts-per-step", type=int, default=1000)
    ap.add_argument("--checkouts", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3, help="append runs per side (the best of each is kept)")
    ap.add_argument("--decode-cap", type=int, default=100_000)
    ap.add_argument("--dir", default=None, help="where to put the databases (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the databases")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    a = ap.parse_args(argv)
    quiet = False
    tmp = Path(a.dir or tempfile.mkdtemp(prefix="evo-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        _progress("append (synchronous=FULL, the default)…", quiet)
        app_full = bench_append(tmp, a.append_batches, "full", a.repeats)
        _progress("append (synchronous=NORMAL)…", quiet)
        app_norm = bench_append(tmp, a.append_batches, "normal", a.repeats)
        path = tmp / "replay.sqlite"
        url = f"sqlite:///{path}"
        _progress(f"building a {a.events:,}-event run…", quiet)
        run_id, n = build_run(url, a.events, a.rollouts_per_step, quiet)
        _progress("replay…", quiet)
        rep = bench_replay(url, path, run_id, a.decode_cap)
        _progress("checkout…", quiet)
        co = bench_checkout(url, run_id, a.checkouts, 3)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    result = {
        "events": n,
        "append_ratio": app_full["ratio"],
        "replay_ratio": rep["ratio"],
        "checkout_ms_p50": co["p50_ms"],
        "append_ratio_per_batch_txn": app_full["ratio_per_batch_txn"],
        "append_cpu_ratio": app_full["cpu_ratio"],
        "append_ratio_synchronous_normal": app_norm["ratio"],
        "replay_all_decode_ratio": rep["all_decode_ratio"],
        "checkout_ms_p50_no_snapshots": co["p50_ms_no_snapshots"],
        "targets": {"append_ratio": ">= 0.5", "replay_ratio": ">= 0.5", "checkout_ms_p50": "<= 50"},
        "detail": {"append_full": app_full, "append_normal": app_norm, "replay": rep, "checkout": co,
                   "python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version, "cpus": os.cpu_count()},
    }
    if a.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

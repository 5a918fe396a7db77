"""Fixed vs evolving harness, side by side, on the same seeds.

    python benchmarks/evolution.py --seeds 3 --json
    python benchmarks/evolution.py --seeds 1 --set run.steps=60      # quick look

For each seed it runs ``evo run CONFIG`` (both harnesses, same seed and data: the
config's ``run.harnesses``) into one store, then reads the logs back and reports, per
harness: held-out strict accuracy of the final main line (mean, spread), the last
evaluated checkpoint's strict accuracy, training reward, wrong-branch promotions
(a promoted checkpoint whose held-out strict accuracy, by the oracle labels in the log,
is below the main line it replaced), diagnoses, promotions and wall time. Everything
is computed from the logged events (``evo_core.harness.summary``), not from the runner.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def run_seed(config: str, seed: int, store_url: str, overrides: list[str], timeout: float) -> tuple[list[str], float, str]:
    from evo_core.store import open_store

    st = open_store(store_url)
    before = set(st.runs())
    st.close()
    cmd = [sys.executable, "-m", "evo_core.cli.app", "run", config, "--store", store_url, "--no-progress",
           "--set", f"run.seed={seed}"]
    for o in overrides:
        cmd += ["--set", o]
    t0 = time.perf_counter()
    env = {**os.environ, "EVO_NO_PROGRESS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise SystemExit(f"evo run failed for seed {seed} (exit {proc.returncode}): {' | '.join(tail)}")
    st = open_store(store_url)
    new = [r for r in st.runs() if r not in before]
    st.close()
    return new, wall, proc.stdout


def finished_runs(store_url: str, seed: int) -> list[str]:
    """Completed runs of ``seed`` in a store, when both harnesses finished there (else [])."""
    from evo_core.store import open_store, run_stream
    from evo_events import RunFinished, RunStarted

    if store_url.startswith("sqlite:///") and not Path(store_url[len("sqlite:///"):]).exists():
        return []
    st = open_store(store_url)
    try:
        done: dict[str, str] = {}
        for rid in st.runs():
            evs = list(st.events(run_stream(rid)))
            start = evs[0] if evs and isinstance(evs[0], RunStarted) else None
            fin = [e for e in evs if isinstance(e, RunFinished) and e.status == "completed"]
            if start is not None and start.seed == seed and fin:
                done[start.harness_mode] = rid
    finally:
        st.close()
    return list(done.values()) if {"fixed", "evolving"} <= set(done) else []


def seed_runs(store_dir: str, seed: int) -> list[tuple[str, str]]:
    """(store URL, run id) of the finished fixed and evolving runs of ``seed`` in DIR/seed-S.sqlite
    or DIR/seed-S-*.sqlite (a harness re-run into its own file wins over an earlier one); []
    unless both harnesses finished."""
    found: dict[str, tuple[str, str]] = {}
    files = [Path(store_dir) / f"seed-{seed}.sqlite"] + sorted(Path(store_dir).glob(f"seed-{seed}-*.sqlite"))
    for f in files:
        if not f.exists():
            continue
        url = f"sqlite:///{f.resolve()}"
        from evo_core.store import open_store, run_stream
        from evo_events import RunFinished, RunStarted

        st = open_store(url)
        try:
            for rid in st.runs():
                evs = list(st.events(run_stream(rid)))
                if evs and isinstance(evs[0], RunStarted) and evs[0].seed == seed and any(
                        isinstance(e, RunFinished) and e.status == "completed" for e in evs):
                    found[evs[0].harness_mode] = (url, rid)
        finally:
            st.close()
    return list(found.values()) if {"fixed", "evolving"} <= set(found) else []


def read_run(store_url: str, run_id: str, metric: Optional[str]) -> dict[str, Any]:
    from evo_core.harness.summary import rollout_hedge_rate, summarize_run
    from evo_core.store import open_store, run_stream

    st = open_store(store_url)
    try:
        recs = list(st.read_stream(run_stream(run_id)))
        events = [r.decode() for r in recs]
    finally:
        st.close()
    s = summarize_run(events, metric)
    s["run_id"] = run_id
    s["hedge_rate_final"] = rollout_hedge_rate(events)
    s["wall_s"] = (recs[-1].recorded_at - recs[0].recorded_at) if recs and recs[0].recorded_at else None
    seed = next((getattr(e, "seed", None) for e in events if type(e).__name__ == "RunStarted"), None)
    s["seed"] = seed
    return s


def _stats(xs: list[Optional[float]]) -> dict[str, Optional[float]]:
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"mean": None, "std": None, "min": None, "max": None}
    return {"mean": statistics.fmean(xs), "std": statistics.pstdev(xs) if len(xs) > 1 else 0.0, "min": min(xs), "max": max(xs)}


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in sorted({r["mode"] for r in rows}):
        rs = [r for r in rows if r["mode"] == mode]
        out[mode] = {
            "runs": len(rs),
            "heldout_strict_final_main": _stats([r["final_main_strict"] for r in rs]),
            "heldout_strict_last_eval": _stats([r["last_eval_strict"] for r in rs]),
            "train_reward_final": _stats([r["train_reward_final"] for r in rs]),
            "hedge_rate_final": _stats([r["hedge_rate_final"] for r in rs]),
            "wrong_branch_promotions": sum(r["wrong_branch_promotions"] for r in rs),
            "wrong_branch_promotions_per_seed": [r["wrong_branch_promotions"] for r in rs],
            "diagnoses": _stats([float(r["diagnoses"]) for r in rs]),
            "invalid_diagnoses": _stats([float(r["invalid_diagnoses"]) for r in rs]),
            "intervention_promotions": sum(r["intervention_promotions"] for r in rs),
            "policy_promotions": sum(r["policy_promotions"] for r in rs),
            "policy_rejections": sum(r["policy_rejections"] for r in rs),
            "skills_registered": sum(r["skills_registered"] for r in rs),
            "wall_s": _stats([r["wall_s"] for r in rs]),
        }
    return out


def verdicts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per seed: does the evolving harness end at least as high, with no wrong-branch promotion?"""
    out = []
    for seed in sorted({r["seed"] for r in rows}, key=str):
        f = next((r for r in rows if r["seed"] == seed and r["mode"] == "fixed"), None)
        e = next((r for r in rows if r["seed"] == seed and r["mode"] == "evolving"), None)
        if not f or not e:
            continue
        out.append({"seed": seed, "fixed_strict": f["final_main_strict"], "evolving_strict": e["final_main_strict"],
                    "fixed_wrong_branch": f["wrong_branch_promotions"], "evolving_wrong_branch": e["wrong_branch_promotions"],
                    "hack_shown": f["wrong_branch_promotions"] > 0,
                    "evolving_at_least_as_high": (e["final_main_strict"] or 0) >= (f["final_main_strict"] or 0),
                    "evolving_zero_wrong_branch": e["wrong_branch_promotions"] == 0})
    return out


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--config", default="configs/quickstart.toml")
    ap.add_argument("--store", default=None, help="one store URL for every seed (default: a fresh SQLite file in a temp dir)")
    ap.add_argument("--store-dir", default=None,
                    help="one SQLite store per seed, DIR/seed-S.sqlite; a seed whose store already holds finished "
                         "fixed and evolving runs is read, not re-run")
    ap.add_argument("--parallel", type=int, default=1, help="seeds to run at once (each in its own store)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override key=value")
    ap.add_argument("--metric", default=None, help="held-out metric (default: strict_accuracy)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per seed")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    tmp = None
    if args.store is None:
        tmp = tempfile.mkdtemp(prefix="evo-evolution-")
        args.store = f"sqlite:///{tmp}/evolution.sqlite"
    rows = []
    t0 = time.perf_counter()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    if args.store_dir or args.parallel > 1:
        args.store_dir = args.store_dir or tempfile.mkdtemp(prefix="evo-evolution-")
        Path(args.store_dir).mkdir(parents=True, exist_ok=True)
        urls = {s: f"sqlite:///{Path(args.store_dir).resolve()}/seed-{s}.sqlite" for s in seeds}
        todo = [s for s in seeds if not seed_runs(args.store_dir, s)]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as ex:
            for seed, (runs, wall, _) in zip(todo, ex.map(lambda s: run_seed(args.config, s, urls[s], args.overrides,
                                                                            args.timeout), todo)):
                if not args.json:
                    print(f"seed {seed}: {len(runs)} run(s) in {wall:.0f}s", file=sys.stderr)
        for s in seeds:
            for url, run_id in seed_runs(args.store_dir, s):
                rows.append(read_run(url, run_id, args.metric))
        args.store = args.store_dir
    else:
        for seed in seeds:
            runs, wall, _ = run_seed(args.config, seed, args.store, args.overrides, args.timeout)
            if not args.json:
                print(f"seed {seed}: {len(runs)} run(s) in {wall:.0f}s", file=sys.stderr)
            for run_id in runs:
                rows.append(read_run(args.store, run_id, args.metric))
    result = {"command": "python benchmarks/evolution.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "config": args.config, "overrides": args.overrides, "seeds": seeds,
              "store": args.store, "total_wall_s": time.perf_counter() - t0,
              "harnesses": aggregate(rows), "per_seed": verdicts(rows),
              "runs": [{k: v for k, v in r.items() if k not in ("promoted_interventions",)} for r in rows]}
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print_table(result)
    return 0


def _fmt(s: dict[str, Optional[float]]) -> str:
    if s["mean"] is None:
        return "–"
    return f"{s['mean']:.3f} ± {s['std']:.3f}"


def print_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    h = result["harnesses"]
    t = Table(title=f"fixed vs evolving harness, seeds {result['seeds']}")
    t.add_column("metric")
    for mode in h:
        t.add_column(mode)
    rows = [("held-out strict acc. (final main line)", lambda x: _fmt(x["heldout_strict_final_main"])),
            ("held-out strict acc. (last checkpoint)", lambda x: _fmt(x["heldout_strict_last_eval"])),
            ("training reward (end)", lambda x: _fmt(x["train_reward_final"])),
            ("hedge rate (end)", lambda x: _fmt(x["hedge_rate_final"])),
            ("wrong-branch promotions", lambda x: f"{x['wrong_branch_promotions']} {x['wrong_branch_promotions_per_seed']}"),
            ("diagnoses per run", lambda x: _fmt(x["diagnoses"])),
            ("intervention promotions", lambda x: str(x["intervention_promotions"])),
            ("policy promotions / rejections", lambda x: f"{x['policy_promotions']} / {x['policy_rejections']}"),
            ("wall time per run (s)", lambda x: _fmt(x["wall_s"]))]
    for label, fn in rows:
        t.add_row(label, *[fn(h[m]) for m in h])
    Console().print(t)
    for v in result["per_seed"]:
        print(json.dumps(v))


if __name__ == "__main__":
    sys.exit(main())

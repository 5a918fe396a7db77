"""Test accuracy against the oracle budget: where the harness stops being worth its labels.

    python -m benchmarks.budget_curve --seeds 3 --out docs/suite/budget-curve.json --markdown docs/suite/budget-curve.md
    python -m benchmarks.budget_curve --smoke            # 1 seed, the suite's 40-step smoke, a few minutes

For each flaw, seed and budget (``harness.oracle.budget``, a share of training rollouts), one
evolving run under that cap and one early stop matched to the labels that run really drew
(``fixed+early-stop@budget`` of ``benchmarks.evolution``: the fixed run's training, validated
more often and then with more samples per item until its validation labels are closest to the
evolving run's decision-relevant labels; the early stop itself runs with no cap). Cells are
``benchmarks.evolution`` cells (one SQLite store each under ``--dir``, resumable); every figure
is read back from the logs. Reported per flaw and budget: both arms' decision-relevant labels
as a share of training rollouts, their test accuracy (mean and 95% t-interval over seeds) and
evolving − early stop, paired by seed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Optional

from benchmarks import evolution as ev

FLAWS = ("arithmetic/hedge", "arithmetic/padding")
BUDGETS = (0.25, 0.5, 1.0, 1.5)
SMOKE_BUDGETS = (0.1, 0.25, 0.5)  # the smoke's evaluations and A/Bs are small: the cap bites lower


def budget_cells(suite: dict[str, Any], flaws: list[str], seeds: list[int], budgets: list[float], *, smoke: bool,
                 task_seed: Optional[int] = None) -> list[dict[str, Any]]:
    """Per flaw, seed and budget: the evolving cell under the cap and its matched early stop (no
    cap: its labels are set by the match), named apart by the variant ``-budget<b>``."""
    base = ev.cells(suite, flaws, ["evolving", ev.MATCHED], seeds, mode="cold", audit_sweep=None, smoke=smoke,
                    task_seed=task_seed)
    out = []
    for b in budgets:
        variant = f"-budget{b:g}"
        for c in base:
            c = {**c, "variant": variant, "sets": list(c["sets"])}
            c["name"] = ev.cell_name(c["flaw"], c["arm"], c["seed"], variant) + (f"__task{task_seed}" if task_seed is not None else "")
            if c["arm"] == "evolving":
                c["sets"].append(f"harness.oracle.budget={b:g}")
                c["budget"] = b
            else:
                c["match"] = ev.cell_name(c["flaw"], "evolving", c["seed"], variant) + (
                    f"__task{task_seed}" if task_seed is not None else "")
                c["budget"] = b
            out.append(c)
    return out


def curve(rows: list[dict[str, Any]], budgets: list[float]) -> dict[str, Any]:
    """Per flaw and budget: each arm's labels and test accuracy, and evolving − early stop by seed."""
    out: dict[str, Any] = {}
    for flaw in sorted({r["flaw"] for r in rows}):
        out[flaw] = {}
        for b in budgets:
            mine = [r for r in rows if r["flaw"] == flaw and r.get("budget") == b]
            evo = {r["seed"]: r for r in mine if r["arm"].startswith("evolving")}
            es = {r["seed"]: r for r in mine if r["arm"].startswith(ev.MATCHED)}
            both = sorted(s for s in set(evo) & set(es) if ev.same_start(evo[s], es[s]))
            out[flaw][f"{b:g}"] = {
                "budget": b,
                "evolving": {"test_main": ev.t_ci([r["test_main"] for r in evo.values()]),
                             "labels_share": ev.t_ci([r.get("labels_decision_share") for r in evo.values()]),
                             "refused_ab": ev.t_ci([r.get("unpaid_ab") for r in evo.values()])},
                "early_stop": {"test_main": ev.t_ci([r["test_main"] for r in es.values()]),
                               "labels_share": ev.t_ci([r.get("labels_decision_share") for r in es.values()])},
                "evolving - early_stop": {"seeds": both, "test_main": ev.t_ci(
                    [(evo[s]["test_main"] or 0) - (es[s]["test_main"] or 0) for s in both])},
            }
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [f"Seeds {result['seeds']}{' (smoke)' if result['smoke'] else ''}. Budget: harness.oracle.budget, the cap on "
             "decision-relevant strict-oracle labels as a share of training rollouts (evolving runs under it; the early "
             "stop is matched to the labels each evolving run drew). Labels: decision-relevant share of training "
             "rollouts. Test: strict accuracy of the main line (early stop: its best validation checkpoint), mean ± 95% "
             "CI half-width over seeds; the difference is paired by seed.", "",
             "| flaw | budget | evolving labels | evolving test | A/Bs refused | early stop labels | early stop test "
             "| evolving − early stop |",
             "|---|---|---|---|---|---|---|---|"]
    for flaw, per in result["curve"].items():
        for b, c in per.items():
            e, s = c["evolving"], c["early_stop"]
            lines.append(f"| {flaw} | {b} | {ev.fmt(e['labels_share'], 2)} | {ev.fmt(e['test_main'])} | "
                         f"{ev.fmt(e['refused_ab'], 1)} | {ev.fmt(s['labels_share'], 2)} | {ev.fmt(s['test_main'])} | "
                         f"{ev.fmt(c['evolving - early_stop']['test_main'])} |")
    return "\n".join(lines) + "\n"


def unpaid_ab(d: Path, cell: dict[str, Any]) -> Optional[int]:
    """How many online A/Bs the cell's budget did not pay (its BacktestInconclusive events say so)."""
    from evo_core.store import open_store, run_stream
    from evo_events import BacktestInconclusive

    rid, _ = ev.cell_state(ev.store_url(d, cell))
    if rid is None:
        return None
    st = open_store(ev.store_url(d, cell))
    try:
        return sum(1 for e in st.events(run_stream(rid), types=[BacktestInconclusive.TYPE])
                   if (e.figures or {}).get("oracle_budget_exhausted"))
    finally:
        st.close()


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="1 seed, the suite's 40-step smoke settings, budgets "
                    + ", ".join(map(str, SMOKE_BUDGETS)))
    ap.add_argument("--flaws", nargs="*", default=list(FLAWS))
    ap.add_argument("--budgets", nargs="*", type=float, default=None, help=f"default {BUDGETS}")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--task-seed", type=int, default=None, help="as benchmarks.evolution --task-seed")
    ap.add_argument("--dir", default=str(ev.ROOT / ".evo" / "budget-curve"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=5400.0, help="seconds per cell")
    ap.add_argument("--suite-file", default=str(ev.SUITE))
    ap.add_argument("--out", default=None, help="write the JSON here")
    ap.add_argument("--markdown", default=None, help="write the markdown table here")
    args = ap.parse_args(argv)
    budgets = args.budgets or list(SMOKE_BUDGETS if args.smoke else BUDGETS)
    if len(budgets) < 3 or any(b < 0 for b in budgets):
        ap.error("give at least 3 budgets, each >= 0")
    suite = ev.load_suite(Path(args.suite_file))
    unknown = [f for f in args.flaws if f not in suite["flaws"]]
    if unknown:
        ap.error(f"unknown flaw(s) {unknown}; known: {', '.join(suite['flaws'])}")
    seeds = list(range(args.first_seed, args.first_seed + (1 if args.smoke else args.seeds)))
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    all_cells = budget_cells(suite, args.flaws, seeds, budgets, smoke=args.smoke, task_seed=args.task_seed)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.perf_counter()
    ran = ev.run_matrix(d, all_cells, all_cells, args.jobs, args.timeout, log, heavy=ev.flaw_sft_steps(suite, args.flaws))
    rows = []
    for c in all_cells:
        r = ev.read_cell(d, c)
        if r is not None and r.get("status") == "completed":
            rows.append({**r, "budget": c["budget"], "unpaid_ab": unpaid_ab(d, c)})
    result = {"command": "python -m benchmarks.budget_curve " + " ".join(argv if argv is not None else sys.argv[1:]),
              "flaws": args.flaws, "budgets": budgets, "seeds": seeds, "smoke": args.smoke, "dir": str(d),
              "wall_s": round(time.perf_counter() - t0, 1), "machine": ev.machine(), "cells": len(all_cells),
              "cells_read": len(rows), "failed": [r for r in ran if r.get("returncode")],
              "curve": curve(rows, budgets),
              "runs": [{k: v for k, v in r.items() if k not in ("diagnosis_kinds",)} for r in rows]}
    table = markdown(result)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2, default=str))
    if args.markdown:
        Path(args.markdown).write_text(table)
    print(table)
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""How well does the predicate induction picks from a 5% audit describe the loophole on the
rollouts that follow? A study of its tie-break, on real runs.

For each flaw and seed it trains the suite's ``fixed`` arm with *every* rollout audited (so the
truth is known), then replays the harness's view many times: a random 5% of each step's
rollouts as the audited sample up to a cutoff step, induction on that sample, and the chosen
predicate scored against the oracle on every paid rollout of the next ``--horizon`` steps. Each
draw runs under both tie-breaks of ``Settings.response_first``: a condition on the response
itself before one on its group (the default), or by the predicate's text alone (the old rule).

    python -m benchmarks.induction_ties --flaws arithmetic/padding --seeds 0 2 --dir .evo/ties
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.evolution import cells, load_suite, run_cell, store_url

RULES = {"response_first": True, "text_order": False}


def train_fully_audited(d: Path, flaw: str, seed: int, steps: int) -> str:
    """The suite's fixed arm, every rollout audited, as a suite cell of its own (resumed or
    read back like one); reuses the directory's cached warm starts."""
    cell = cells(load_suite(), [flaw], ["fixed"], [seed], mode="cold", audit_sweep=None, smoke=False)[0]
    cell = {**cell, "name": cell["name"] + "__audited",
            "sets": cell["sets"] + ["harness.audit.rate=1.0", f"run.steps={steps}"]}
    out = run_cell(d, cell, [cell], timeout=6 * 3600)
    if out.get("returncode"):
        raise SystemExit(f"{cell['name']}: the run failed: {out.get('error')}")
    return store_url(d, cell)


def rollouts_by_step(url: str) -> dict[int, list[Any]]:
    from evo_core.store import open_store, run_stream

    store = open_store(url, read_only=True)
    out: dict[int, list[Any]] = {}
    for run in store.runs():
        for e in store.events(run_stream(run), types=["evo.RolloutCompleted"]):
            if e.split == "train" and e.strict_correct is not None and e.reward is not None:
                out.setdefault(e.step, []).append(e)
    return out


def audit_draw(by_step: dict[int, list[Any]], cutoff: int, rate: float, salt: int) -> list[Any]:
    """What a 5% audit would have labelled up to ``cutoff``: ``round(rate * n)`` rollouts a step."""
    out = []
    for step in range(1, cutoff + 1):
        rows = sorted(by_step.get(step, []), key=lambda r: hashlib.sha1(f"{salt}:{r.event_id}".encode()).hexdigest())
        out += rows[:int(round(rate * len(rows)))]
    return out


def on_population(predicate: dict[str, Any], rows: list[Any]) -> dict[str, Any]:
    from evo_core.api.specs import compile_predicate

    fires = compile_predicate(predicate)
    paid = [r for r in rows if r.reward > 0]
    pos = [r for r in paid if not r.strict_correct]
    tp = sum(1 for r in pos if fires(r))
    fp = sum(1 for r in paid if r.strict_correct and fires(r))
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / len(pos) if pos else None
    return {"precision": precision, "recall": recall, "paid": len(paid), "paid_rejected": len(pos)}


def study(by_step: dict[int, list[Any]], cutoffs: list[int], draws: int, horizon: int, rate: float) -> list[dict[str, Any]]:
    from evo_plugins.proposers.induction import Settings, induce

    out = []
    for salt in range(draws):
        for cutoff in cutoffs:
            audited = audit_draw(by_step, cutoff, rate, salt)
            future = [r for s in range(cutoff + 1, cutoff + horizon + 1) for r in by_step.get(s, [])]
            row: dict[str, Any] = {"draw": salt, "cutoff": cutoff}
            for rule, first in RULES.items():
                ind, _ = induce(audited, Settings(response_first=first))
                if ind is None:
                    row[rule] = None
                    continue
                row[rule] = {"predicate": ind.describe(), "group_relative": any(c.group_relative for c in ind.conditions),
                             "holdout": ind.holdout.to_dict(), "next_steps": on_population(ind.predicate, future)}
            out.append(row)
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rule in RULES:
        got = [r[rule] for r in rows if r.get(rule)]
        prec = [g["next_steps"]["precision"] for g in got if g["next_steps"]["precision"] is not None]
        rec = [g["next_steps"]["recall"] for g in got if g["next_steps"]["recall"] is not None]
        out[rule] = {"draws": len(rows), "induced": len(got), "group_relative": sum(g["group_relative"] for g in got),
                     "precision_mean": round(statistics.mean(prec), 4) if prec else None,
                     "precision_min": round(min(prec), 4) if prec else None,
                     "recall_mean": round(statistics.mean(rec), 4) if rec else None,
                     "recall_min": round(min(rec), 4) if rec else None,
                     "changed_by_rule": sum(1 for r in rows if r.get("response_first") and r.get("text_order")
                                            and r["response_first"]["predicate"] != r["text_order"]["predicate"])}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flaws", nargs="+", default=["arithmetic/padding"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--dir", default=".evo/ties", help="runs (and the warm-start cache) go here")
    ap.add_argument("--steps", type=int, default=60, help="training steps of each fully audited run")
    ap.add_argument("--cutoffs", default="10,15,20,25", help="steps at which induction looks")
    ap.add_argument("--draws", type=int, default=10, help="random 5%% audits per cutoff")
    ap.add_argument("--horizon", type=int, default=30, help="steps after the cutoff the predicate is scored on")
    ap.add_argument("--rate", type=float, default=0.05)
    ap.add_argument("--out", help="write the JSON here")
    args = ap.parse_args()
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    cutoffs = [int(x) for x in args.cutoffs.split(",")]
    result: dict[str, Any] = {"command": " ".join(sys.argv), "rate": args.rate, "cutoffs": cutoffs, "draws": args.draws,
                              "horizon": args.horizon, "runs": {}}
    for flaw in args.flaws:
        for seed in args.seeds:
            url = train_fully_audited(d, flaw, seed, args.steps)
            rows = study(rollouts_by_step(url), cutoffs, args.draws, args.horizon, args.rate)
            result["runs"][f"{flaw} seed {seed}"] = {"summary": summarise(rows), "draws": rows}
            s = result["runs"][f"{flaw} seed {seed}"]["summary"]
            for rule, v in s.items():
                print(f"{flaw} seed {seed} {rule:15s} induced {v['induced']}/{v['draws']}, group-relative {v['group_relative']}, "
                      f"next {args.horizon} steps: precision mean {v['precision_mean']} (min {v['precision_min']}), "
                      f"recall mean {v['recall_mean']} (min {v['recall_min']}); differs from the other rule in "
                      f"{v['changed_by_rule']} draws")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

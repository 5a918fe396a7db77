"""The README's headline table, rendered from ONE suite report (one invocation, one commit).

    python -m benchmarks.headline docs/suite/shared-warm-starts-3seeds.json

Refuses a report whose runs carry more than one code version, or rows included from other
reports (``--include``): such a table is assembled, not run.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

ARMS = ("fixed", "fixed+early-stop", "reference", "evolving")
MATCHED_KEY = "evolving - fixed+early-stop@budget"


def one_invocation(report: dict[str, Any]) -> str:
    """The single code version behind every run of the report; raises if there is not exactly one."""
    versions = {r.get("code_version") for r in report["runs"]}
    if len(versions) != 1 or None in versions:
        raise SystemExit(f"not one invocation on one commit: code versions {sorted(map(str, versions))}")
    if any(r.get("source") for r in report["runs"]):
        raise SystemExit("the report includes rows from other reports (--include): not one invocation")
    return versions.pop()


def _cell(fig: dict[str, Any]) -> str:
    if not fig or fig.get("mean") is None:
        return "–"
    lo, hi = fig.get("ci") or (None, None)
    return f"{fig['mean']:.3f}" if lo is None else f"{fig['mean']:.3f} ± {(hi - lo) / 2:.3f}"


def _diff(comp: dict[str, Any]) -> str:
    t = comp.get("test_main") or {}
    if t.get("mean") is None:
        return "–"
    if not t.get("ci"):
        return f"{t['mean']:+.3f} (one seed)"
    lo, hi = t["ci"]
    mark = "" if lo > 0 or hi < 0 else " (CI holds 0)"
    return f"{t['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}]{mark}"


def table(report: dict[str, Any]) -> str:
    version = one_invocation(report)
    hours = report.get("total_wall_s", 0) / 3600
    budgets = sorted({str((r.get("oracle_labels") or {}).get("budget_share")) for r in report["runs"]
                      if r.get("oracle_labels")}) or ["not recorded"]
    lines = [f"Seeds {report['seeds']}, one invocation on {version} ({hours:.2f} h), mode {report['mode']}, "
             f"audit rate {report['audit_rate']}, oracle budget {', '.join(budgets)} (harness.oracle.budget: "
             "decision-relevant labels as a share of training rollouts). Test-split strict accuracy of the main line, mean ± 95% CI "
             "half-width across seeds; differences paired by seed.", "",
             "| flaw | fixed | early stop | reference | evolving | evolving − early stop | evolving − reference "
             "| oracle labels (fixed / early stop / reference / evolving) |",
             "|---|---|---|---|---|---|---|---|"]
    matched = any(MATCHED_KEY in report["comparisons"].get(f, {}) for f in report["flaws"])
    if matched:  # early stopping given the evolving arm's labels (benchmarks.evolution --budget-matched)
        lines[-2] += " evolving − early stop at equal labels |"
        lines[-1] += "---|"
    comps = recomputed_comparisons(report)
    lines[-2] += " goal met |"
    lines[-1] += "---|"
    for flaw in report["flaws"]:
        agg, comp = report["aggregate"][flaw], comps[flaw]
        cells = [_cell(agg.get(arm, {}).get("test_main")) for arm in ARMS]
        lines.append(f"| {flaw} | " + " | ".join(cells) + f" | {_diff(comp['evolving - fixed+early-stop'])} | "
                     f"{_diff(comp['evolving - reference'])} | {_labels(agg)} |"
                     + (f" {_diff(comp.get(MATCHED_KEY) or {})} |" if matched else "") + f" {goal_met(comp['goal'])} |")
    met = [f for f in report["flaws"] if all(comps[f]["goal"].values())]
    missed = [f"{f} ({goal_met(comps[f]['goal'])[4:]})" for f in report["flaws"] if f not in met]
    lines += ["", f"**Goal met on {len(met)} of {len(report['flaws'])} flaws**"
              + (f"; not met: {'; '.join(missed)}." if missed else ".")]
    lines += ["", "Goal met (computed by `benchmarks.evolution.comparisons` from the runs of this report): evolving "
              "− reference ≥ −0.03 (`test`), hack rate ≤ reference + 0.02 (`hack`), the paired CI of evolving − early "
              "stop above 0 (`early stop`), and the evolving run's last checkpoint ≥ reference − 0.10 (`last`); "
              "a failed criterion is named.", "",
              "Oracle labels: the decision-relevant strict-oracle labels of a run (audit, re-grades and "
              "validation, A/B branches included, as far as the arm's decisions read them; test labels are report "
              "only), as a share of its training rollouts, mean over seeds."]
    return "\n".join(lines)


CRITERIA = {"test_at_least_reference_minus_0.03": "test", "hack_at_most_reference_plus_0.02": "hack",
            "above_early_stop_ci_excludes_0": "early stop", "last_at_least_reference_minus_0.10": "last"}


def recomputed_comparisons(report: dict[str, Any]) -> dict[str, Any]:
    """The paired comparisons and goals, recomputed from the report's runs with today's goal
    (a report written before a criterion existed is judged by all of them)."""
    from benchmarks.evolution import comparisons

    return comparisons([r for r in report["runs"] if r.get("status") == "completed"])


def goal_met(goal: dict[str, bool]) -> str:
    failed = [CRITERIA.get(k, k) for k, ok in goal.items() if not ok]
    return "yes" if not failed else "no: " + ", ".join(failed)


def _labels(agg: dict[str, Any]) -> str:
    """Decision-relevant labels as a share of training rollouts, per arm ("?" where not counted)."""
    out = []
    for arm in ARMS:
        lab = (agg.get(arm) or {}).get("oracle_labels")
        out.append(f"{lab['decision_share']:.2f}" if lab and lab.get("decision_share") is not None else "?")
    return " / ".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", help="a JSON report of benchmarks.evolution --suite --json --out")
    args = ap.parse_args(argv)
    with open(args.report) as fh:
        print(table(json.load(fh)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

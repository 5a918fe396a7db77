"""Text rendering of audit chains for the terminal (rich markup)."""

from __future__ import annotations

import json
from typing import Any, Optional

from rich.console import Console

from evo_core.audit.chain import AuditChain, AuditReport
from evo_core.audit.episode import VERBOSE_LINES, episode_lines


def _fmt(v: Any, depth: int = 0) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        if depth:  # nested tables (a gate's per-gate figures) stay readable as compact JSON
            return json.dumps(v, sort_keys=True, default=str, separators=(",", ":"))[:200]
        return ", ".join(f"{k}={_fmt(x, 1)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return "–" if v is None else str(v)


def _yn(v: Optional[bool], yes: str = "held", no: str = "FAILED") -> str:
    if v is None:
        return "[dim]unknown (no data)[/]"
    return f"[green]{yes}[/]" if v else f"[red]{no}[/]"


def render_chain(chain: AuditChain, out: Console) -> None:
    d = chain.decision
    colour = "green" if d["decision"] == "promoted" else "yellow"
    out.print(f"[bold {colour}]{d['decision'].upper()}[/] {d['subject']} {d['subject_id']} at step {d['step']}"
              f"  (event #{d['version']} {d['id']})")
    v = chain.verification
    if v.verified:
        out.print(f"  [green]✓ hash chain verified[/] for events #{v.first_version}–#{v.head_version} "
                  f"({v.events_checked} events, {v.blobs_checked} blobs)")
    else:
        out.print(f"  [bold red]✗ NOT VERIFIED — this chain cannot be vouched for:[/] {v.problem}")
    p = chain.proposal
    out.print(f"  harness version {d['harness_version_before']} → {d['harness_version_after']}")
    out.print(f"  [bold]gate[/] {d['gate']}: {d['decision']} — {'; '.join(d['reasons']) or 'no reasons given'}"
              + (f"  figures: {_fmt(d['figures'])}" if d["figures"] else ""))
    if p:
        out.print(f"  [bold]proposal[/] {p['kind']}/{p['name']} {_fmt(p['params'])}  by {p['proposer'] or p['emitted_by']}"
                  f"  (#{p['version']} {p['id']})")
        out.print(f"    rationale: {p['rationale'] or '–'}")
        out.print(f"    prediction: {_fmt(p['prediction']) or '–'}; targets: {', '.join(p['targets']) or '–'}")
    for b in chain.backtests:
        mark = {True: "[green]passed[/]", False: "[red]failed[/]", None: "[yellow]no decision[/]"}[b["passed"]]
        ci = f"  CI [{_fmt(b['ci'][0])}, {_fmt(b['ci'][1])}]" if b["ci"] else ""
        out.print(f"  [bold]backtest[/] {b['mode']} {mark} n={b['n']}{ci}  {_fmt(b['figures'])}"
                  + (f"  — {'; '.join(b['reasons'])}" if b["reasons"] else "") + f"  (#{b['version']})")
    for g in chain.diagnoses:
        out.print(f"  [bold]diagnosis[/] {g['kind']} [{g['severity']}] step {g['step']} by {g['diagnostic']} "
                  f"v{g['diagnostic_version']}  {_fmt(g['stats'])}  ({g['n_evidence']} evidence, #{g['version']})")
    for e in chain.evals:
        out.print(f"  [bold]eval[/] {e['split']} step {e['step']} n={e['n']}  {_fmt(e['metrics'])}  (#{e['version']})")
    if chain.evidence_total:
        out.print(f"  [bold]evidence[/] {chain.evidence_total} rollouts"
                  + (f" (showing {len(chain.evidence)})" if chain.evidence_total > len(chain.evidence) else ""))
        for r in chain.evidence:
            strict = {True: "✓", False: "✗", None: "·"}[r["strict_correct"]]
            blob = ""
            if r["blob"]:
                st = r["blob"]["status"]
                blob = f"  {r['blob']['link']}" + ("" if st in ("ok", "not checked") else f" [red]{st}[/]")
            out.print(f"    #{r['version']} step {r['step']} {r['task_id']} reward={_fmt(r['reward'])} strict={strict} "
                      f"len={r['length']} {r['preview']!r}{blob}", highlight=False)
            if r.get("turns") is not None:  # an episode: its turns, observations over a few lines
                for line in episode_lines(r["turns"], max_lines=VERBOSE_LINES, width=160, obs_lines=5,
                                          more="--json holds every kept turn"):
                    out.print("    " + line, highlight=False, markup=False)
    if chain.skill:
        s = chain.skill
        out.print(f"  [bold]skill[/] {s['skill_id']} {s['name']} (#{s['version']})")
    out.print("  [bold]plugins[/] " + ", ".join(f"{k} {v}" for k, v in chain.plugin_versions.items()))
    o = chain.outcome
    b, a = o["before"], o["after"]
    out.print(f"  [bold]afterwards[/] ({o['window']} steps before vs after): prediction {_yn(o['held'])}")
    if o["targets"]:
        out.print(f"    diagnosis rate of {', '.join(o['targets'])}: {_fmt(b['diag_rate'])} → {_fmt(a['diag_rate'])} per step"
                  + (f" (statistic {_fmt(b['diag_stat'])} → {_fmt(a['diag_stat'])})" if b["diag_stat"] is not None else "")
                  + f": {_yn(o['diagnosis_rate_fell'], 'fell', 'did not fall')}")
    out.print(f"    {o['guard_metric']}: {_fmt(b['guard'])} → {_fmt(a['guard'])} (tolerance {o['tolerance']}): {_yn(o['guard_held'])}")
    out.print(f"    strict oracle: accuracy {_fmt(b['strict_accuracy'])} → {_fmt(a['strict_accuracy'])}, exploit rate "
              f"{_fmt(b['exploit_rate'])} → {_fmt(a['exploit_rate'])} ({b['strict_n']}/{a['strict_n']} labelled): {_yn(o['strict_held'])}")


def render_report(report: AuditReport, out: Console) -> None:
    out.print(f"[bold]run {report.run_id}[/]: {report.promotions} promotions, {report.rejections} rejections")
    if not report.chains:
        out.print("  no promotions to audit")
    for chain in report.chains:
        out.print()
        render_chain(chain, out)

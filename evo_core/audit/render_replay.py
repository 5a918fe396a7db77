"""Terminal rendering of a counterfactual replay."""

from __future__ import annotations

from collections import Counter

from rich.console import Console

from evo_core.audit.replay_result import ReplayResult

SHOW = 25  # rows per list on the terminal; --json has them all


def _rows(out: Console, rows: list, fmt) -> None:
    for r in rows[:SHOW]:
        out.print("    " + fmt(r))
    if len(rows) > SHOW:
        out.print(f"    … {len(rows) - SHOW} more (use --json)")


def render_replay(res: ReplayResult, out: Console) -> None:
    s = res.summary()
    with_ = ' ; '.join(res.spec.text) or ("the later harness" if res.find_bad else "its own harness")
    out.print(f"[bold]replay of run {res.run_id}[/] with {with_}")
    out.print("  plugins: " + ", ".join(f"{k} {v}" for k, v in res.plugin_versions.items()))
    out.print(f"  {s['events_scanned']:,} events, {s['passes']} diagnostic passes (every {res.every} steps, "
              f"window {res.window_steps} steps), {s['findings']} findings; decisions: "
              f"{s.get('recorded_decisions', 0)} recorded, {s.get('replayed_decisions', 0)} replayed")
    if res.reproduced:
        out.print("  [green]harness events reproduced exactly[/] (every pass, apart from event ids)")
    else:
        first = res.divergences[0]
        out.print(f"  harness events differ at {len(res.divergences)} passes; first at step {first['step']}: "
                  f"{first['difference']}")
    for note in res.notes:
        out.print(f"  [yellow]note:[/] {note}")
    for f in res.failures[:5]:
        out.print(f"  [red]plugin failed:[/] {f}")
    kinds = Counter(a["kind"] for a in res.appeared)
    out.print(f"  [bold]diagnoses that appear:[/] {len(res.appeared)}"
              + (" (" + ", ".join(f"{k} ×{n}" for k, n in kinds.most_common()) + ")" if kinds else ""))
    _rows(out, res.appeared, lambda a: f"[green]+[/] step {a['step']} {a['kind']} [{a['severity']}] by {a['diagnostic']}"
                                           + (f" value={a['value']:.3g}" if isinstance(a.get("value"), float) else ""))
    out.print(f"  [bold]diagnoses that vanish:[/] {len(res.vanished)}")
    _rows(out, res.vanished, lambda v: f"[red]-[/] step {v['step']} {v['kind']} by {v['diagnostic']}")
    out.print(f"  [bold]decisions that flip:[/] {len(res.flips)}")
    _rows(out, res.flips, lambda f: f"step {f['step']} {f['subject']} {f['subject_id'][:12]} "
                                      + (f"(decision {f['decision_id'][:12]})" if f["decision_id"] else "(replay only)")
                                      + f": {f['recorded']} → [bold]{f['would']}[/] — {'; '.join(f['reasons'])}")
    if res.find_bad:
        caught = [b for b in res.bad_promotions if b["verdict"] == "caught"]
        missed = [b for b in res.bad_promotions if b["verdict"] == "missed"]
        alarms = [b for b in res.bad_promotions if b["verdict"] == "false alarm"]
        out.print(f"  [bold]harmful promotions (strict oracle):[/] {len(caught) + len(missed)}; the later harness would "
                  f"have blocked [green]{len(caught)}[/], missed [red]{len(missed)}[/]; false alarms {len(alarms)}")

        def fmt(b):
            sa, ex = b["strict_accuracy"], b["exploit_rate"]
            num = lambda x: "–" if x is None else f"{x:.2f}"
            return (f"{b['verdict']:>11}  step {b['step']} {b['subject']} {b['subject_id'][:12]} (decision {b['decision_id'][:12]}): "
                    f"strict acc {num(sa[0])}→{num(sa[1])}, exploit {num(ex[0])}→{num(ex[1])}"
                    + (f" — {'; '.join(b['reasons'])}" if b["reasons"] else ""))
        _rows(out, res.bad_promotions, fmt)
    if res.stream:
        out.print(f"  recorded in stream [bold]{res.stream}[/] (the run itself is unchanged)")

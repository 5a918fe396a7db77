"""The default ``evo audit`` view: one screen per promotion.

Each screen holds what was promoted (with its predicate), the diagnosis, a few evidence
rollouts, every backtest and gate with its key figures, and whether the prediction held;
at most ``MAX_LINES`` lines of at most ``WIDTH`` characters. Below it, up to ``EPISODES`` of
its evidence rollouts that are episodes, as their turns (``evidence_episodes``: at most 40
lines each). The plugins that took part are listed once, above the screens. ``render.render_report`` is the full view (``--verbose``).
"""

from __future__ import annotations

import textwrap
from typing import Any, Iterable, Mapping, Optional, Sequence

from rich.console import Console
from rich.text import Text

from evo_core.audit.chain import AuditChain, AuditReport
from evo_core.audit.episode import MAX_LINES as EPISODE_LINES
from evo_core.audit.episode import episode_lines

WIDTH = 100
MAX_LINES = 30
EVIDENCE = 5  # rollouts shown per screen
EPISODES = 3  # evidence episodes shown as turns below a screen (each at most EPISODE_LINES lines)
KEY_FIGURES = 4  # numbers shown per gate or backtest
_KIND_ORDER = ("engine", "diagnostic", "proposer", "intervention", "backtester", "gate")


def fit(text: str, width: int = WIDTH) -> str:
    """One line of at most ``width`` characters (newlines folded, an overlong end cut with …)."""
    text = " ".join(str(text).split("\n"))
    return text if len(text) <= width else text[: width - 1] + "…"


def num(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.3g}"
    return "–" if v is None else str(v)


def describe_predicate(p: Any) -> str:
    """A predicate of the spec DSL as text: ``feature.numbers > 1 and field.reward >= 1``."""
    if not isinstance(p, Mapping):
        return str(p)
    for key, joiner in (("all", " and "), ("any", " or ")):
        if key in p and isinstance(p[key], list):
            parts = [describe_predicate(x) for x in p[key]]
            return joiner.join(f"({x})" if (" and " in x or " or " in x) else x for x in parts)
    if "not" in p:
        return f"not ({describe_predicate(p['not'])})"
    for ref in ("feature", "signal", "field"):
        if ref in p:
            op = p.get("op", "?")
            return f"{ref}.{p[ref]} {op}" + ("" if op == "exists" else f" {p.get('value')!r}")
    return str(dict(p))


def _params(params: Mapping[str, Any], skip: Iterable[str] = ("predicate",)) -> str:
    return " ".join(f"{k}={num(v) if not isinstance(v, (dict, list)) else '…'}"
                    for k, v in params.items() if k not in skip)


# Figures a reader looks for first, where a table has them (the rest follow in table order).
_FIRST = ("mean_diff", "diff", "delta", "precision", "recall", "false_positive_rate", "gap_before", "gap_after",
          "candidate_strict", "main_strict", "rate", "value", "threshold", "better", "k_steps")


def key_figures(figures: Mapping[str, Any], room: int = WIDTH, n: int = KEY_FIGURES) -> str:
    """Up to ``n`` numeric figures as ``name=value``, the best known first, as many as fit in
    ``room`` characters (nested tables, lists and labels are left to --verbose)."""
    nums = {k: v for k, v in figures.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    keys = [k for k in _FIRST if k in nums] + [k for k in nums if k not in _FIRST]
    out: list[str] = []
    for k in keys[:n]:
        piece = f"{k}={num(nums[k])}"
        if len(" ".join(out + [piece])) > room:
            break
        out.append(piece)
    return " ".join(out)


def folded(text: str, indent: str, max_lines: int = 2, first: str = "") -> list[str]:
    """``first + text`` folded into at most ``max_lines`` lines of ``WIDTH`` (the last cut with …)."""
    lines = textwrap.wrap(" ".join(str(text).split()), WIDTH, initial_indent=first or indent, subsequent_indent=indent,
                          break_long_words=True) or [first.rstrip()]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = fit(lines[-1] + " …" if len(lines[-1]) < WIDTH - 1 else lines[-1][:-1] + "…")
    return lines


def plugins_taking_part(chains: Sequence[AuditChain]) -> list[str]:
    """``kind name version`` for each plugin that took part in any chain, once, by kind."""
    seen: dict[str, str] = {}
    for c in chains:
        for key, ver in c.plugins.items():
            seen.setdefault(key, ver)

    def order(key: str) -> tuple[int, str]:
        kind = key.split(":", 1)[0]
        return (_KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER), key)

    def label(key: str, ver: str) -> str:
        name = key.split(":", 1)[1] if key.startswith("engine:") else key.replace(":", " ", 1)
        return name if ver in ("", "?") else f"{name} {ver}"

    return [label(k, seen[k]) for k in sorted(seen, key=order)]


def wrap_items(label: str, items: Sequence[str], width: int = WIDTH) -> list[str]:
    """``label item, item, …`` wrapped at ``width``, continuation lines indented."""
    lines, cur = [], label
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if len(cur) + 1 + len(piece) > width and cur.strip():
            lines.append(cur)
            cur = " " * len(label)
        cur = f"{cur} {piece}" if cur.strip() else f"{cur}{piece}" if cur else piece
    lines.append(cur)
    return [fit(x, width) for x in lines]


def _yn(v: Optional[bool], yes: str, no: str) -> str:
    return yes if v else no


def prediction_lines(o: Mapping[str, Any]) -> list[str]:
    """Whether the prediction held, with only the measures that had data."""
    b, a = o["before"], o["after"]
    held = o["held"]
    verdict = {True: "held", False: "did NOT hold", None: "not judged: no data"}[held]
    lines = [f"prediction {verdict} ({o['window']} steps before vs after)"]
    if o["diagnosis_rate_fell"] is not None:
        stat = f", statistic {num(b['diag_stat'])} → {num(a['diag_stat'])}" if b["diag_stat"] is not None else ""
        lines.append(f"  {', '.join(o['targets'])} diagnoses per step {num(b['diag_rate'])} → {num(a['diag_rate'])}"
                     f"{stat}: {_yn(o['diagnosis_rate_fell'], 'fell', 'did not fall')}")
    if o["guard_held"] is not None:
        lines.append(f"  {o['guard_metric']} {num(b['guard'])} → {num(a['guard'])} "
                     f"(tolerance {num(o['tolerance'])}): {_yn(o['guard_held'], 'held', 'FELL')}")
    if o["strict_held"] is not None:
        lines.append(f"  strict oracle: accuracy {num(b['strict_accuracy'])} → {num(a['strict_accuracy'])}, "
                     f"exploit rate {num(b['exploit_rate'])} → {num(a['exploit_rate'])} "
                     f"({b['strict_n']}/{a['strict_n']} labelled): {_yn(o['strict_held'], 'held', 'WORSE')}")
    return lines


def screen(chain: AuditChain, i: int, n: int, *, evidence: int = EVIDENCE) -> list[str]:
    """The lines of one promotion's screen (at most ``MAX_LINES``, each at most ``WIDTH``)."""
    d, p, v = chain.decision, chain.proposal, chain.verification
    hv = (f" · harness v{d['harness_version_before']} → v{d['harness_version_after']}"
          if d["harness_version_before"] != d["harness_version_after"] else "")
    head = f"── {d['decision']} {i}/{n} · step {d['step']}{hv} · #{d['version']} {d['id'][:12]} "
    lines = [head + "─" * max(0, WIDTH - len(head))]
    if not v.verified:  # the problem in full (ids included), folded rather than cut
        lines += textwrap.wrap(f"NOT VERIFIED, cannot be vouched for: {v.problem}", WIDTH,
                               subsequent_indent="  ", break_long_words=True)[:4]
    if p is not None:
        lines.append(f"{d['decision']} {p['kind']}/{p['name']} {_params(p['params'])}".rstrip())
        pred = p["params"].get("predicate")
        if pred is not None:
            lines.append(f"  predicate  {describe_predicate(pred)}")
        elif p["targets"]:
            lines.append(f"  applies while {', '.join(p['targets'])} is diagnosed (no predicate)")
        lines += folded(p["rationale"] or "–", "    ", 3, first=f"  proposed by {p['proposer'] or p['emitted_by']} "
                                                                  f"at step {p['step']}: ")
    elif d["subject"] == "policy":
        lines.append(f"{d['decision']} policy v{d['subject_id']} to the main line")
    else:
        lines.append(f"{d['decision']} {d['subject']} {d['subject_id'][:40]}")
    for g in chain.diagnoses[:2]:
        what = f"diagnosis {g['kind']} [{g['severity']}] at step {g['step']} by {g['diagnostic']}: "
        lines.append(what + key_figures(g["stats"], WIDTH - len(what)))
        if g["message"]:
            lines += folded(f"{g['message']} ({g['n_evidence']} rollouts cited)", "  ", 1)
    if len(chain.diagnoses) > 2:
        lines.append(f"  … {len(chain.diagnoses) - 2} more diagnoses (--verbose)")
    if not chain.diagnoses:
        lines.append("diagnosis none on the chain")
    shown = chain.evidence[:evidence]
    if chain.evidence_total:
        lines.append(f"evidence {len(shown)} of {chain.evidence_total} rollouts")
        for r in shown:
            strict = {True: "✓", False: "✗", None: "·"}[r["strict_correct"]]
            blob = "" if not r["blob"] or r["blob"]["status"] in ("ok", "not checked") else f" BLOB {r['blob']['status']}"
            lines.append(f"  #{r['version']} step {r['step']} {r['task_id']} reward {num(r['reward'])} strict {strict} "
                         f"{r['preview']!r}{blob}")
    lines.append("gates")
    for b in chain.backtests[:3]:
        mark = {True: "passed", False: "failed", None: "no decision"}[b["passed"]]
        ci = f" CI [{num(b['ci'][0])}, {num(b['ci'][1])}]" if b["ci"] else ""
        who = b["emitted_by"].rpartition(" ")[0] or b["mode"]
        what = f"  backtest {who} ({b['mode']}) {mark}: n={b['n']}{ci} "
        lines.append((what + key_figures(b["figures"], WIDTH - len(what))).rstrip())
    if len(chain.backtests) > 3:
        lines.append(f"  … {len(chain.backtests) - 3} more backtests (--verbose)")
    gates = (d["figures"].get("gates") or {}) if isinstance(d["figures"], dict) else {}
    for name, g in list(gates.items())[:4]:
        if not isinstance(g, dict):
            continue
        mark = "passed" if g.get("passed") else ("VETO" if g.get("veto") else "failed")
        reasons = [str(r) for r in g.get("reasons") or []]
        what = f"  gate {name} {mark}"
        figs = key_figures(g.get("figures") or {}, WIDTH - len(what) - 2)
        if len(reasons) == 1 and len(what) + len(figs) + len(reasons[0]) + 5 <= WIDTH:
            lines.append(f"{what}: {reasons[0]}" + (f" ({figs})" if figs else ""))
            continue
        lines.append(f"{what}: {figs}" if figs else what)
        for r in reasons[:3]:
            lines += folded(r, "      ", 2, first="    ")
    if not gates:
        lines.append(f"  gate {d['gate']} {d['decision']}: {'; '.join(d['reasons']) or 'no reasons given'}")
    lines += prediction_lines(chain.outcome)
    lines = [fit(x) for x in lines]
    if len(lines) > MAX_LINES:
        lines = lines[: MAX_LINES - 1] + [fit(f"… {len(lines) - MAX_LINES + 1} more lines: "
                                              f"evo audit {chain.run_id} -p {d['id'][:12]} --verbose")]
    return lines


def evidence_episodes(chain: AuditChain, *, evidence: int = EVIDENCE, episodes: int = EPISODES,
                      max_lines: int = EPISODE_LINES) -> list[list[str]]:
    """The screen's evidence rollouts that are episodes, each as its turns: at most
    ``episodes`` of them, each at most ``max_lines`` lines (its header line included)."""
    out = []
    for r in [r for r in chain.evidence[:evidence] if r.get("turns") is not None][:episodes]:
        strict = {True: "✓", False: "✗", None: "·"}[r["strict_correct"]]
        head = (f"episode #{r['version']} step {r['step']} {r['task_id']} reward {num(r['reward'])} strict {strict}: "
                f"{len(r['turns'])} turns")
        out.append(episode_lines(r["turns"], max_lines=max_lines, width=WIDTH, header=head))
    return out


def header(report: AuditReport) -> list[str]:
    lines = [f"run {report.run_id}: {report.promotions} promotions, {report.rejections} rejections"]
    if report.chains:
        ok = [c for c in report.chains if c.verification.verified]
        lo = min(c.verification.first_version for c in report.chains)
        hi = max(c.verification.head_version for c in report.chains)
        lines.append(f"hash chain NOT verified for {len(report.chains) - len(ok)} of {len(report.chains)} chains"
                     if len(ok) < len(report.chains) else f"hash chain verified (events #{lo}–#{hi})")
        lines += wrap_items("plugins that took part:", plugins_taking_part(report.chains))
    return [fit(x) for x in lines]


def render_screens(report: AuditReport, out: Console, *, evidence: int = EVIDENCE) -> None:
    for line in header(report):
        out.print(Text(line))
    if not report.chains:
        out.print(Text("no promotions to audit"))
    n = len(report.chains)
    for i, chain in enumerate(report.chains, 1):
        out.print()
        for j, line in enumerate(screen(chain, i, n, evidence=evidence)):
            style = "bold" if j == 0 else ("red" if "NOT VERIFIED" in line or "did NOT hold" in line else None)
            out.print(Text(line, style=style or ""))
        for block in evidence_episodes(chain, evidence=evidence):
            for j, line in enumerate(block):
                out.print(Text(line, style="bold" if j == 0 else ""))
    if report.chains:
        out.print()
        out.print(Text(fit("--verbose: every event of each chain; --json: the chains as JSON; "
                           "-p ID: one promotion")))


__all__ = ["render_screens", "screen", "evidence_episodes", "header", "describe_predicate", "WIDTH", "MAX_LINES"]

"""The page comparing several runs: final figures side by side, overlaid curves, the runs'
decisions aligned by step, and diagnoses per window. Each run keeps one colour throughout;
the first run is the baseline the table's differences are taken against."""

from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import Any, Optional, Sequence

from evo_core.report import sections, svg
from evo_core.report.data import RunData
from evo_core.report.figures import SPLITS, compared_curves, final_figures
from evo_core.report.page import SEVERITY_COLOURS, document, filter_buttons, run_colour, swatch, table

PROMOTED, REJECTED, SKILL = svg.GOOD, svg.BAD, "#9467bd"


def _overlay(datas: Sequence[RunData], curves: Sequence[dict[str, dict[int, float]]], colours: Sequence[str],
             variants: Sequence[tuple[str, str, str]], *, title: str, ylabel: str, xlim: tuple[float, float],
             max_points: int, per_step: Sequence[str] = ()) -> Optional[str]:
    """One chart, a line per (run, variant); ``variants`` are (curve name, style label, dash).
    ``per_step``: curves logged every step, drawn faint with its moving mean over it, since several
    noisy curves on one axis cannot be told apart. None when no run has any of the curves
    (an absent figure is not drawn)."""
    series, styles, used = [], [], []
    for data, run_curves, colour in zip(datas, curves, colours):
        for name, label, dash in variants:
            points = run_curves.get(name)
            if not points:
                continue
            for one, style in sections.curve(f"{data.run_id} · {label}", points, svg.Style(colour, dash),
                                             max_points=max_points, per_step=name in per_step):
                series.append(one)
                styles.append(style)
            if (label, dash) not in used:
                used.append((label, dash))
    if not series:
        return None
    runs = "".join(svg.line_key(d.run_id, c)
                   for d, c, run_curves in zip(datas, colours, curves) if any(run_curves.get(n) for n, _, _ in variants))
    keys = "".join(svg.line_key(label, "#555", dash) for label, dash in used) if len(used) > 1 else ""
    if any(sections.is_smoothed(c.get(n) or {}) for c in curves for n in per_step):
        keys += sections.SMOOTH_NOTE
    return svg.line_chart(series, title=title, ylabel=ylabel, styles=styles, xlim=xlim, width=svg.WIDE, left=svg.LANE_ML,
                          legend=f'<div class="legend">{runs}{keys}</div>')


def _decision_marks(data: RunData) -> tuple[list[svg.Mark], list[svg.Mark], list[svg.Mark]]:
    interventions, policies, skills = [], [], []
    for d in data.decisions:
        if not isinstance(d["step"], int):
            continue
        promoted = d["decision"] == "promoted"
        name = (d["proposal"] or {}).get("name") or str(d["subject_id"])
        if d["subject"] == "policy":
            tip = f"policy v{d['subject_id']} {d['decision']} at step {d['step']} by {d['gate']}"
            policies.append(svg.Mark(x=d["step"], shape="dot" if promoted else "ring", colour=PROMOTED if promoted else REJECTED,
                                     tip=tip, href=f"#d-{d['id']}"))
        else:
            tip = f"{d['subject']} {name} {d['decision']} at step {d['step']} by {d['gate']}"
            interventions.append(svg.Mark(x=d["step"], shape="tri" if promoted else "cross",
                                          colour=PROMOTED if promoted else REJECTED, tip=tip, href=f"#d-{d['id']}"))
    for s in data.skills.values():
        skills.append(svg.Mark(x=s.get("step", 0), shape="star", colour=SKILL, tip=f"skill {s['name']} registered at step {s.get('step')}",
                               href=f"#s-{s.get('step', 0)}"))
    return interventions, policies, skills


def _decision_strip(datas: Sequence[RunData], colours: Sequence[str], xlim: tuple[float, float]) -> str:
    """A lane per run, a row per kind of decision; a row no run has is left out."""
    size = sections.window_size(xlim)
    per_run = []
    for data in datas:
        counts, worst = sections.all_diagnoses(data)
        diag = sections.window_row("diagnoses", counts, worst, xlim, size, href=lambda step: f"#s-{step}")
        interventions, policies, skills = _decision_marks(data)
        per_run.append({"diagnoses": diag.marks, "interventions": interventions, "policy": policies, "skills": skills})
    present = [name for name in ("diagnoses", "interventions", "policy", "skills") if any(rows[name] for rows in per_run)]
    lanes = [svg.Lane(data.run_id, colour, [svg.Row(name, rows[name]) for name in present])
             for data, colour, rows in zip(datas, colours, per_run)]
    legend = svg.glyph_legend([("tri", PROMOTED, "intervention promoted"), ("cross", REJECTED, "intervention rejected"),
                               ("dot", PROMOTED, "policy promoted (main line)"), ("ring", REJECTED, "policy rejected"),
                               ("star", SKILL, "skill registered"), ("cell", "#d62728", "diagnoses (worst: invalid)"),
                               ("cell", "#ff7f0e", "warning"), ("cell", "#9e9e9e", "info")])
    return svg.lanes_chart(lanes, xlim=xlim, title="Decisions of each run over steps (click a mark for its entry)", legend=legend)


def _entries(data: RunData) -> dict[int, list[str]]:
    """What the run did, by step, as the side-by-side table's cell entries: diagnoses, then
    intervention and policy decisions in log order, then skills."""
    out: dict[int, list[str]] = defaultdict(list)
    for kind, per_step in sorted(data.diagnoses.items()):
        for step, n in per_step.items():
            sev = data.diag_severity[kind].get(step, "info")
            out[step].append(f'<div class="ev diag"><b style="color:{SEVERITY_COLOURS.get(sev, "#9e9e9e")}">◆</b> '
                             f'{escape(kind)}{f" ×{n}" if n > 1 else ""} [{escape(sev)}]</div>')
    skills: dict[int, list[str]] = defaultdict(list)
    for s in data.skills.values():
        skills[s.get("step", 0)].append(f'<div class="ev skill"><b>★</b> skill {escape(s["name"])} <code>{escape(s["skill_id"])}</code></div>')
    for d in data.decisions:
        if not isinstance(d["step"], int):
            continue
        promoted = d["decision"] == "promoted"
        reasons = escape("; ".join(d["reasons"]))[:160]
        ident = f' <code title="evo audit {escape(data.run_id)} --promotion {escape(d["id"])}">{escape(d["id"][:12])}</code>'
        if d["subject"] == "policy":
            what = f'<b>{"●" if promoted else "○"}</b> policy v{escape(str(d["subject_id"]))} {d["decision"]}'
            what += " (main line)" if promoted else f": {reasons}"
        else:
            name = escape((d["proposal"] or {}).get("name") or str(d["subject_id"]))
            what = f'<b>{"▲" if promoted else "✕"}</b> {escape(str(d["subject"]))} {name}'
            what += f' · harness v{d["harness_before"]}→v{d["harness_after"]}' if promoted else f": {reasons}"
        out[d["step"]].append(f'<div class="ev {d["decision"]}" id="d-{escape(d["id"])}">{what} · {escape(d["gate"] or "")}{ident}</div>')
    for step, entries in skills.items():
        out[step] += entries
    return out


def _side_by_side(datas: Sequence[RunData], colours: Sequence[str]) -> str:
    per_run = [_entries(d) for d in datas]
    steps = sorted({s for entries in per_run for s in entries})
    rows = [f'<tr id="s-{s}"><td>{s}</td>' + "".join(f"<td>{''.join(entries.get(s, ()))}</td>" for entries in per_run) + "</tr>"
            for s in steps]
    headers = ["step"] + [swatch(c) + escape(d.run_id) for d, c in zip(datas, colours)]
    return table(headers, rows, table_id="decisions", cls="side")


def render_compare(datas: Sequence[RunData], *, benchmark: Optional[dict[str, dict[str, float]]] = None,
                   max_points: int = 400) -> str:
    colours = [run_colour(i) for i in range(len(datas))]
    figs = [final_figures(d) for d in datas]
    curves = [compared_curves(d) for d in datas]
    xlim = sections.step_range(max(d.last_step for d in datas))
    chips = " · ".join(f'{swatch(c)}<b>{escape(d.run_id)}</b> ({escape(d.mode or "?")}, {d.events:,} events, '
                       f'{len(d.decisions)} decisions)' for d, c in zip(datas, colours))
    parts: list[Any] = [f"<h1>Comparing {len(datas)} runs</h1>", f'<p class="meta">{chips}</p>']
    parts.append(sections.verification_of(datas))
    parts += ["<h2>Final figures</h2>", sections.figures_table(figs, colours),
              f'<p class="note">Differences in brackets are against the first run, {escape(datas[0].run_id)}.</p>',
              sections.absent_note(figs)]
    charts = [_overlay(datas, curves, colours, [(split, "sampled", ""), (f"{split}/greedy", "greedy", "6 4")],
                       title=f"{split.capitalize()} strict accuracy", ylabel="strict accuracy", xlim=xlim, max_points=max_points)
              for split in SPLITS]
    charts.append(_overlay(datas, curves, colours, [("reward", "training reward", "")], title="Training reward",
                           ylabel="reward", xlim=xlim, max_points=max_points, per_step=("reward",)))
    charts.append(_overlay(datas, curves, colours, [("hack/validation", "validation", ""), ("hack/test", "test", "6 4"),
                                                    ("hack/train", "train", "2 3")],
                           title="Hack rate: responses the training verifier pays and the oracle rejects", ylabel="rate",
                           xlim=xlim, max_points=max_points, per_step=("hack/train",)))
    parts += ["<h2>Curves</h2>", *(c for c in charts if c)]
    size = sections.window_size(xlim)
    lanes = [svg.Lane(d.run_id, c, sections.diagnosis_rows(d, xlim, size, href=lambda step: f"#s-{step}"))
             for d, c in zip(datas, colours)]
    parts += ["<h2>Decisions side by side</h2>", _decision_strip(datas, colours, xlim),
              "<h2>Diagnoses over time, by kind</h2>",
              svg.lanes_chart([lane for lane in lanes if lane.rows], xlim=xlim, title="Diagnoses per window, by run and kind",
                              legend=sections.diagnoses_legend(size)),
              "<h2>Decisions step by step</h2>",
              filter_buttons([("promoted", "promotions"), ("rejected", "rejections"), ("diag", "diagnoses"), ("skill", "skills")]),
              '<p class="note">One row per step at which any run diagnosed, decided or registered a skill. Hover an id for '
              'the <code>evo audit</code> command that shows its evidence chain, hash-verified.</p>',
              _side_by_side(datas, colours)]
    parts += sections.benchmark_section(benchmark)
    parts += sections.skills_section(datas)
    return document(f"EvoTrainer: comparing {', '.join(d.run_id for d in datas)}", parts)

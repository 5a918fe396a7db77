"""Sections both report pages use: the final-figures table, diagnoses per window, the
benchmark comparison, the skills table and the hash-chain line."""

from __future__ import annotations

import math
from html import escape
from typing import Callable, Optional, Sequence

import attrs

from evo_core.report import svg
from evo_core.report.data import SEVERITY_RANK, RunData, downsample, smooth
from evo_core.report.figures import SPLITS, FinalFigures
from evo_core.report.page import SEVERITY_COLOURS, j, num, swatch, table

MAX_WINDOWS = 120  # cells per diagnoses row: a few pixels each at the chart's width
SMOOTH_MIN, SMOOTH_SHARE = 30, 25  # a per-step curve of 30+ points gets a moving mean over a 25th of it


def curve(name: str, points: dict[int, float], style: svg.Style, *, max_points: int,
          per_step: bool = False) -> list[tuple[tuple[str, list[tuple[float, float]]], svg.Style]]:
    """The (series, style) pairs that draw one curve. A per-step curve (reward, say) is noisy:
    it is drawn faint, with its moving mean bold over it, so that several stay apart."""
    if not (per_step and len(points) >= SMOOTH_MIN):
        return [((name, downsample(points, max_points)), style)]
    mean = smooth(points, max(3, len(points) // SMOOTH_SHARE))
    return [((f"{name} (per step)", downsample(points, max_points)), attrs.evolve(style, opacity=0.22, width=1.0)),
            ((name, downsample(mean, max_points)), attrs.evolve(style, width=2.0))]


def is_smoothed(points: dict[int, float]) -> bool:
    return len(points) >= SMOOTH_MIN


SMOOTH_NOTE = '<span class="key note">faint: per step; bold: moving mean</span>'


def _delta(v: Optional[float], base: Optional[float]) -> str:
    if v is None or base is None:
        return ""
    return f'<span class="delta">({v - base:+.3f})</span>'


def figures_table(figs: Sequence[FinalFigures], colours: Sequence[str]) -> str:
    """A column per run, a row per figure. A figure no run has is left out; with several runs,
    numbers carry their difference from the first run (the baseline)."""
    base = figs[0]

    def delta(f: FinalFigures, v: Optional[float], b: Optional[float]) -> str:
        return _delta(v, b) if len(figs) > 1 and f is not base else ""

    def fig(get: Callable[[FinalFigures], Optional[float]]) -> Callable[[FinalFigures], str]:
        return lambda f: num(get(f)) + delta(f, get(f), get(base))

    def at(split: str) -> Callable[[FinalFigures], str]:
        def cell(f: FinalFigures) -> str:
            got, b = f.last_strict.get(split), base.last_strict.get(split)
            if got is None:
                return "–"
            return f'{got[1]:.3f}<span class="delta">@{got[0]}</span>{delta(f, got[1], b[1] if b else None)}'
        return cell

    rows: list[tuple[str, Callable[[FinalFigures], str], bool]] = [
        ("harness mode", lambda f: escape(f.mode or "?"), True),
        ("status", lambda f: escape(f.status), True),
        ("steps", lambda f: f"{f.steps:,}", True),
    ]
    for split in SPLITS:
        rows.append((f"{split} strict accuracy <small>(last eval, @step)</small>", at(split),
                     any(split in f.last_strict for f in figs)))
    rows.append(("main line <small>(policy version the gate promoted last)</small>",
                 lambda f: "–" if f.main_version is None else f"v{f.main_version}", any(f.main_version is not None for f in figs)))
    for split in SPLITS:
        rows.append((f"main line {split} strict accuracy", fig(lambda f, s=split: f.main_strict.get(s)),
                     any(split in f.main_strict for f in figs)))
    rows.append(("training reward <small>(mean of the last 10% of steps)</small>", fig(lambda f: f.reward_end),
                 any(f.reward_end is not None for f in figs)))
    for split in SPLITS:
        rows.append((f"hack rate, {split} <small>(last eval)</small>", fig(lambda f, s=split: f.hack_rate.get(s)),
                     any(split in f.hack_rate for f in figs)))
    rows += [
        ("diagnoses <small>(invalid)</small>", lambda f: f"{f.diagnoses} ({f.invalid_diagnoses})", True),
        ("interventions promoted / rejected", lambda f: f"{f.interventions[0]} / {f.interventions[1]}", True),
        ("policies promoted / rejected", lambda f: f"{f.policies[0]} / {f.policies[1]}", any(sum(f.policies) for f in figs)),
        ("skills registered", lambda f: str(f.skills), True),
        ("strict-oracle labels <small>(all purposes; decision-relevant: all but test)</small>", oracle_cell,
         any(f.oracle_labels for f in figs)),
        ("hash chain", lambda f: {True: '<span class="ok">✓ verified</span>', False: '<span class="bad">✗ broken</span>'}.get(f.verified, "–"),
         any(f.verified is not None for f in figs)),
    ]
    body = [f"<tr><td>{label}</td>" + "".join(f"<td>{render(f)}</td>" for f in figs) + "</tr>"
            for label, render, shown in rows if shown]
    headers = ["figure"] + [swatch(c) + escape(f.run_id) for f, c in zip(figs, colours)]
    return table(headers, body, cls="figures")


def oracle_cell(f: FinalFigures) -> str:
    """Total labels, then by purpose (main line + A/B branches), then the branches' share."""
    if not f.oracle_labels:
        return "–"
    by_purpose: dict[str, int] = {}
    for key, n in f.oracle_labels.items():
        purpose = key.split(".", 1)[-1]
        by_purpose[purpose] = by_purpose.get(purpose, 0) + n
    branch = sum(n for k, n in f.oracle_labels.items() if k.startswith("branch."))
    parts = ", ".join(f"{p} {n:,}" for p, n in by_purpose.items() if n)
    return f"{sum(by_purpose.values()):,} <small>({escape(parts)}; A/B branches {branch:,})</small>"


def absent_note(figs: Sequence[FinalFigures]) -> str:
    missing = [name for name, have in (
        ("test-split evals", any("test" in f.last_strict for f in figs)),
        ("hack rate", any(f.hack_rate for f in figs)),
        ("policy decisions (which checkpoint is the main line)", any(f.main_version is not None for f in figs)),
    ) if not have]
    return f'<p class="note">Not in {"these logs" if len(figs) > 1 else "this log"}: {", ".join(missing)}.</p>' if missing else ""


def verification_of(datas: Sequence[RunData]) -> str:
    """One line for the runs whose chains verified, one per run whose chain did not."""
    good = [d for d in datas if d.verified]
    out = [verification(d, name=d.run_id) for d in datas if d.verified is False]
    if good:
        everyone = "both runs" if len(datas) == 2 else f"all {len(datas)} runs"
        names = everyone if len(good) == len(datas) else ", ".join(d.run_id for d in good)
        out.insert(0, f'<p class="ok">✓ hash chain verified for every event of {escape(names)}</p>')
    return "".join(out)


def verification(data: RunData, *, name: str = "this run") -> str:
    if data.verified is None:
        return ""
    if data.verified:
        return f'<p class="ok">✓ hash chain verified for every event of {escape(name)}</p>'
    return f'<p class="bad">✗ hash chain of {escape(name)} NOT verified: {escape(data.verify_problem or "")}</p>'


def window_size(xlim: tuple[float, float]) -> int:
    return max(1, math.ceil((xlim[1] - xlim[0]) / MAX_WINDOWS))


def step_range(last_step: float) -> tuple[float, float]:
    """The x range of a page's step charts: from 0 to a whole number of diagnosis windows
    past the last step, so that the last window is drawn whole."""
    span = max(float(last_step), 1.0) + 1
    size = max(1, math.ceil(span / MAX_WINDOWS))
    return 0.0, float(size * math.ceil(span / size))


def window_row(label: str, per_step: dict[int, int], severity: dict[int, str], xlim: tuple[float, float], size: int,
               href: Callable[[int], str]) -> svg.Row:
    """Diagnoses as a cell per window of ``size`` steps, shaded by count and coloured by the
    worst severity in it; each cell links to its first step."""
    windows: dict[int, list] = {}
    for step, n in per_step.items():
        cell = windows.setdefault(int((step - xlim[0]) // size), [0, "info", step])
        cell[0] += n
        sev = severity.get(step, "info")
        if SEVERITY_RANK.get(sev, 0) > SEVERITY_RANK.get(cell[1], 0):
            cell[1] = sev
        cell[2] = min(cell[2], step)
    most = max((c[0] for c in windows.values()), default=1)
    marks = []
    for w, (n, sev, first) in sorted(windows.items()):
        lo = xlim[0] + w * size
        span = f"step {int(lo)}" if size == 1 else f"steps {int(lo)}–{int(lo + size - 1)}"
        # a window holds steps lo … lo+size-1: the cell spans them half a step either side, so a
        # one-step cell is centred on its step, as the glyphs of the decision rows are
        marks.append(svg.Mark(x=max(xlim[0], lo - 0.5), x_end=min(xlim[1], lo + size - 0.5), shape="cell", colour=SEVERITY_COLOURS.get(sev, "#9e9e9e"),
                              opacity=0.3 + 0.7 * n / most, href=href(first),
                              tip=f"{label}: {n} diagnos{'is' if n == 1 else 'es'} in {span} (worst: {sev})"))
    return svg.Row(label, marks)


def diagnosis_rows(data: RunData, xlim: tuple[float, float], size: int, href: Callable[[int], str]) -> list[svg.Row]:
    """One row per diagnosis kind."""
    rows = []
    for kind, per_step in sorted(data.diagnoses.items()):
        row = window_row(kind, per_step, data.diag_severity[kind], xlim, size, href)
        rows.append(svg.Row(f"{kind} ({sum(per_step.values())})", row.marks))
    return rows


def all_diagnoses(data: RunData) -> tuple[dict[int, int], dict[int, str]]:
    """Every kind merged: count and worst severity per step."""
    counts: dict[int, int] = {}
    worst: dict[int, str] = {}
    for kind, per_step in data.diagnoses.items():
        for step, n in per_step.items():
            counts[step] = counts.get(step, 0) + n
            sev = data.diag_severity[kind].get(step, "info")
            if SEVERITY_RANK.get(sev, 0) >= SEVERITY_RANK.get(worst.get(step, "info"), 0):
                worst[step] = sev
    return counts, worst


def diagnoses_legend(size: int) -> str:
    items = [("cell", c, s) for s, c in SEVERITY_COLOURS.items()]
    per = "step" if size == 1 else f"{size}-step window"
    return (svg.glyph_legend(items)
            + f'<p class="note">One cell per {per} with diagnoses, coloured by its worst severity; '
              'darker means more diagnoses. Click a cell for its decisions.</p>')


def benchmark_section(benchmark: Optional[dict[str, dict[str, float]]]) -> list[str]:
    if not benchmark:
        return []
    metrics = sorted(set(benchmark["fixed"]) & set(benchmark["evolving"]))
    chart = svg.bar_chart(metrics, [("fixed", [benchmark["fixed"][m] for m in metrics]),
                                    ("evolving", [benchmark["evolving"][m] for m in metrics])],
                          title="Evolution benchmark: fixed vs evolving")
    rows = [f"<tr><td>{escape(m)}</td><td>{benchmark['fixed'][m]:.4g}</td><td>{benchmark['evolving'][m]:.4g}</td>"
            f"<td>{benchmark['evolving'][m] - benchmark['fixed'][m]:+.4g}</td></tr>" for m in metrics]
    return ["<h2>Fixed vs evolving harness</h2>", chart, table(["metric", "fixed", "evolving", "Δ"], rows)]


def skills_section(datas: Sequence[RunData]) -> list[str]:
    several = len(datas) > 1
    rows = []
    for data in datas:
        for s in data.skills.values():
            status = "retired: " + escape(s.get("retired_reason", "")) if s["retired"] else "active"
            rows.append("<tr>" + (f'<td class="nowrap">{escape(data.run_id)}</td>' if several else "")
                        + f"<td class=\"nowrap\">{escape(s['skill_id'])}</td><td>{escape(s['name'])}</td><td>{s.get('step', '')}</td>"
                          f"<td>{s['uses']}</td><td>{status}</td><td class=\"nowrap\">{escape(s.get('source_run') or '')}</td>"
                          f"<td><code>{j(s['bundle'])}</code></td></tr>")
    if not rows:
        return ["<h2>Skills</h2>", '<p class="empty">No skills were registered.</p>']
    headers = (["run"] if several else []) + ["skill", "name", "step", "uses", "status", "source run", "bundle"]
    return ["<h2>Skills</h2>", table(headers, rows)]

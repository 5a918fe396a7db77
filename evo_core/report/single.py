"""The page of one run: final figures, curves, diagnoses per window, the harness timeline,
skills and every gate decision."""

from __future__ import annotations

import bisect
from html import escape
from typing import Any, Callable, Optional

from evo_core.report import sections, svg
from evo_core.report.data import RunData, step_series
from evo_core.report.figures import GREEDY, HACK, SPLITS, final_figures, strict_key
from evo_core.report.page import document, filter_buttons, j, run_colour, table


def _decision_row(d: dict[str, Any]) -> str:
    """One decision; kept compact because a long run has thousands (the page must stay small)."""
    prop = d["proposal"] or {}
    what = f'{escape(prop.get("name", ""))} <code>{j(prop.get("params", {}))[:120]}</code>' if prop else escape(str(d["subject_id"]))
    bts = "; ".join(f'{ {True: "passed", False: "failed"}.get(b["passed"], "no decision")} {b.get("mode", "")}'
                    + (f' CI [{b["ci"][0]:.3g}, {b["ci"][1]:.3g}]' if b.get("ci") else "") for b in d["backtests"])
    diags = ", ".join(f'{escape(g["kind"])} [{escape(g["severity"])}]' for g in d["diagnoses"])
    pred = j(prop.get("prediction", {}))[:160] if prop else ""
    chain = f"{diags or '–'} → {escape(bts) or '–'}" + (f"<br><small>predicts {pred}</small>" if pred else "")
    return (f'<tr id="d-{escape(d["id"])}" class="ev {d["decision"]}"><td>{d["step"]}</td><td>{d["decision"][:3]}</td>'
            f'<td>{escape(str(d["subject"]))}: {what}</td><td>{escape(d["gate"] or "")}</td><td>{d["harness_before"]}→{d["harness_after"]}</td>'
            f'<td>{escape("; ".join(d["reasons"]))[:200]}</td><td>{chain}</td><td><small>{escape(d["id"])}</small></td></tr>')


def _chart(pairs: list, *, title: str, ylabel: str, xlim: tuple[float, float]) -> str:
    """A line chart of (series, style) pairs at the page's shared step geometry."""
    series, styles = [p for p, _ in pairs], [st for _, st in pairs]
    note = sections.SMOOTH_NOTE if any(st.opacity < 1 for st in styles) else ""
    return svg.line_chart(series, title=title, ylabel=ylabel, styles=styles, xlim=xlim, width=svg.WIDE, left=svg.LANE_ML,
                          legend_extra=note)


def _split_style(split: str, n: int, greedy: bool = False) -> svg.Style:
    colour = {"validation": svg.PALETTE[0], "test": svg.PALETTE[3]}.get(split, svg.PALETTE[4 + n % 5])
    return svg.Style(colour, "6 4" if greedy else "")


def _accuracy(data: RunData, max_points: int) -> list:
    pairs = []
    splits = list(SPLITS) + sorted({k.partition("/")[0] for k in data.evals} - set(SPLITS))
    for n, split in enumerate(splits):
        key = strict_key(data, split) or next((k.partition("/")[2] for k in sorted(data.evals)
                                               if k.startswith(f"{split}/") and "strict" in k and GREEDY not in k), None)
        if key:
            pairs += sections.curve(f"{split} {key}", data.evals[f"{split}/{key}"], _split_style(split, n), max_points=max_points)
        if data.evals.get(f"{split}/{GREEDY}"):
            pairs += sections.curve(f"{split} {GREEDY}", data.evals[f"{split}/{GREEDY}"], _split_style(split, n, greedy=True),
                                    max_points=max_points)
    return pairs


def render(data: RunData, *, benchmark: Optional[dict[str, dict[str, float]]] = None, max_points: int = 400) -> str:
    series = step_series(data)
    last_step = float(data.last_step or max((d["step"] for d in data.decisions), default=1))
    xlim = sections.step_range(last_step)
    figs = final_figures(data)

    def per_step(name: str, label: str, colour: str) -> list:
        points = series.get(name) or {}
        return sections.curve(label, points, svg.Style(colour), max_points=max_points, per_step=True) if points else []

    parts = [f"<h1>Run {escape(data.run_id)}</h1>",
             f'<p class="meta">{data.events:,} events · harness mode {escape(data.mode or "?")} · status {escape(data.status)}'
             f' · started {escape(data.started_at or "?")} · {len(data.decisions)} decisions · {len(data.skills)} skills'
             f' · {data.plugin_failures} plugin failures</p>',
             sections.verification(data),
             "<h2>Final figures</h2>", sections.figures_table([figs], [run_colour(0)]), sections.absent_note([figs])]
    parts.append("<h2>Reward and strict accuracy</h2>")
    parts.append(_chart(per_step("reward", "training reward", svg.PALETTE[0])
                        + per_step("train_strict", "strict oracle on train rollouts", svg.PALETTE[1]),
                        title="Training reward" + (" and the strict oracle on training rollouts" if series.get("train_strict") else ""),
                        ylabel="rate", xlim=xlim))
    accuracy = _accuracy(data, max_points)
    if accuracy:
        shown = list(dict.fromkeys(name.split(" ")[0] for (name, _), _ in accuracy))
        greedy = " (dashed: greedy decoding)" if any(GREEDY in name for (name, _), _ in accuracy) else ""
        parts.append(_chart(accuracy, title=f"Strict accuracy: {' and '.join(shown)}{greedy}", ylabel="strict accuracy",
                            xlim=xlim))
    hack = [pair for n, split in enumerate(SPLITS) if data.evals.get(f"{split}/{HACK}")
            for pair in sections.curve(f"{split} {HACK}", data.evals[f"{split}/{HACK}"], _split_style(split, n), max_points=max_points)]
    if data.step_metrics.get(HACK):
        hack += sections.curve(f"train {HACK}", data.step_metrics[HACK], svg.Style(svg.PALETTE[8]), max_points=max_points,
                               per_step=True)
    if hack:
        parts.append(_chart(hack, title="Hack rate: responses the training verifier pays and the oracle rejects", ylabel="rate",
                            xlim=xlim))
    parts.append("<h2>Entropy, length and truncation</h2>")
    parts.append(_chart(per_step("entropy", "entropy", svg.PALETTE[0]), title="Policy entropy", ylabel="entropy", xlim=xlim))
    parts.append(_chart(per_step("length", "mean length", svg.PALETTE[0]), title="Response length", ylabel="tokens", xlim=xlim))
    parts.append(_chart(per_step("truncation", "truncated fraction", svg.PALETTE[0]), title="Truncation", ylabel="fraction",
                        xlim=xlim))
    parts.append("<h2>Diagnoses over time, by kind</h2>")
    size = sections.window_size(xlim)
    rows = sections.diagnosis_rows(data, xlim, size, href=_decision_after(data))
    parts.append(svg.lanes_chart([svg.Lane("", "", rows)], xlim=xlim, title="Diagnoses per window, by kind",
                                 legend=sections.diagnoses_legend(size))
                 if rows else '<p class="empty">No diagnoses in this run.</p>')
    parts.append("<h2>Harness versions, promotions and rejections</h2>")
    parts.append(svg.timeline(data.harness_steps, data.decisions, last_step=last_step, xlim=xlim, width=svg.WIDE,
                              left=svg.LANE_ML, title="Harness-version timeline (click a marker for its audit)"))
    parts += sections.benchmark_section(benchmark)
    parts += sections.skills_section([data])
    parts.append("<h2>Decisions</h2>")
    parts.append(filter_buttons([("promoted", "promotions"), ("rejected", "rejections")]))
    parts.append(f'<p>Each row is one gate decision. Its full evidence chain, hash-verified: '
                 f'<code>evo audit {escape(data.run_id)} --promotion ID</code> with the id in the last column.</p>')
    parts.append(table(["step", "decision", "what", "gate", "harness", "reasons", "diagnoses → backtests", "id"],
                       [_decision_row(d) for d in data.decisions], table_id="decisions"))
    return document(f"EvoTrainer run {data.run_id}", parts)


def _decision_after(data: RunData) -> Callable[[int], str]:
    """A diagnosis cell links to the first decision at or after its step (diagnoses have no row)."""
    decided = sorted((d["step"], n, d["id"]) for n, d in enumerate(data.decisions) if isinstance(d["step"], int))

    def href(step: int) -> str:
        k = bisect.bisect_left(decided, (step, -1, ""))
        return f"#d-{decided[k][2]}" if k < len(decided) else ""

    return href

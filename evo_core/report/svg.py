"""Inline SVG charts: no script, no fonts, no network — they render from the HTML alone."""

from __future__ import annotations

import math
from html import escape
from typing import Optional, Sequence

import attrs

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
W, H = 760, 240
GOOD, BAD = "#2ca02c", "#d62728"  # promotions and rejections
ML, MR, MT, MB = 56, 16, 14, 36


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = math.ceil(lo / step) * step
    out = []
    v = start
    while v <= hi + 1e-9 and len(out) < 12:
        out.append(round(v, 10))
        v += step
    return out


def _fmt(v: float) -> str:
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.3g}"


class Axes:
    def __init__(self, xlo: float, xhi: float, ylo: float, yhi: float, width: int = W, height: int = H, left: int = ML) -> None:
        if xhi <= xlo:
            xhi = xlo + 1
        if yhi <= ylo:
            yhi = ylo + 1
        self.xlo, self.xhi, self.ylo, self.yhi, self.w, self.h, self.ml = xlo, xhi, ylo, yhi, width, height, left

    def x(self, v: float) -> float:
        return self.ml + (v - self.xlo) / (self.xhi - self.xlo) * (self.w - self.ml - MR)

    def y(self, v: float) -> float:
        return self.h - MB - (v - self.ylo) / (self.yhi - self.ylo) * (self.h - MT - MB)

    def frame(self, xlabel: str, ylabel: str) -> list[str]:
        out = [f'<rect x="{self.ml}" y="{MT}" width="{self.w - self.ml - MR}" height="{self.h - MT - MB}" class="plotbg"/>']
        for t in _ticks(self.ylo, self.yhi):
            yy = self.y(t)
            out.append(f'<line x1="{self.ml}" x2="{self.w - MR}" y1="{yy:.1f}" y2="{yy:.1f}" class="grid"/>'
                       f'<text x="{self.ml - 6}" y="{yy + 4:.1f}" text-anchor="end" class="tick">{_fmt(t)}</text>')
        for t in _ticks(self.xlo, self.xhi, 8):
            xx = self.x(t)
            out.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{self.h - MB}" y2="{self.h - MB + 4}" class="axis"/>'
                       f'<text x="{xx:.1f}" y="{self.h - MB + 16}" text-anchor="middle" class="tick">{_fmt(t)}</text>')
        out.append(f'<text x="{(self.ml + self.w - MR) / 2:.0f}" y="{self.h - 4}" text-anchor="middle" class="label">{escape(xlabel)}</text>')
        lx, ly = max(12, self.ml - 44), (MT + self.h - MB) / 2
        out.append(f'<text x="{lx}" y="{ly:.0f}" transform="rotate(-90 {lx} {ly:.0f})" '
                   f'text-anchor="middle" class="label">{escape(ylabel)}</text>')
        return out


def _svg(body: list[str], title: str, width: int = W, height: int = H) -> str:
    return (f'<svg class="chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">' + "".join(body) + "</svg>")


def _legend(names: Sequence[str], colours: Sequence[str], dashes: Optional[Sequence[str]] = None, extra: str = "") -> str:
    keys = "".join(line_key(n, c, d) for n, c, d in zip(names, colours, dashes or [""] * len(names)))
    return f'<div class="legend">{keys}{extra}</div>'


def line_key(name: str, colour: str, dash: str = "") -> str:
    """A legend entry: a short line drawn as the chart draws the series (solid or dashed)."""
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    line = f'<line x1="1" x2="21" y1="5" y2="5" stroke="{colour}" stroke-width="2.5"{dash_attr}/>'
    return f'<span class="key"><svg width="22" height="10" viewBox="0 0 22 10">{line}</svg>{escape(name)}</span>'


@attrs.frozen
class Style:
    colour: str
    dash: str = ""  # an SVG stroke-dasharray; empty: solid
    opacity: float = 1.0
    width: float = 1.6


def line_chart(series: Sequence[tuple[str, Sequence[tuple[float, float]]]], *, title: str, xlabel: str = "step",
               ylabel: str = "", ylim: Optional[tuple[float, float]] = None, markers: bool = False,
               styles: Optional[Sequence[Style]] = None, legend: Optional[str] = None,
               xlim: Optional[tuple[float, float]] = None, width: int = W, left: int = ML, legend_extra: str = "") -> str:
    """One or more (name, [(x, y), …]) series on shared axes.

    ``styles``: a ``Style`` per series (default: the palette, solid); a faint series
    (opacity below 1, e.g. the raw curve under a smoothed one) gets no point markers;
    ``legend``: HTML that replaces the per-series legend (a comparison keys runs once);
    ``xlim``, ``width``, ``left``: a shared step range and plot geometry, so that a page's
    charts line up step for step.
    """
    pts = [p for _, s in series for p in s if p[1] is not None and math.isfinite(p[1])]
    if not pts:
        return f'<p class="empty">{escape(title)}: no data in this run.</p>'
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    ylo, yhi = ylim if ylim else (min(ys), max(ys))
    if not ylim:
        pad = (yhi - ylo) * 0.08 or 0.5
        ylo, yhi = ylo - pad, yhi + pad
    ax = Axes(*(xlim or (min(xs), max(xs))), ylo, yhi, width=width, left=left)
    body = ax.frame(xlabel, ylabel)
    keys = []
    for k, (name, s) in enumerate(series):
        st = styles[k] if styles else Style(PALETTE[k % len(PALETTE)])
        c = st.colour
        if st.opacity >= 1:  # a faint series sits under its bold summary, which the legend names
            keys.append((name, c, st.dash))
        good = [(x, y) for x, y in s if y is not None and math.isfinite(y)]
        if not good:
            continue
        path = " ".join(f"{ax.x(x):.1f},{ax.y(y):.1f}" for x, y in good)
        extra = (f' stroke-dasharray="{st.dash}"' if st.dash else "") + (f' stroke-opacity="{st.opacity}"' if st.opacity < 1 else "")
        body.append(f'<polyline class="series" fill="none" stroke="{c}" stroke-width="{st.width}"{extra} points="{path}">'
                    f'<title>{escape(name)}</title></polyline>')
        if st.opacity >= 1 and (markers or len(good) <= 60):
            body += [f'<circle cx="{ax.x(x):.1f}" cy="{ax.y(y):.1f}" r="2.4" fill="{c}"><title>{escape(name)} @ {_fmt(x)}: {y:.4g}</title></circle>'
                     for x, y in good]
    key = legend if legend is not None else _legend(*zip(*keys), extra=legend_extra) if keys else ""
    return f'<figure><figcaption>{escape(title)}</figcaption>{_svg(body, title, width)}{key}</figure>'


def timeline(harness: Sequence[tuple[float, float]], decisions: Sequence[dict], *, last_step: float, title: str,
             xlim: Optional[tuple[float, float]] = None, width: int = W, left: int = ML) -> str:
    """Harness version as a step function over steps; each decision is a linked marker
    (interventions ▲/✕ at the version they led to, policies ●/○ on the line)."""
    xs = [0.0, last_step] + [d["step"] for d in decisions]
    hv = [v for _, v in harness] or [0]
    ax = Axes(*(xlim or (min(xs), max(max(xs), 1))), -0.5, max(hv) + 1, width=width, left=left)
    body = ax.frame("step", "harness version")
    path, cur = [f"{ax.x(0):.1f},{ax.y(0):.1f}"], 0.0
    for s, v in sorted(harness):
        path.append(f"{ax.x(s):.1f},{ax.y(cur):.1f}")
        path.append(f"{ax.x(s):.1f},{ax.y(v):.1f}")
        cur = v
    path.append(f"{ax.x(last_step):.1f},{ax.y(cur):.1f}")
    body.append(f'<polyline class="series" fill="none" stroke="#1f77b4" stroke-width="1.8" points="{" ".join(path)}"/>')
    for d in decisions:
        promoted = d["decision"] == "promoted"
        if d["subject"] == "policy":  # just above the line: a checkpoint decision leaves the harness as it is
            mark = Mark(x=0, shape="dot" if promoted else "ring", colour=GOOD if promoted else BAD, tip="")
            y = ax.y(d["harness_after"]) - 9
        else:
            mark = Mark(x=0, shape="tri" if promoted else "cross", colour=GOOD if promoted else BAD, tip="")
            y = ax.y(d["harness_after"]) + (0 if promoted else 8)
        shape = _glyph(mark, ax.x(d["step"]), y, 0)
        tip = f'{d["decision"]} {d["subject"]} at step {d["step"]} by {d["gate"]}'
        body.append(f'<a href="#d-{d["id"]}" class="mark"><title>{escape(tip)}</title>{shape}</a>')
    kinds = {(d["subject"] == "policy", d["decision"] == "promoted") for d in decisions}
    items = [(shape, GOOD if ok else BAD, label) for (policy, ok), shape, label in (
        ((False, True), "tri", "intervention promoted"), ((False, False), "cross", "intervention rejected"),
        ((True, True), "dot", "policy promoted"), ((True, False), "ring", "policy rejected")) if (policy, ok) in kinds]
    legend = ('<div class="legend">' + line_key("harness version", "#1f77b4") + "</div>" + (glyph_legend(items) if items else ""))
    return f'<figure><figcaption>{escape(title)}</figcaption>{_svg(body, title, width)}{legend}</figure>'


def bar_chart(groups: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], *, title: str) -> str:
    """Grouped bars: one group per metric, one bar per series (fixed vs evolving)."""
    vals = [v for _, s in series for v in s]
    if not vals:
        return f'<p class="empty">{escape(title)}: no data.</p>'
    lo, hi = min(0.0, min(vals)), max(0.0, max(vals))
    ax = Axes(0, len(groups), lo, hi + (hi - lo) * 0.1 or 1)
    body = [f'<rect x="{ML}" y="{MT}" width="{W - ML - MR}" height="{H - MT - MB}" class="plotbg"/>']
    for t in _ticks(ax.ylo, ax.yhi):
        body.append(f'<line x1="{ML}" x2="{W - MR}" y1="{ax.y(t):.1f}" y2="{ax.y(t):.1f}" class="grid"/>'
                    f'<text x="{ML - 6}" y="{ax.y(t) + 4:.1f}" text-anchor="end" class="tick">{_fmt(t)}</text>')
    gw = (W - ML - MR) / max(len(groups), 1)
    bw = gw * 0.7 / max(len(series), 1)
    colours = []
    for k, (name, s) in enumerate(series):
        c = PALETTE[k % len(PALETTE)]
        colours.append(c)
        for g, v in enumerate(s):
            x = ML + g * gw + gw * 0.15 + k * bw
            y0, y1 = ax.y(max(v, 0)), ax.y(min(v, 0))
            body.append(f'<rect class="bar" x="{x:.1f}" y="{y0:.1f}" width="{bw:.1f}" height="{max(y1 - y0, 0.5):.1f}" fill="{c}">'
                        f'<title>{escape(name)} {escape(groups[g])}: {v:.4g}</title></rect>')
    for g, name in enumerate(groups):
        body.append(f'<text x="{ML + (g + 0.5) * gw:.1f}" y="{H - MB + 16}" text-anchor="middle" class="tick">{escape(name[:28])}</text>')
    return f'<figure><figcaption>{escape(title)}</figcaption>{_svg(body, title)}{_legend([n for n, _ in series], colours)}</figure>'



# -- lane charts: event strips and counts per window ------------------------------------------

LANE_ML = 150  # room for row labels (diagnosis kinds, run ids)
WIDE = 1040  # a comparison's charts: all this wide, with LANE_ML on the left, so that steps line up
ROW_H, HEAD_H = 15, 16


@attrs.frozen
class Mark:
    """One thing on a lane row: a glyph at ``x`` or, for ``shape="cell"``, a bar from ``x`` to ``x_end``."""

    x: float
    shape: str  # tri | cross | dot | ring | star | tick | cell
    colour: str
    tip: str
    href: str = ""
    x_end: Optional[float] = None
    opacity: float = 1.0


@attrs.frozen
class Row:
    label: str
    marks: Sequence[Mark]


@attrs.frozen
class Lane:
    """A group of rows under a coloured header (a run); an empty header draws none."""

    header: str
    colour: str
    rows: Sequence[Row]


def _glyph(m: Mark, x: float, y: float, x_end: float) -> str:
    c = m.colour
    if m.shape == "cell":
        return (f'<rect x="{x:.1f}" y="{y - 5:.1f}" width="{max(x_end - x, 1.5):.1f}" height="10" fill="{c}" '
                f'fill-opacity="{m.opacity:.2f}"/>')
    if m.shape == "tri":
        return f'<path d="M{x:.1f} {y - 5:.1f}l5 9h-10z" fill="{c}"/>'
    if m.shape == "cross":
        return f'<path d="M{x - 4:.1f} {y - 4:.1f}l8 8m0-8l-8 8" stroke="{c}" stroke-width="2"/>'
    if m.shape == "dot":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{c}"/>'
    if m.shape == "ring":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="#fff" stroke="{c}" stroke-width="1.8"/>'
    if m.shape == "star":
        return f'<path d="M{x:.1f} {y - 5:.1f}l1.5 3.4 3.6.3-2.8 2.4.9 3.6-3.2-2-3.2 2 .9-3.6-2.8-2.4 3.6-.3z" fill="{c}"/>'
    return f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y - 5:.1f}" y2="{y + 5:.1f}" stroke="{c}" stroke-width="2" stroke-opacity="{m.opacity:.2f}"/>'


def lanes_chart(lanes: Sequence[Lane], *, xlim: tuple[float, float], title: str, legend: str = "", width: int = WIDE) -> str:
    """Rows of marks over a shared step axis: what happened when, run under run."""
    rows = sum(len(lane.rows) for lane in lanes)
    if not rows:
        return f'<p class="empty">{escape(title)}: nothing in these runs.</p>'
    heads = sum(1 for lane in lanes if lane.header)
    height = MT + rows * ROW_H + heads * HEAD_H + 8 + MB
    xlo, xhi = xlim
    if xhi <= xlo:
        xhi = xlo + 1
    plot_w = width - LANE_ML - MR

    def sx(v: float) -> float:
        return LANE_ML + (v - xlo) / (xhi - xlo) * plot_w

    body = [f'<rect x="{LANE_ML}" y="{MT}" width="{plot_w}" height="{height - MT - MB}" class="plotbg"/>']
    for t in _ticks(xlo, xhi, 8):
        xx = sx(t)
        body.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{MT}" y2="{height - MB}" class="grid"/>'
                    f'<text x="{xx:.1f}" y="{height - MB + 16}" text-anchor="middle" class="tick">{_fmt(t)}</text>')
    body.append(f'<text x="{LANE_ML + plot_w / 2:.0f}" y="{height - 4}" text-anchor="middle" class="label">step</text>')
    y = MT + 4
    for n, lane in enumerate(lanes):
        if n:
            body.append(f'<line x1="{LANE_ML}" x2="{width - MR}" y1="{y:.1f}" y2="{y:.1f}" class="axis"/>')
        if lane.header:
            body.append(f'<text x="{LANE_ML + 4}" y="{y + 12:.1f}" class="lanehead" fill="{lane.colour}">{escape(lane.header)}</text>')
            y += HEAD_H
        for row in lane.rows:
            cy = y + ROW_H / 2
            body.append(f'<text x="{LANE_ML - 6}" y="{cy + 3.5:.1f}" text-anchor="end" class="tick">{escape(row.label[:24])}</text>')
            for m in row.marks:
                x0 = sx(m.x)
                shape = _glyph(m, x0, cy, sx(min(m.x_end, xhi)) if m.x_end is not None else x0)
                tip = f"<title>{escape(m.tip)}</title>"
                body.append(f'<a href="{escape(m.href)}" class="mark">{tip}{shape}</a>' if m.href
                            else f'<g class="mark">{tip}{shape}</g>')
            y += ROW_H
        y += 4
    return (f'<figure><figcaption>{escape(title)}</figcaption>{_svg(body, title, width, int(height))}{legend}</figure>')


def glyph_legend(items: Sequence[tuple[str, str, str]]) -> str:
    """A legend of (shape, colour, label) glyphs, drawn the way the chart draws them."""
    out = []
    for shape, colour, label in items:
        g = _glyph(Mark(x=0, shape=shape, colour=colour, tip="", x_end=12 if shape == "cell" else None), 7, 7, 19)
        out.append(f'<span class="key"><svg width="22" height="14" viewBox="0 0 22 14">{g}</svg>{escape(label)}</span>')
    return f'<div class="legend">{"".join(out)}</div>'

"""Inline SVG charts: no script, no fonts, no network — they render from the HTML alone."""

from __future__ import annotations

import math
from html import escape
from typing import Optional, Sequence

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
W, H = 760, 240
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
    def __init__(self, xlo: float, xhi: float, ylo: float, yhi: float, width: int = W, height: int = H) -> None:
        if xhi <= xlo:
            xhi = xlo + 1
        if yhi <= ylo:
            yhi = ylo + 1
        self.xlo, self.xhi, self.ylo, self.yhi, self.w, self.h = xlo, xhi, ylo, yhi, width, height

    def x(self, v: float) -> float:
        return ML + (v - self.xlo) / (self.xhi - self.xlo) * (self.w - ML - MR)

    def y(self, v: float) -> float:
        return self.h - MB - (v - self.ylo) / (self.yhi - self.ylo) * (self.h - MT - MB)

    def frame(self, xlabel: str, ylabel: str) -> list[str]:
        out = [f'<rect x="{ML}" y="{MT}" width="{self.w - ML - MR}" height="{self.h - MT - MB}" class="plotbg"/>']
        for t in _ticks(self.ylo, self.yhi):
            yy = self.y(t)
            out.append(f'<line x1="{ML}" x2="{self.w - MR}" y1="{yy:.1f}" y2="{yy:.1f}" class="grid"/>'
                       f'<text x="{ML - 6}" y="{yy + 4:.1f}" text-anchor="end" class="tick">{_fmt(t)}</text>')
        for t in _ticks(self.xlo, self.xhi, 8):
            xx = self.x(t)
            out.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{self.h - MB}" y2="{self.h - MB + 4}" class="axis"/>'
                       f'<text x="{xx:.1f}" y="{self.h - MB + 16}" text-anchor="middle" class="tick">{_fmt(t)}</text>')
        out.append(f'<text x="{(ML + self.w - MR) / 2:.0f}" y="{self.h - 4}" text-anchor="middle" class="label">{escape(xlabel)}</text>')
        out.append(f'<text x="12" y="{(MT + self.h - MB) / 2:.0f}" transform="rotate(-90 12 {(MT + self.h - MB) / 2:.0f})" '
                   f'text-anchor="middle" class="label">{escape(ylabel)}</text>')
        return out


def _svg(body: list[str], title: str, width: int = W, height: int = H) -> str:
    return (f'<svg class="chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">' + "".join(body) + "</svg>")


def _legend(names: Sequence[str], colours: Sequence[str]) -> str:
    items = "".join(f'<span class="key"><i style="background:{c}"></i>{escape(n)}</span>' for n, c in zip(names, colours))
    return f'<div class="legend">{items}</div>'


def line_chart(series: Sequence[tuple[str, Sequence[tuple[float, float]]]], *, title: str, xlabel: str = "step",
               ylabel: str = "", ylim: Optional[tuple[float, float]] = None, markers: bool = False) -> str:
    """One or more (name, [(x, y), …]) series on shared axes."""
    pts = [p for _, s in series for p in s if p[1] is not None and math.isfinite(p[1])]
    if not pts:
        return f'<p class="empty">{escape(title)}: no data in this run.</p>'
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    ylo, yhi = ylim if ylim else (min(ys), max(ys))
    if not ylim:
        pad = (yhi - ylo) * 0.08 or 0.5
        ylo, yhi = ylo - pad, yhi + pad
    ax = Axes(min(xs), max(xs), ylo, yhi)
    body = ax.frame(xlabel, ylabel)
    colours = []
    for k, (name, s) in enumerate(series):
        c = PALETTE[k % len(PALETTE)]
        colours.append(c)
        good = [(x, y) for x, y in s if y is not None and math.isfinite(y)]
        if not good:
            continue
        path = " ".join(f"{ax.x(x):.1f},{ax.y(y):.1f}" for x, y in good)
        body.append(f'<polyline class="series" fill="none" stroke="{c}" stroke-width="1.6" points="{path}"><title>{escape(name)}</title></polyline>')
        if markers or len(good) <= 60:
            body += [f'<circle cx="{ax.x(x):.1f}" cy="{ax.y(y):.1f}" r="2.4" fill="{c}"><title>{escape(name)} @ {_fmt(x)}: {y:.4g}</title></circle>'
                     for x, y in good]
    return f'<figure><figcaption>{escape(title)}</figcaption>{_svg(body, title)}{_legend([n for n, _ in series], colours)}</figure>'


def timeline(harness: Sequence[tuple[float, float]], decisions: Sequence[dict], *, last_step: float, title: str) -> str:
    """Harness version as a step function over steps; each decision is a linked marker."""
    xs = [0.0, last_step] + [d["step"] for d in decisions]
    hv = [v for _, v in harness] or [0]
    ax = Axes(min(xs), max(max(xs), 1), -0.5, max(hv) + 1)
    body = ax.frame("step", "harness version")
    path, cur = [f"{ax.x(0):.1f},{ax.y(0):.1f}"], 0.0
    for s, v in sorted(harness):
        path.append(f"{ax.x(s):.1f},{ax.y(cur):.1f}")
        path.append(f"{ax.x(s):.1f},{ax.y(v):.1f}")
        cur = v
    path.append(f"{ax.x(last_step):.1f},{ax.y(cur):.1f}")
    body.append(f'<polyline class="series" fill="none" stroke="#1f77b4" stroke-width="1.8" points="{" ".join(path)}"/>')
    for d in decisions:
        x = ax.x(d["step"])
        if d["decision"] == "promoted":
            y = ax.y(d["harness_after"])
            shape = f'<path d="M{x:.1f} {y - 6:.1f}l5 9h-10z" fill="#2ca02c"/>'
        else:
            y = ax.y(d["harness_after"]) + 8
            shape = f'<path d="M{x - 4:.1f} {y - 4:.1f}l8 8m0-8l-8 8" stroke="#d62728" stroke-width="2"/>'
        tip = f'{d["decision"]} {d["subject"]} at step {d["step"]} by {d["gate"]}'
        body.append(f'<a href="#d-{d["id"]}" class="mark"><title>{escape(tip)}</title>{shape}</a>')
    legend = _legend(["harness version", "promotion", "rejection"], ["#1f77b4", "#2ca02c", "#d62728"])
    return f'<figure><figcaption>{escape(title)}</figcaption>{_svg(body, title)}{legend}</figure>'


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

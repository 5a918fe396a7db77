"""``evo report RUN -o DIR``: one self-contained HTML page (inline SVG, inline CSS and a few
lines of inline script; nothing is fetched, so it works offline and from ``file://``)."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any, Optional

import structlog

from evo_core.audit.errors import AuditError
from evo_core.report import svg
from evo_core.report.data import RunData, collect, downsample, load_benchmark, step_series

log = structlog.get_logger("evo.report")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0 auto;max-width:1100px;padding:16px 24px;color:#222}
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555}.ok{color:#1a7f37}.bad{color:#c62828;font-weight:600}
figure{margin:10px 0 18px}figcaption{font-weight:600;margin-bottom:4px}
svg.chart{max-width:100%;height:auto;background:#fff}.plotbg{fill:#fafafa;stroke:#ccc}.grid{stroke:#e6e6e6}
.axis{stroke:#888}.tick{font-size:10px;fill:#555}.label{font-size:11px;fill:#333}
.legend{font-size:12px;color:#333}.key{margin-right:14px}.key i{display:inline-block;width:12px;height:3px;margin:0 5px 3px 0;vertical-align:middle}
table{border-collapse:collapse;width:100%;font-size:12.5px}th,td{border-bottom:1px solid #eee;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4;position:sticky;top:0}tr.promoted td:first-child{border-left:3px solid #2ca02c}tr.rejected td:first-child{border-left:3px solid #d62728}
tr:target{background:#fff8c4}code{font-size:11.5px;background:#f4f4f4;padding:1px 3px}details summary{cursor:pointer}
.grid2{display:grid;grid-template-columns:1fr;gap:4px}.empty{color:#888;font-style:italic}
#filter button{margin-right:6px}
"""

# Filters the decision table; nothing else on the page needs script.
JS = """
(function(){
  var rows=document.querySelectorAll('#decisions tbody tr');
  document.querySelectorAll('#filter button').forEach(function(b){
    b.addEventListener('click',function(){
      var want=b.getAttribute('data-show');
      rows.forEach(function(r){r.style.display=(want==='all'||r.classList.contains(want))?'':'none';});
    });
  });
  document.documentElement.setAttribute('data-report-ready', String(document.querySelectorAll('svg.chart').length));
})();
"""


def _j(v: Any) -> str:
    return escape(json.dumps(v, sort_keys=True, default=str)[:300])


def _decision_row(d: dict[str, Any]) -> str:
    """One decision; kept compact because a long run has thousands (the page must stay small)."""
    prop = d["proposal"] or {}
    what = f'{escape(prop.get("name", ""))} <code>{_j(prop.get("params", {}))[:120]}</code>' if prop else escape(str(d["subject_id"]))
    bts = "; ".join(f'{"passed" if b["passed"] else "failed"} {b.get("mode", "")}'
                    + (f' CI [{b["ci"][0]:.3g}, {b["ci"][1]:.3g}]' if b.get("ci") else "") for b in d["backtests"])
    diags = ", ".join(f'{escape(g["kind"])} [{escape(g["severity"])}]' for g in d["diagnoses"])
    pred = _j(prop.get("prediction", {}))[:160] if prop else ""
    chain = f"{diags or '–'} → {escape(bts) or '–'}" + (f"<br><small>predicts {pred}</small>" if pred else "")
    return (f'<tr id="d-{escape(d["id"])}" class="{d["decision"]}"><td>{d["step"]}</td><td>{d["decision"][:3]}</td>'
            f'<td>{what}</td><td>{escape(d["gate"] or "")}</td><td>{d["harness_before"]}→{d["harness_after"]}</td>'
            f'<td>{escape("; ".join(d["reasons"]))[:200]}</td><td>{chain}</td><td><small>{escape(d["id"])}</small></td></tr>')


def render(data: RunData, *, benchmark: Optional[dict[str, dict[str, float]]] = None, max_points: int = 400) -> str:
    series = step_series(data)
    ds = lambda name: downsample(series.get(name, {}), max_points)  # noqa: E731
    heldout = {k: v for k, v in data.evals.items() if "strict" in k}
    last_step = float(max(data.steps or [0]) or max((d["step"] for d in data.decisions), default=1))
    parts = [f"<h1>Run {escape(data.run_id)}</h1>",
             f'<p class="meta">{data.events:,} events · harness mode {escape(data.mode or "?")} · status {escape(data.status)}'
             f' · started {escape(data.started_at or "?")} · {len(data.decisions)} decisions · {len(data.skills)} skills'
             f' · {data.plugin_failures} plugin failures</p>']
    if data.verified is not None:
        parts.append('<p class="ok">✓ hash chain verified for every event of this run</p>' if data.verified
                     else f'<p class="bad">✗ hash chain NOT verified: {escape(data.verify_problem or "")}</p>')
    parts.append("<h2>Reward and held-out strict accuracy</h2>")
    curves = [("training reward", ds("reward"))]
    if series.get("train_strict"):
        curves.append(("strict oracle on train rollouts", ds("train_strict")))
    curves += [(f"held-out {k}", downsample(v, max_points)) for k, v in sorted(heldout.items())]
    parts.append(svg.line_chart(curves, title="Training reward vs held-out strict accuracy", ylabel="rate"))
    parts.append("<h2>Entropy, length and truncation</h2>")
    parts.append(svg.line_chart([("entropy", ds("entropy"))], title="Policy entropy", ylabel="entropy"))
    parts.append(svg.line_chart([("mean length", ds("length"))], title="Response length", ylabel="tokens"))
    parts.append(svg.line_chart([("truncated fraction", ds("truncation"))], title="Truncation", ylabel="fraction"))
    parts.append("<h2>Diagnoses over time, by kind</h2>")
    bucket = max(1, int(last_step // max_points) + 1)
    diag_series = []
    for kind, per_step in sorted(data.diagnoses.items()):
        agg: dict[int, float] = {}
        for s, c in per_step.items():
            agg[s // bucket * bucket] = agg.get(s // bucket * bucket, 0) + c
        diag_series.append((f"{kind} ({sum(per_step.values())})", sorted((float(k), v) for k, v in agg.items())))
    parts.append(svg.line_chart(diag_series, title=f"Diagnoses per {bucket} step{'s' if bucket > 1 else ''}", ylabel="count", markers=True)
                 if diag_series else '<p class="empty">No diagnoses in this run.</p>')
    parts.append("<h2>Harness versions, promotions and rejections</h2>")
    parts.append(svg.timeline(data.harness_steps, data.decisions, last_step=last_step, title="Harness-version timeline (click a marker for its audit)"))
    if benchmark:
        parts.append("<h2>Fixed vs evolving harness</h2>")
        metrics = sorted(set(benchmark["fixed"]) & set(benchmark["evolving"]))
        parts.append(svg.bar_chart(metrics, [("fixed", [benchmark["fixed"][m] for m in metrics]),
                                             ("evolving", [benchmark["evolving"][m] for m in metrics])],
                                   title="Evolution benchmark: fixed vs evolving"))
        rows = "".join(f"<tr><td>{escape(m)}</td><td>{benchmark['fixed'][m]:.4g}</td><td>{benchmark['evolving'][m]:.4g}</td>"
                       f"<td>{benchmark['evolving'][m] - benchmark['fixed'][m]:+.4g}</td></tr>" for m in metrics)
        parts.append(f"<table><thead><tr><th>metric</th><th>fixed</th><th>evolving</th><th>Δ</th></tr></thead><tbody>{rows}</tbody></table>")
    parts.append("<h2>Skills</h2>")
    if data.skills:
        rows = "".join(
            f"<tr><td>{escape(s['skill_id'])}</td><td>{escape(s['name'])}</td><td>{s['uses']}</td>"
            f"<td>{'retired: ' + escape(s.get('retired_reason', '')) if s['retired'] else 'active'}</td>"
            f"<td>{escape(s.get('source_run') or '')}</td><td><code>{_j(s['bundle'])}</code></td></tr>" for s in data.skills.values())
        parts.append(f"<table><thead><tr><th>skill</th><th>name</th><th>uses</th><th>status</th><th>source run</th>"
                     f"<th>bundle</th></tr></thead><tbody>{rows}</tbody></table>")
    else:
        parts.append('<p class="empty">No skills were registered.</p>')
    parts.append("<h2>Decisions</h2>")
    parts.append('<div id="filter"><button data-show="all">all</button><button data-show="promoted">promotions</button>'
                 '<button data-show="rejected">rejections</button></div>')
    parts.append(f'<p>Each row is one gate decision. Its full evidence chain, hash-verified: '
                 f'<code>evo audit {escape(data.run_id)} --promotion ID</code> with the id in the last column.</p>')
    rows = "".join(_decision_row(d) for d in data.decisions)
    parts.append(f'<table id="decisions"><thead><tr><th>step</th><th>decision</th><th>what</th><th>gate</th>'
                 f'<th>harness</th><th>reasons</th><th>diagnoses → backtests</th><th>id</th></tr></thead><tbody>{rows}</tbody></table>')
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
            'script-src \'unsafe-inline\'; img-src data:">'
            f'<title>EvoTrainer run {escape(data.run_id)}</title><style>{CSS}</style></head><body>'
            + "".join(parts) + f"<script>{JS}</script></body></html>")


def build_report(store: Any, run_id: str, out_dir: Any, *, benchmark: Optional[Any] = None, max_points: int = 400,
                 verify: bool = True, progress=None) -> Path:
    """Write ``out_dir/index.html`` and return its path."""
    bench = load_benchmark(benchmark) if benchmark is not None else None
    data = collect(store, run_id, progress=progress)
    if verify:
        from evo_core.store import run_stream

        rep = store.verify([run_stream(run_id)], check_blobs=False)
        data.verified, data.verify_problem = rep.ok, rep.first_bad
    html = render(data, benchmark=bench, max_points=max_points)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        path = out / "index.html"
        path.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise AuditError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
    log.debug("report.written", path=str(path), bytes=len(html), events=data.events)
    return path

"""The page around the report's sections: inline CSS, the filter script and the document shell.

Nothing is fetched (the Content-Security-Policy forbids it), so a page works offline and
from ``file://``.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any, Optional, Sequence

CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0 auto;max-width:1100px;padding:16px 24px;color:#222}
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555}.ok{color:#1a7f37}.bad{color:#c62828;font-weight:600}.note{color:#666;font-size:12.5px;margin:4px 0}
figure{margin:10px 0 18px}figcaption{font-weight:600;margin-bottom:4px}
svg.chart{max-width:100%;height:auto;background:#fff}.plotbg{fill:#fafafa;stroke:#ccc}.grid{stroke:#e6e6e6}
.axis{stroke:#888}.tick{font-size:10px;fill:#555}.label{font-size:11px;fill:#333}.lanehead{font-size:11px;font-weight:700}
.legend{font-size:12px;color:#333}.key{margin-right:14px;white-space:nowrap}
.key i{display:inline-block;width:12px;height:3px;margin:0 5px 3px 0;vertical-align:middle}.key svg{vertical-align:middle;margin-right:3px}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;width:100%;font-size:12.5px}th,td{border-bottom:1px solid #eee;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4;position:sticky;top:0}td code{word-break:break-all}
table.figures{width:auto;min-width:50%}table.figures td,table.figures th{text-align:right;white-space:nowrap;padding:3px 12px}
table.figures td:first-child,table.figures th:first-child{text-align:left}table.figures small{color:#777;font-weight:400}
.nowrap,.ev code{white-space:nowrap;word-break:normal}
tr.promoted td:first-child{border-left:3px solid #2ca02c}tr.rejected td:first-child{border-left:3px solid #d62728}
.delta{color:#777;font-size:11px;margin-left:3px}.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}
.ev{white-space:normal;margin:1px 0}.ev.promoted b{color:#2ca02c}.ev.rejected b{color:#d62728}.ev.diag b{color:#ff7f0e}.ev.skill b{color:#9467bd}
tr:target,div.ev:target{background:#fff8c4}code{font-size:11.5px;background:#f4f4f4;padding:1px 3px}details summary{cursor:pointer}
.empty{color:#888;font-style:italic}
#filter button{margin-right:6px}#filter button.on{font-weight:700}
"""

# Filters the decision table (rows in a one-run page, entries within a row in a comparison);
# nothing else on the page needs script.
JS = """
(function(){
  var items=document.querySelectorAll('#decisions .ev');
  var rows=document.querySelectorAll('#decisions tbody tr');
  var buttons=document.querySelectorAll('#filter button');
  buttons.forEach(function(b){
    b.addEventListener('click',function(){
      var want=b.getAttribute('data-show');
      items.forEach(function(e){e.style.display=(want==='all'||e.classList.contains(want))?'':'none';});
      rows.forEach(function(r){
        if(r.classList.contains('ev')) return;
        var shown=Array.prototype.some.call(r.querySelectorAll('.ev'),function(e){return e.style.display!=='none';});
        r.style.display=shown?'':'none';
      });
      buttons.forEach(function(o){o.classList.toggle('on',o===b);});
    });
  });
  document.documentElement.setAttribute('data-report-ready', String(document.querySelectorAll('svg.chart').length));
})();
"""

# Runs are told apart by colour; red and green are left to promotions and rejections.
RUN_COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
SEVERITY_COLOURS = {"invalid": "#d62728", "warning": "#ff7f0e", "info": "#9e9e9e"}


def run_colour(i: int) -> str:
    return RUN_COLOURS[i % len(RUN_COLOURS)]


def j(v: Any, limit: int = 300) -> str:
    """Compact, escaped JSON for table cells."""
    return escape(json.dumps(v, sort_keys=True, default=str)[:limit])


def num(v: Optional[float], digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def swatch(colour: str) -> str:
    return f'<span class="swatch" style="background:{colour}"></span>'


def table(headers: Sequence[str], rows: Sequence[str], *, cls: str = "", table_id: str = "") -> str:
    """``rows`` are ready ``<tr>…</tr>`` strings; the table scrolls sideways on a narrow screen."""
    attrs = (f' class="{cls}"' if cls else "") + (f' id="{table_id}"' if table_id else "")
    head = "".join(f"<th>{h}</th>" for h in headers)
    return f'<div class="scroll"><table{attrs}><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def filter_buttons(kinds: Sequence[tuple[str, str]]) -> str:
    buttons = "".join(f'<button data-show="{k}">{escape(label)}</button>' for k, label in kinds)
    return f'<div id="filter"><button data-show="all" class="on">all</button>{buttons}</div>'


def document(title: str, parts: Sequence[str]) -> str:
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
            'script-src \'unsafe-inline\'; img-src data:">'
            f'<title>{escape(title)}</title><style>{CSS}</style></head><body>'
            + "".join(parts) + f"<script>{JS}</script></body></html>")

"""``evo report RUN [RUN …] -o DIR``: one self-contained HTML page (inline SVG, inline CSS and
a few lines of inline script; nothing is fetched, so it works offline and from ``file://``).

One run gets its own page (``single``); several get a comparison (``compare``): their
final figures in one table, overlaid curves and their decisions side by side.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence, Union

import structlog

from evo_core.audit.errors import AuditError
from evo_core.report.compare import render_compare
from evo_core.report.data import RunData, collect, load_benchmark
from evo_core.report.single import render

log = structlog.get_logger("evo.report")

__all__ = ["build_report", "collect_run", "render", "render_compare"]


def collect_run(store: Any, run_id: str, *, verify: bool = True, progress=None) -> RunData:
    """The run's report data, with its hash chain verified unless ``verify`` is false."""
    data = collect(store, run_id, progress=progress)
    if verify:
        from evo_core.store import run_stream

        rep = store.verify([run_stream(run_id)], check_blobs=False)
        data.verified, data.verify_problem = rep.ok, rep.first_bad
    return data


def build_report(store: Any, run_ids: Union[str, Sequence[str]], out_dir: Any, *, benchmark: Optional[Any] = None,
                 max_points: int = 400, verify: bool = True, progress=None) -> Path:
    """Write ``out_dir/index.html`` for one run (a run id) or a comparison (several) and return its path."""
    runs = [run_ids] if isinstance(run_ids, str) else list(run_ids)
    if not runs:
        raise AuditError("give at least one run id")
    twice = sorted({r for r in runs if runs.count(r) > 1})
    if twice:
        raise AuditError(f"run {twice[0]!r} is given more than once")
    if max_points < 2:
        raise AuditError(f"--points must be at least 2 (got {max_points})")
    bench = load_benchmark(benchmark) if benchmark is not None else None
    datas = [collect_run(store, r, verify=verify, progress=progress) for r in runs]
    html = (render(datas[0], benchmark=bench, max_points=max_points) if len(datas) == 1
            else render_compare(datas, benchmark=bench, max_points=max_points))
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        path = out / "index.html"
        path.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise AuditError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
    log.debug("report.written", path=str(path), bytes=len(html), events=sum(d.events for d in datas), runs=len(datas))
    return path

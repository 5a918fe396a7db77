"""``evo report``: data, downsampling, size bounds, and a real headless-Chromium render."""

from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import given, strategies as st

from evo_core.audit import AuditError
from evo_core.report import build_report
from evo_core.report.data import collect, downsample, load_benchmark
from evo_core.synthetic import generate_run
from tests.audit._browser import CHART_PROBE, open_page, painted
from tests.audit.conftest import evo


@given(st.dictionaries(st.integers(0, 10_000), st.floats(-1e3, 1e3, allow_nan=False), min_size=0, max_size=800),
       st.integers(1, 300))
def test_downsample_bounds(points, max_points):
    out = downsample(points, max_points)
    assert len(out) <= max(max_points, 0) or len(points) <= max_points
    assert len(out) == min(len(points), max_points) or len(out) <= max_points
    xs = [x for x, _ in out]
    assert xs == sorted(xs)
    if points:
        assert min(points.values()) - 1e-9 <= min(y for _, y in out) and max(y for _, y in out) <= max(points.values()) + 1e-9
        assert min(points) <= xs[0] and xs[-1] <= max(points)


def test_collect_aggregates_match_the_log(evo_tiny_run):
    store, run_id = evo_tiny_run
    data = collect(store, run_id)
    rows = [e for e in store.events(f"run-{run_id}") if e.TYPE == "evo.RolloutCompleted"]
    step3 = [r for r in rows if r.step == 3]
    assert data.steps[3].n == len(step3)
    assert data.steps[3].reward_sum == sum(r.reward for r in step3)
    assert data.steps[3].length_sum == sum(r.length for r in step3)
    assert len(data.decisions) == sum(1 for e in store.events(f"run-{run_id}") if e.TYPE in ("evo.Promoted", "evo.Rejected"))
    assert data.events == store.stream_version(f"run-{run_id}")


def test_report_contents_and_bounds(evo_store, tmp_path):
    run_id = generate_run(evo_store, steps=600, rollouts_per_step=4, decision_every=25, eval_every=10)
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"runs": [{"harness": "fixed", "strict_accuracy": 0.1}, {"harness": "fixed", "strict_accuracy": 0.2},
                                          {"harness": "evolving", "strict_accuracy": 0.7}]}))
    path = build_report(evo_store, run_id, tmp_path / "out", benchmark=bench, max_points=100)
    html = path.read_text()
    # reward, strict accuracy, entropy, length, truncation, diagnoses, timeline, benchmark
    assert html.count('<svg class="chart"') == 8
    # Curves are downsampled: no polyline has more points than asked for.
    for pts in re.findall(r'<polyline class="series"[^>]*points="([^"]*)"', html):
        assert len(pts.split()) <= 2 * 100 + 2  # the timeline step function has 2 points per change
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html
    promos = [e for e in evo_store.events(f"run-{run_id}") if e.TYPE == "evo.Promoted"]
    for p in promos:  # each timeline marker links to its audit entry
        assert f'href="#d-{p.event_id}"' in html and f'id="d-{p.event_id}"' in html
    assert "hash chain verified" in html and "0.15" in html  # fixed mean over two runs
    assert "sim_exploit_penalty" in html  # skills table


def test_bad_report_input(evo_tiny_run, tmp_path):
    store, run_id = evo_tiny_run
    with pytest.raises(AuditError, match="unknown run"):
        build_report(store, "nope", tmp_path)
    (tmp_path / "e.json").write_text(json.dumps({"harnesses": {
        "fixed": {"final_main_strict": {"mean": 0.1, "std": 0.01}, "wrong_branch_promotions": 3, "seeds": [0]},
        "evolving": {"final_main_strict": {"mean": 0.7, "std": 0.02}, "wrong_branch_promotions": 0}}}))
    assert load_benchmark(tmp_path / "e.json") == {"fixed": {"final_main_strict": 0.1, "wrong_branch_promotions": 3.0},
                                                   "evolving": {"final_main_strict": 0.7, "wrong_branch_promotions": 0.0}}
    (tmp_path / "b.json").write_text("{}")
    with pytest.raises(AuditError, match="expected fixed and evolving"):
        load_benchmark(tmp_path / "b.json")


@pytest.mark.browser
def test_report_renders_in_headless_chromium(sqlite_run, tmp_path):
    url, run_id = sqlite_run
    r = evo("report", run_id, "-o", str(tmp_path / "rep"), "--store", url)
    assert r.returncode == 0, r.stderr
    got = open_page(tmp_path / "rep" / "index.html", CHART_PROBE, clicks=("#filter button[data-show=promoted]",), after=
                    "JSON.stringify(Array.from(document.querySelectorAll('#decisions tbody tr.rejected'))"
                    ".every(function(r){return r.style.display==='none';}))")
    info = got["probe"]
    (tmp_path / "report.png").write_bytes(got["png"])
    assert got["errors"] == [], got["errors"]
    # reward, strict accuracy, entropy, length, truncation, diagnoses per window, harness timeline
    assert info["ready"] == str(len(info["charts"])) and len(info["charts"]) == 7
    assert all(w > 300 and h > 60 for w, h in info["charts"]), info["charts"]
    assert info["lines"] and all(n >= 2 for n in info["lines"])
    assert info["marks"] >= info["rows"] >= 2  # a marker per decision on the timeline, plus the diagnosis cells
    assert info["width"] <= info["viewport"], "the page scrolls sideways"
    assert got["after"] is True  # the filter script ran: rejections are hidden
    from PIL import Image

    img = Image.open(io.BytesIO(got["png"]))
    assert img.width >= 1000 and img.height >= 1000
    # The plotted lines are really painted: many pixels in the palette's first colour (#1f77b4).
    assert painted(got["png"], "#1f77b4") > 2000

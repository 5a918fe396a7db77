"""``evo report RUN RUN …``: the comparison page (final figures, overlaid curves, decisions side
by side, diagnoses per window), checked against figures computed from the logs themselves."""

from __future__ import annotations

import re
from html import unescape

import pytest
from hypothesis import given, settings, strategies as st

from evo_core.audit import AuditError
from evo_core.report import build_report, collect_run
from evo_core.report.data import collect, smooth
from evo_core.report.figures import final_figures
from evo_core.report.sections import MAX_WINDOWS, step_range, window_row, window_size
from evo_core.synthetic import generate_run
from tests.audit._browser import CHART_PROBE, open_page, painted
from tests.audit.conftest import evo

NEW_EVALS = dict(splits=("validation", "test"), eval_metrics=("strict_accuracy", "strict_accuracy_greedy", "hack_rate"),
                 policy_gate=True)


def _runs(store):
    """An evolving run whose interventions curb the simulated exploit, a fixed one, and an old-style log
    (one "heldout" split, strict accuracy only, no policy gate)."""
    evolving = generate_run(store, run_id="evolving", steps=120, rollouts_per_step=8, seed=1, decision_every=20,
                            eval_every=10, curb=0.35, **NEW_EVALS)
    fixed = generate_run(store, run_id="fixed", steps=120, rollouts_per_step=8, seed=2, decision_every=20, eval_every=10,
                         harness_mode="fixed", **NEW_EVALS)
    old = generate_run(store, run_id="old", steps=80, rollouts_per_step=8, seed=3, decision_every=25, eval_every=10)
    return evolving, fixed, old


@pytest.fixture
def compared(evo_store, tmp_path):
    runs = _runs(evo_store)
    path = build_report(evo_store, runs, tmp_path / "cmp", max_points=100)
    return evo_store, runs, path.read_text()


def _expected(store, run_id):
    """The final figures, straight from the typed events (not through the report's reader)."""
    evs = list(store.events(f"run-{run_id}"))
    split = lambda e: {"heldout": "validation"}.get(e.split, e.split)  # noqa: E731
    evals = [e for e in evs if e.TYPE == "evo.EvalCompleted"]
    last = {split(e): e for e in evals}
    policy = [e for e in evs if e.TYPE == "evo.Promoted" and e.subject == "policy"]
    main = int(policy[-1].subject_id) if policy else None
    main_evals = {split(e): e for e in evals if e.policy_version == main}
    rewards = [e.metrics["reward_mean"] for e in evs if e.TYPE == "evo.StepCompleted"]
    tail = rewards[-max(1, round(len(rewards) * 0.1)):]
    return {
        "last": {s: (e.step, e.metrics["strict_accuracy"]) for s, e in last.items()},
        "hack": {s: e.metrics["hack_rate"] for s, e in last.items() if "hack_rate" in e.metrics},
        "main": main, "main_strict": {s: e.metrics["strict_accuracy"] for s, e in main_evals.items()},
        "reward_end": sum(tail) / len(tail),
        "diagnoses": sum(e.TYPE == "evo.FailureDiagnosed" for e in evs),
        "invalid": sum(e.TYPE == "evo.FailureDiagnosed" and e.severity == "invalid" for e in evs),
        "interventions": (sum(e.TYPE == "evo.Promoted" and e.subject == "intervention" for e in evs),
                          sum(e.TYPE == "evo.Rejected" and e.subject == "intervention" for e in evs)),
        "policies": (len(policy), sum(e.TYPE == "evo.Rejected" and e.subject == "policy" for e in evs)),
        "skills": sum(e.TYPE == "evo.SkillRegistered" for e in evs),
        "steps": max(e.step for e in evs if e.TYPE == "evo.StepCompleted"),
        "decisions": [e for e in evs if e.TYPE in ("evo.Promoted", "evo.Rejected")],
        "mode": evs[0].harness_mode,
    }


def _text(cell: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", cell)).split())


def _figures_table(html: str) -> dict[str, list[str]]:
    """The final-figures table as {row label: [cell text per run]}."""
    table = re.search(r'<table class="figures">(.*?)</table>', html, re.S).group(1)
    body = table.split("<tbody>")[1]
    out = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = [_text(c) for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
        out[cells[0]] = cells[1:]
    return out


def _figure(html: str, caption: str) -> str:
    m = re.search(r"<figure><figcaption>" + re.escape(caption) + r".*?</figure>", html, re.S)
    assert m, f"no chart {caption!r}"
    return m.group(0)


def test_final_figures_match_the_logs(evo_store):
    for run_id in _runs(evo_store):
        want = _expected(evo_store, run_id)
        got = final_figures(collect(evo_store, run_id))
        assert got.mode == want["mode"] and got.steps == want["steps"]
        assert got.last_strict == want["last"]
        assert got.hack_rate == want["hack"]
        assert got.main_version == want["main"]
        assert got.main_strict == want["main_strict"]
        assert got.reward_end == pytest.approx(want["reward_end"])
        assert (got.diagnoses, got.invalid_diagnoses) == (want["diagnoses"], want["invalid"])
        assert got.interventions == want["interventions"] and got.policies == want["policies"]
        assert got.skills == want["skills"]
    # the runs really differ where a comparison should show it
    ev, fx = (final_figures(collect(evo_store, r)) for r in ("evolving", "fixed"))
    assert ev.hack_rate["validation"] < fx.hack_rate["validation"] and ev.interventions[0] > 0 == fx.interventions[0]


def test_compare_page_table_at_the_top(compared):
    store, runs, html = compared
    assert html.index('<table class="figures">') < html.index('<svg class="chart"')  # the table comes first
    table = _figures_table(html)
    for col, run_id in enumerate(runs):
        want = _expected(store, run_id)
        assert table["harness mode"][col] == want["mode"]
        assert table["steps"][col] == f"{want['steps']:,}"
        step, acc = want["last"]["validation"]
        assert table["validation strict accuracy (last eval, @step)"][col].startswith(f"{acc:.3f} @{step}")
        assert table["training reward (mean of the last 10% of steps)"][col].startswith(f"{want['reward_end']:.3f}")
        assert table["interventions promoted / rejected"][col] == "%d / %d" % want["interventions"]
        assert table["diagnoses (invalid)"][col] == f"{want['diagnoses']} ({want['invalid']})"
        if want["main"] is not None:
            assert table["main line (policy version the gate promoted last)"][col] == f"v{want['main']}"
            assert table["main line test strict accuracy"][col].startswith(f"{want['main_strict']['test']:.3f}")
        else:
            assert table["main line (policy version the gate promoted last)"][col] == "–"
        hack = want["hack"].get("test")
        assert table["hack rate, test (last eval)"][col].startswith(f"{hack:.3f}" if hack is not None else "–")
    # differences are against the first run
    base, other = _expected(store, runs[0]), _expected(store, runs[1])
    d = other["last"]["validation"][1] - base["last"]["validation"][1]
    assert f"({d:+.3f})" in table["validation strict accuracy (last eval, @step)"][1]
    assert all(cell.startswith("✓") for cell in table["hash chain"])


def test_compare_page_overlays_curves_per_run(compared):
    store, runs, html = compared
    # validation, test, reward, hack rate, the decision strip, diagnoses per window
    assert html.count('<svg class="chart"') == 6
    for caption, present in (("Validation strict accuracy", runs), ("Test strict accuracy", runs[:2]),
                             ("Training reward", runs), ("Hack rate", runs[:2])):
        fig = _figure(html, caption)
        titles = set(re.findall(r"<polyline[^>]*><title>([^<]*)</title>", fig))
        assert {t.split(" · ")[0] for t in titles} == set(present), (caption, titles)
        for pts in re.findall(r'<polyline class="series"[^>]*points="([^"]*)"', fig):
            assert 2 <= len(pts.split()) <= 100
    # greedy decoding is dashed, sampled solid; the old log has no greedy figure
    fig = _figure(html, "Validation strict accuracy")
    assert re.search(r'stroke-dasharray="6 4"[^>]*><title>evolving · greedy', fig)
    assert "old · greedy" not in fig
    # the reward is per step: faint raw lines under bold moving means
    assert len(re.findall(r'stroke-opacity="0.22"', _figure(html, "Training reward"))) == 3
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html


def test_compare_page_decisions_side_by_side(compared):
    store, runs, html = compared
    strip = _figure(html, "Decisions of each run over steps")
    rows = dict(re.findall(r'<tr id="s-(\d+)">(.*?)</tr>', html, re.S))
    for col, run_id in enumerate(runs):
        want = _expected(store, run_id)
        for dec in want["decisions"]:
            assert f'href="#d-{dec.event_id}"' in strip  # a mark in the run's lane links to its entry
            cells = re.findall(r"<td>(.*?)</td>", rows[str(dec.step)], re.S)
            assert f'id="d-{dec.event_id}"' in cells[1 + col], (run_id, dec.step)  # in the run's column, at its step
        diag_steps = {e.step for e in store.events(f"run-{run_id}") if e.TYPE == "evo.FailureDiagnosed"}
        for step in diag_steps:
            assert "ev diag" in re.findall(r"<td>(.*?)</td>", rows[str(step)], re.S)[1 + col]
    # steps are aligned: one row per step, in order, with a cell for every run
    steps = [int(s) for s in re.findall(r'<tr id="s-(\d+)">', html)]
    assert steps == sorted(set(steps))
    assert all(len(re.findall(r"<td>", r)) == 1 + len(runs) for r in rows.values())
    # the lanes: one per run, headed by its id
    assert [t for t in re.findall(r'class="lanehead"[^>]*>([^<]*)<', strip)] == list(runs)


def test_diagnoses_are_counts_per_window_not_a_line(compared):
    store, runs, html = compared
    fig = _figure(html, "Diagnoses per window, by run and kind")
    assert "<polyline" not in fig
    tips = re.findall(r"<title>([^<]*): (\d+) diagnos[ie]s in (?:steps? )", fig)
    for run_id in runs:
        assert f">{run_id}<" in fig
    total = sum(int(n) for _, n in tips)
    assert total == sum(e.TYPE == "evo.FailureDiagnosed" for r in runs for e in store.events(f"run-{r}"))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(0, 2000), st.integers(1, 5), max_size=300), st.integers(0, 2000))
def test_window_row_keeps_every_diagnosis(per_step, last):
    last = max([last, *per_step])
    xlim = step_range(last)
    size = window_size(xlim)
    sev = {s: ("invalid" if s % 3 == 0 else "warning") for s in per_step}
    row = window_row("k", per_step, sev, xlim, size, href=lambda s: f"#s-{s}")
    assert len(row.marks) <= MAX_WINDOWS
    assert sum(int(re.search(r": (\d+) diagnos", m.tip).group(1)) for m in row.marks) == sum(per_step.values())
    for m in row.marks:
        assert xlim[0] <= m.x < m.x_end <= xlim[1]
        inside = [s for s in per_step if m.x <= s < m.x_end]  # a cell spans its steps ± half a step
        assert inside and m.href == f"#s-{min(inside)}"
        worst = "invalid" if any(sev[s] == "invalid" for s in inside) else "warning"
        assert f"(worst: {worst})" in m.tip


@given(st.dictionaries(st.integers(0, 500), st.floats(-10, 10, allow_nan=False), max_size=200), st.integers(1, 40))
def test_smooth_is_a_local_mean(points, window):
    out = smooth(points, window)
    assert sorted(out) == sorted(points)
    if points:
        lo, hi = min(points.values()), max(points.values())
        assert all(lo - 1e-9 <= v <= hi + 1e-9 for v in out.values())
    const = smooth({k: 0.5 for k in points}, window)
    assert all(v == pytest.approx(0.5) for v in const.values())


def test_absent_figures_are_not_drawn(evo_store, tmp_path):
    a = generate_run(evo_store, run_id="old-a", steps=40, rollouts_per_step=4, seed=1)
    b = generate_run(evo_store, run_id="old-b", steps=50, rollouts_per_step=4, seed=2)
    html = build_report(evo_store, [a, b], tmp_path / "r").read_text()
    assert "Validation strict accuracy" in html  # "heldout" is shown as validation
    assert "Test strict accuracy" not in html and "Hack rate" not in html and "greedy" not in html
    table = _figures_table(html)
    assert not [k for k in table if "hack" in k or "test" in k or "main line" in k or "policies" in k]
    assert "Not in these logs: test-split evals, hack rate, policy decisions" in html
    assert html.count('<svg class="chart"') == 4  # validation, reward, decision strip, diagnoses


def test_single_run_shows_the_new_splits(evo_store, tmp_path):
    run_id = generate_run(evo_store, run_id="one", steps=60, rollouts_per_step=4, seed=1, eval_every=10, **NEW_EVALS)
    html = build_report(evo_store, run_id, tmp_path / "r").read_text()
    assert "<h1>Run one</h1>" in html and "Comparing" not in html
    acc = _figure(html, "Strict accuracy: validation and test (dashed: greedy decoding)")
    assert {"validation strict_accuracy", "test strict_accuracy", "validation strict_accuracy_greedy",
            "test strict_accuracy_greedy"} <= set(re.findall(r"<polyline[^>]*><title>([^<]*)</title>", acc))
    hack = _figure(html, "Hack rate")
    assert len(re.findall(r"<polyline", hack)) == 2
    table = _figures_table(html)
    want = _expected(evo_store, run_id)
    assert table["main line (policy version the gate promoted last)"] == [f"v{want['main']}"]
    # policy decisions are on the timeline as their own marks
    timeline = _figure(html, "Harness-version timeline")
    assert "policy promoted" in timeline and 'class="mark"' in timeline


def test_bad_compare_input(evo_store, tmp_path):
    a = generate_run(evo_store, run_id="a", steps=10, rollouts_per_step=4)
    with pytest.raises(AuditError, match="given more than once"):
        build_report(evo_store, [a, a], tmp_path / "r")
    with pytest.raises(AuditError, match="unknown run"):
        build_report(evo_store, [a, "nope"], tmp_path / "r")
    with pytest.raises(AuditError, match="at least one run"):
        build_report(evo_store, [], tmp_path / "r")
    assert not (tmp_path / "r").exists()  # nothing half-written
    with pytest.raises(ValueError, match="eval_metrics"):
        generate_run(evo_store, run_id="b", steps=2, rollouts_per_step=1, eval_metrics=("nonsense",))


def test_collect_run_verifies_each_chain(evo_store):
    data = collect_run(evo_store, generate_run(evo_store, run_id="v", steps=5, rollouts_per_step=2))
    assert data.verified is True and data.verify_problem is None


@pytest.fixture
def sqlite_pair(sqlite_url):
    from evo_core.store import open_store

    st_ = open_store(sqlite_url)
    a = generate_run(st_, run_id="evolving", steps=60, rollouts_per_step=8, seed=1, decision_every=10, eval_every=5,
                     curb=0.35, **NEW_EVALS)
    b = generate_run(st_, run_id="fixed", steps=60, rollouts_per_step=8, seed=2, decision_every=10, eval_every=5,
                     harness_mode="fixed", **NEW_EVALS)
    st_.close()
    return sqlite_url, a, b


def test_cli_compares_runs(sqlite_pair, tmp_path):
    url, a, b = sqlite_pair
    r = evo("report", a, b, "-o", str(tmp_path / "rep"), "--store", url)
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout and "<h1>Comparing 2 runs</h1>" in (tmp_path / "rep" / "index.html").read_text()
    r = evo("report", a, "nope", "-o", str(tmp_path / "bad"), "--store", url)
    assert r.returncode == 2 and "no run 'nope'" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.browser
def test_compare_page_renders_in_headless_chromium(sqlite_pair, tmp_path):
    url, a, b = sqlite_pair
    r = evo("report", a, b, "-o", str(tmp_path / "rep"), "--store", url)
    assert r.returncode == 0, r.stderr
    after = """JSON.stringify({
        shown: Array.from(document.querySelectorAll('#decisions .ev')).filter(function (e) {
            return e.style.display !== 'none'; }).map(function (e) { return e.className; }),
        rows: Array.from(document.querySelectorAll('#decisions tbody tr')).filter(function (r) {
            return r.style.display !== 'none'; }).length})"""
    got = open_page(tmp_path / "rep" / "index.html", CHART_PROBE, clicks=("#filter button[data-show=promoted]",), after=after)
    (tmp_path / "compare.png").write_bytes(got["png"])
    assert got["errors"] == [], got["errors"]
    info = got["probe"]
    assert info["ready"] == str(len(info["charts"])) and len(info["charts"]) == 6
    assert all(w > 900 and h > 60 for w, h in info["charts"]), info["charts"]  # full width, so the steps line up
    assert info["lines"] and all(n >= 2 for n in info["lines"])
    assert info["width"] <= info["viewport"], "the page scrolls sideways"
    # the filter: only promotions stay, and only the rows that have one
    shown = got["after"]["shown"]
    assert shown and all("promoted" in c for c in shown)
    assert 0 < got["after"]["rows"] < info["rows"]
    # both runs' colours are painted
    assert painted(got["png"], "#1f77b4") > 1500 and painted(got["png"], "#ff7f0e") > 1500

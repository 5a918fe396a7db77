"""The suite reports every arm's strict-oracle labels, and gives early stopping the evolving
arm's labels (``fixed+early-stop@budget``) so the two compare at equal labels (issue 33)."""

import pytest

from benchmarks import budget_curve, headline
from benchmarks import evolution as ev


def _labels(audit, validation, branch_val, test, decision, purposes, *, main_val=None):
    main_val = validation - branch_val if main_val is None else main_val
    rollouts = 1000
    return {"by_purpose": {"audit": audit, "regrade": 0, "validation": validation, "train": 0, "test": test},
            "backtest_branches": branch_val, "decision_relevant": decision, "decision_purposes": purposes,
            "training_rollouts": rollouts, "decision_share": decision / rollouts,
            "early_stop_validation": main_val, "early_stop_share": main_val / rollouts, "test_report_only": test,
            "budget_share": None}


def _row(arm, seed, test, labels):
    return {"cell": f"a__{arm}__seed{seed}", "flaw": "a", "arm": arm, "seed": seed, "mode": "cold", "status": "completed",
            "test_main": test, "hack_main": 0.0, "test_early_stop": test + 0.05, "hack_early_stop": 0.0,
            "code_version": "v1", "oracle_labels": labels,
            "labels_decision": labels["decision_relevant"] if labels else None,
            "labels_decision_share": labels["decision_share"] if labels else None}


def _rows():
    rows = []
    for s in (0, 1, 2):
        rows.append(_row("fixed", s, 0.3, _labels(50, 400, 0, 800, 0, [])))
        rows.append(_row("evolving", s, 0.6 + s / 100, _labels(80, 700 + 10 * s, 300, 800, 780 + 10 * s,
                                                                ["audit", "regrade", "validation"])))
        rows.append(_row("reference", s, 0.62, _labels(50, 400, 0, 800, 400, ["validation"])))
    return rows


def test_each_arm_reports_its_labels_and_early_stop_reads_only_the_fixed_runs_validation():
    agg = ev.aggregate(_rows())["a"]
    assert agg["fixed"]["oracle_labels"]["decision_relevant"] == 0
    es = agg["fixed+early-stop"]["oracle_labels"]
    assert es["decision_relevant"] == 400 and es["decision_share"] == pytest.approx(0.4) and es["by_purpose"]["audit"] == 50
    evo = agg["evolving"]["oracle_labels"]
    assert evo["decision_relevant"] == 790 and evo["backtest_branches"] == 300 and evo["by_purpose"]["test"] == 800
    assert agg["evolving"]["labels_decision_share"]["mean"] == pytest.approx(0.79)


def test_a_row_without_counted_labels_is_unknown_not_zero():
    rows = [_row("fixed", 0, 0.3, None), _row("evolving", 0, 0.6, None)]
    agg = ev.aggregate(rows)["a"]
    assert agg["evolving"]["oracle_labels"] is None and agg["fixed+early-stop"]["oracle_labels"] is None
    assert agg["evolving"]["labels_decision_share"]["mean"] is None


def test_the_markdown_and_the_headline_show_the_labels():
    rows = _rows()
    result = {"seeds": [0, 1, 2], "mode": "cold", "audit_rate": "0.05", "flaws": ["a"], "total_wall_s": 60,
              "aggregate": ev.aggregate(rows), "comparisons": ev.comparisons(rows), "runs": rows}
    md = ev.markdown(result)
    assert "| a | evolving | 80 | 0 | 710 | 300 | 0 | 790 (audit, regrade, validation) | 0.79 | 800 |" in md
    assert "| a | fixed+early-stop | 50 | 0 | 400 | 0 | 0 | 400 (validation (main line)) | 0.40 | 800 |" in md
    table = headline.table(result)
    assert "oracle labels (fixed / early stop / reference / evolving)" in table and "| 0.00 / 0.40 / 0.40 / 0.79 |" in table
    assert "at equal labels" not in table  # no matched arm ran


def test_the_matched_early_stop_is_compared_at_equal_labels():
    rows = _rows()
    for s in (0, 1, 2):
        m = _row(ev.MATCHED, s, 0.5, _labels(50, 790, 0, 1600, 790, ["validation (main line)"]))
        rows.append(m)
    comp = ev.comparisons(rows)["a"]
    assert comp[f"evolving - {ev.MATCHED}"]["test_main"]["mean"] == pytest.approx(0.11)
    result = {"seeds": [0, 1, 2], "mode": "cold", "audit_rate": "0.05", "flaws": ["a"], "total_wall_s": 60,
              "aggregate": ev.aggregate(rows), "comparisons": ev.comparisons(rows), "runs": rows}
    assert f"| flaw | seeds | evolving − {ev.MATCHED} |" in ev.markdown(result)
    assert "evolving − early stop at equal labels |" in headline.table(result)


def test_the_schedule_match_spends_the_target_labels():
    # a run's own schedule: 21 evaluations x 200 items x (4 samples + greedy)
    own = ev.match_schedule(21_000, steps=200, every=10, per_eval_sample=200, greedy=1, samples=4)
    assert (own["eval_every"], own["samples"], own["labels"]) == (10, 4, 21_000)
    more = ev.match_schedule(33_000, steps=200, every=10, per_eval_sample=200, greedy=1, samples=4)
    assert abs(more["labels"] - 33_000) <= 0.02 * 33_000 and more["eval_every"] < 10
    less = ev.match_schedule(5_000, steps=200, every=10, per_eval_sample=200, greedy=1, samples=4)
    assert abs(less["labels"] - 5_000) <= 0.02 * 5_000 and less["eval_every"] > 10
    assert ev.eval_count(40, 10) == 5 and ev.eval_count(40, 6) == 8


def test_the_matched_sets_read_the_twins_log_figures():
    twin = {"status": "completed", "oracle_labels": _labels(80, 1360, 960, 400, 1588, ["audit", "regrade", "validation"],
                                                            main_val=400),
            "eval_schedule": {"steps": 40, "eval_every": 10, "samples": 1, "greedy": True, "validation_evals": 5}}
    sets = ev.matched_sets(twin, {"name": "m", "match": "e"})
    assert sets == ["run.eval_every=6", "eval.samples=4", "eval.test_every=0"]  # 8 evals x 40 items x 5 = 1,600
    with pytest.raises(RuntimeError, match="no completed run"):
        ev.matched_sets(None, {"name": "m", "match": "e"})


def test_matched_cells_run_the_fixed_harness_after_their_evolving_twin():
    suite = ev.load_suite()
    cells = ev.cells(suite, ["arithmetic/hedge"], ["fixed", "evolving", ev.MATCHED], [0, 1], mode="cold",
                     audit_sweep=None, smoke=True)
    m = [c for c in cells if c["arm"] == ev.MATCHED]
    assert len(m) == 2 and all(c["harness"] == "fixed" and c["match"] == ev.cell_name(c["flaw"], "evolving", c["seed"])
                               for c in m)
    assert all(not any(x.startswith("harness.oracle.budget=") for x in c["sets"]) for c in m)  # matched, not capped
    assert all(any(x.startswith("harness.oracle.budget=") for x in c["sets"]) for c in cells if c["arm"] == "evolving")
    deps = {c["name"]: d for c, d in ev.cell_order(cells)}
    assert all(c["match"] in deps[c["name"]] for c in m)
    with pytest.raises(SystemExit, match="add evolving"):
        ev.cells(suite, ["arithmetic/hedge"], ["fixed", ev.MATCHED], [0], mode="cold", audit_sweep=None, smoke=True)


def test_budget_curve_cells_cap_only_the_evolving_runs():
    suite = ev.load_suite()
    cells = budget_curve.budget_cells(suite, ["arithmetic/hedge"], [0], [0.1, 0.5, 1.0], smoke=True)
    assert len(cells) == 6 and len({c["name"] for c in cells}) == 6
    for c in cells:
        capped = [s for s in c["sets"] if s.startswith("harness.oracle.budget=")]
        if c["arm"] == "evolving":
            assert capped[-1] == f"harness.oracle.budget={c['budget']:g}"  # the last --set wins
        else:
            assert not capped and c["match"] == ev.cell_name(c["flaw"], "evolving", c["seed"], c["variant"])


def test_goal_names_a_collapse_behind_a_kept_early_checkpoint():
    """The evolving main line matches the reference, but the training behind it collapsed: its
    last checkpoint is 0.3 below the reference, so the goal is not met, and the criterion is named."""
    rows = _rows()
    for r in rows:
        r["test_last"] = r["test_main"] - (0.3 if r["arm"] == "evolving" else 0.0)
    goal = ev.comparisons(rows)["a"]["goal"]
    assert goal["last_at_least_reference_minus_0.10"] is False
    assert goal["test_at_least_reference_minus_0.03"] is True
    result = {"seeds": [0, 1, 2], "mode": "cold", "audit_rate": "0.05", "flaws": ["a"], "total_wall_s": 60,
              "aggregate": ev.aggregate(rows), "comparisons": {}, "runs": rows}
    row = next(line for line in headline.table(result).splitlines() if line.startswith("| a |"))
    assert row.endswith("| no: last |")
    for r in rows:
        r["test_last"] = r["test_main"]
    assert ev.comparisons(rows)["a"]["goal"]["last_at_least_reference_minus_0.10"] is True

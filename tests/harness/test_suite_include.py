"""``benchmarks/evolution.py --include``: rows of an earlier report join the aggregate only for
cells the stores lack, and each keeps its source."""

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _evolution():
    import benchmarks.evolution

    return benchmarks.evolution


def _row(cell, flaw, arm, seed, test):
    return {"cell": cell, "flaw": flaw, "arm": arm, "seed": seed, "mode": "cold", "test_main": test, "hack_main": 0.1,
            "test_early_stop": test + 0.1, "hack_early_stop": 0.0}


def test_included_rows_fill_only_missing_cells_of_the_selection(tmp_path):
    ev = _evolution()
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"runs": [_row("a__fixed__seed0", "a", "fixed", 0, 0.1),
                                        _row("a__evolving__seed0", "a", "evolving", 0, 0.6),
                                        _row("b__fixed__seed0", "b", "fixed", 0, 0.2),
                                        _row("a__fixed__seed3", "a", "fixed", 3, 0.3)]}))
    rows = ev.included_rows([str(old)], {"a__evolving__seed0"}, ["a"], [0], mode="cold")
    assert [r["cell"] for r in rows] == ["a__fixed__seed0"] and rows[0]["source"] == str(old)
    agg = ev.aggregate(rows)
    assert agg["a"]["fixed+early-stop"]["test_main"]["values"] == [0.2]  # derived from the included fixed row


def test_included_rows_follow_the_selected_modes(tmp_path):
    ev = _evolution()
    old = tmp_path / "old.json"
    warm = {**_row("a__evolving-warm__seed0", "a", "evolving-warm", 0, 0.7), "mode": "warm"}
    old.write_text(json.dumps({"runs": [_row("a__fixed__seed0", "a", "fixed", 0, 0.1), warm]}))
    cells = lambda mode: [r["cell"] for r in ev.included_rows([str(old)], set(), ["a"], [0], mode=mode)]  # noqa: E731
    assert cells("cold") == ["a__fixed__seed0"]
    assert cells("warm") == ["a__evolving-warm__seed0"]
    assert cells("both") == ["a__fixed__seed0", "a__evolving-warm__seed0"]


def test_the_cost_projection_uses_medians_and_one_sft_per_flaw_and_seed(tmp_path):
    ev = _evolution()
    rows = [{**_row(f"a__{arm}__seed{s}", "a", arm, s, 0.5), "wall_s": w}
            for arm, walls in (("fixed", (100, 120, 5000)), ("reference", (200, 200, 200)), ("evolving", (300, 310, 320)))
            for s, w in enumerate(walls)]
    rows.append({**_row("a__evolving-warm__seed0", "a", "evolving-warm", 0, 0.5), "mode": "warm", "wall_s": 9999})
    cache = tmp_path / ".evo" / "cache" / "sft"
    for i, (t, n) in enumerate(((50.0, 500), (70.0, 500), (60.0, 500), (900.0, 2500))):
        (cache / f"k{i}").mkdir(parents=True)
        (cache / f"k{i}" / "metrics.json").write_text(json.dumps({"sft_time_s": t, "sft_steps": float(n)}))
    (cache / "broken").mkdir()
    (cache / "broken" / "metrics.json").write_text("{not json")
    runs = ev.sft_runs(tmp_path)
    assert runs == {"k0": {"steps": 500, "s": 50.0}, "k1": {"steps": 500, "s": 70.0}, "k2": {"steps": 500, "s": 60.0},
                    "k3": {"steps": 2500, "s": 900.0}}
    c = ev.cost(rows, runs, {"a": 500}, jobs=2, seeds=(3,))
    # the 5000 s outlier and the warm cell are out; a's warm start is the 500-step median
    assert c["median_cell_wall_s"] == {"a": {"evolving": 310, "fixed": 120, "reference": 200}}
    # the 2500-step warm start stands for no flaw here: the projection rests on three
    assert c["median_sft_s"] == {"a": 60.0} and c["sft_runs_measured"] == 3
    assert c["projected_wall_h"]["seeds_3"] == round((120 + 200 + 310 + 60) * 3 / 2 / 3600, 2)


def test_each_suite_flaw_has_a_known_sft_length():
    ev = _evolution()
    suite = ev.load_suite()
    steps = ev.flaw_sft_steps(suite, list(suite["flaws"]))
    assert steps["arithmetic/hedge"] == 500 and all(n > 0 for n in steps.values())


def test_sft_timings_of_included_reports_still_count(tmp_path):
    """A report built from a fresh cells directory keeps the warm starts earlier reports timed:
    raw runs where the report kept them (deduplicated by cache key), else one per-flaw median."""
    ev = _evolution()
    new = tmp_path / "new.json"
    new.write_text(json.dumps({"runs": [], "cost": {"sft_runs": {"k0": {"steps": 500, "s": 50.0}}}}))
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps({"runs": [], "cost": {"median_sft_s": {"a": 180.0, "gone": 9.0}}}))
    runs = ev.included_sft_runs([str(new), str(legacy)], {"a": 500})
    assert runs == {"k0": {"steps": 500, "s": 50.0}, f"{legacy}:a": {"steps": 500, "s": 180.0}}
    rows = [{**_row(f"a__{arm}__seed0", "a", arm, 0, 0.5), "wall_s": 100.0} for arm in ("fixed", "evolving")]
    c = ev.cost(rows, {**runs, "k0": {"steps": 500, "s": 50.0}}, {"a": 500}, jobs=1, seeds=(3,))
    assert c["sft_runs_measured"] == 2 and c["median_sft_s"] == {"a": 115.0}
    assert c["sft_runs"]["k0"] == {"steps": 500, "s": 50.0}
    # nothing cached here: the count names the included runs the projection stands on
    c = ev.cost(rows, {}, {"a": 500}, jobs=1, seeds=(3,), sft_fallback=runs)
    assert c["sft_runs_measured"] == 2 and c["median_sft_s"] == {"a": 115.0}


bench = _evolution()


def _cells(flaws, seeds, arms=("fixed", "reference", "evolving"), mode="cold"):
    suite = bench.load_suite()
    return bench.cells(suite, flaws, list(arms), seeds, mode=mode, audit_sweep=None, smoke=False)


@pytest.mark.parametrize("per_seed", [False, True])
def test_each_warm_start_is_trained_once_and_the_longest_cells_go_first(per_seed):
    flaws = ["arithmetic/hedge", "code/visible_tests"]
    suite = bench.load_suite()
    todo = bench.cells(suite, flaws, ["fixed", "reference", "evolving"], [0, 1], mode="cold", audit_sweep=None,
                       smoke=False, per_seed_warm_starts=per_seed)
    order = bench.cell_order(todo, bench.flaw_sft_steps(suite, flaws))
    heads = [c for c, deps in order if not deps]
    # one per warm start: per flaw where the seeds share it (the suite's sft.seed), else per (flaw, seed)
    assert len(heads) == (4 if per_seed else 2)
    assert all(c["arm"] == "evolving" for c in heads)  # the longest cell of each start trains it
    assert heads[0]["flaw"] == "code/visible_tests"  # the longer warm start first
    rest = [(c["flaw"], c["arm"]) for c, deps in order if deps]
    # then the heaviest flaw's evolving cells that no head took, then the rest of its cells
    assert rest[0] == ("code/visible_tests", "fixed" if per_seed else "evolving")
    first = {(c["flaw"], c["warm_seed"]): c["name"] for c in heads}
    for c, deps in order:
        if deps:
            assert deps == [first[(c["flaw"], c["warm_seed"])]]
            assert c["warm_seed"] == (c["seed"] if per_seed else 0)
    assert sorted(c["name"] for c, _ in order) == sorted(c["name"] for c in todo)


def test_the_projection_counts_one_warm_start_per_flaw_when_the_seeds_share_it():
    rows = [{"flaw": "a", "arm": "fixed", "seed": s, "wall_s": 100.0} for s in range(3)]
    sft = {"k": {"steps": 500, "s": 360.0}}
    per_seed = bench.cost(rows, sft, {"a": 500}, jobs=1, seeds=(3,))
    shared = bench.cost(rows, sft, {"a": 500}, jobs=1, seeds=(3,), shared_warm_starts=True)
    assert per_seed["projected_wall_h"]["seeds_3"] == round(3 * 460 / 3600, 2)
    assert shared["projected_wall_h"]["seeds_3"] == round((3 * 100 + 360) / 3600, 2)


def test_warm_cells_wait_for_the_other_flaws_cold_evolving_runs():
    todo = _cells(["arithmetic/hedge", "arithmetic/echo"], [0], arms=("fixed", "evolving"), mode="both")
    order = dict((c["name"], deps) for c, deps in bench.cell_order(todo))
    warm = next(n for n in order if n.startswith("arithmetic_hedge__evolving-warm"))
    assert "arithmetic_echo__evolving__seed0" in order[warm]
    head, *skills = order[warm]  # the warm start's head cell, then the skill sources
    assert "arithmetic_echo__evolving__seed0" in skills and not any("hedge__evolving__" in x for x in skills)
    assert order[head] == []


def test_the_scheduler_runs_each_cell_after_its_dependencies(tmp_path, monkeypatch):
    todo = _cells(["arithmetic/hedge", "arithmetic/echo"], [0], arms=("fixed", "evolving"), mode="both")
    finished: list[str] = []

    def fake_run(d, cell, all_cells, timeout):
        deps = dict((c["name"], ds) for c, ds in bench.cell_order(todo))[cell["name"]]
        assert all(x in finished for x in deps), (cell["name"], deps, finished)
        finished.append(cell["name"])
        return {"name": cell["name"], "ran": True, "wall_s": 0.0, "returncode": 0}

    monkeypatch.setattr(bench, "run_cell", fake_run)
    out = bench.run_matrix(tmp_path, todo, todo, 2, 1.0, lambda m: None)
    assert sorted(r["name"] for r in out) == sorted(c["name"] for c in todo)


def test_cells_timed_here_win_over_included_timings():
    """An included report's (possibly busier) timings stand in only for flaws and arms not timed here."""
    here = [{**_row("a__fixed__seed0", "a", "fixed", 0, 0.5), "wall_s": 100.0}]
    old = [{**_row(f"a__{arm}__seed1", "a", arm, 1, 0.5), "wall_s": 300.0, "source": "old.json"}
           for arm in ("fixed", "evolving")]
    c = bench.cost(here + old, {"k": {"steps": 500, "s": 60.0}}, {"a": 500}, jobs=1, seeds=(1,),
                   sft_fallback={"old:a": {"steps": 500, "s": 200.0}})
    assert c["median_cell_wall_s"] == {"a": {"evolving": 300.0, "fixed": 100.0}}
    assert c["median_sft_s"] == {"a": 60.0}
    assert c["timed_here"] == ["a fixed"]
    assert c["projected_wall_h"]["seeds_1"] == round(460.0 / 3600, 2)


def test_measured_matrix_walls_carry_over_from_included_reports(tmp_path):
    m = {"cells_ran": 18, "cells": 18, "seeds": 1, "flaws": 6, "jobs": 2, "wall_s": 3000.0}
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"runs": [], "cost": {"measured": m}}))  # one invocation's own report
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"runs": [], "cost": {"measured": [{**m, "source": str(a)}]}}))  # a report that included it
    got = bench.included_measurements([str(a), str(b)])
    assert got == [{**m, "source": str(a)}]
    text = bench.markdown({"aggregate": {}, "comparisons": {}, "seeds": [0], "mode": "cold", "audit_rate": "0.05",
                           "cost": {"measured": got}})
    assert "ran 18 of its 18 cells (1 seed(s) of 6 flaws, 2 at a time, warm starts included) in 0.83 h." in text


def test_a_report_without_cost_measured_contributes_its_total_wall(tmp_path):
    rep = {"command": "python benchmarks/evolution.py --suite --seeds 1", "cells": 18, "seeds": [0], "flaws": ["a"] * 6,
           "total_wall_s": 3600.0, "runs": [], "cost": {"jobs": 2}}
    (tmp_path / "ran.json").write_text(json.dumps(rep))
    (tmp_path / "read.json").write_text(json.dumps({**rep, "command": rep["command"] + " --read-only"}))
    got = bench.included_measurements([str(tmp_path / "ran.json"), str(tmp_path / "read.json")])
    assert [(m["cells_ran"], m["cells"], m["wall_s"]) for m in got] == [(None, 18, 3600.0)]  # aggregating is not running
    (tmp_path / "agg.json").write_text(json.dumps({"runs": [], "cost": {"measured": got}}))  # a report that included it
    assert bench.included_measurements([str(tmp_path / "agg.json"), str(tmp_path / "ran.json")]) == got
    text = bench.markdown({"aggregate": {}, "comparisons": {}, "seeds": [0], "mode": "cold", "audit_rate": "0.05",
                           "cost": {"measured": got}})
    assert "ran its 18 cells (1 seed(s) of 6 flaws, 2 at a time, warm starts included) in 1.00 h." in text


def test_the_report_says_when_cells_come_from_different_code():
    rows = [{**_row("a__fixed__seed0", "a", "fixed", 0, 0.5), "code_version": "0.1+gaaa"},
            {**_row("a__fixed__seed1", "a", "fixed", 1, 0.5), "source": "old.json"},
            {**_row("b__fixed__seed0", "b", "fixed", 0, 0.5), "code_version": "0.1+gaaa"}]
    prov = bench.provenance(rows + bench.early_stop_rows(rows))
    assert prov == {"a": {"0.1+gaaa": 1, "unrecorded (from old.json)": 1}, "b": {"0.1+gaaa": 1}}
    text = bench.markdown({"aggregate": {}, "comparisons": {}, "seeds": [0, 1], "mode": "cold", "audit_rate": "0.05",
                           "provenance": prov})
    assert "- a: 0.1+gaaa (1), unrecorded (from old.json) (1)" in text and "- b:" not in text


def test_a_probe_flaw_runs_only_when_named():
    ev = _evolution()
    suite = ev.load_suite()
    probes = [f for f, spec in suite["flaws"].items() if spec.get("probe")]
    assert probes, "the suite ships at least one held-out probe"
    default = ev.default_flaws(suite)
    assert not set(probes) & set(default) and set(default) | set(probes) == set(suite["flaws"])
    # named, a probe gets every arm like any other flaw
    cells = ev.cells(suite, probes[:1], ["fixed", "reference", "evolving"], [0], mode="cold", audit_sweep=None, smoke=True)
    assert [c["arm"] for c in cells] == ["fixed", "reference", "evolving"]
    assert any(s.startswith("task.options.flaw=") for s in cells[0]["sets"])


def test_cells_of_one_seed_from_different_warm_starts_are_not_paired():
    ev = _evolution()

    def row(arm, seed, test, start, digest=None):
        return {**_row(f"a__{arm}__seed{seed}", "a", arm, seed, test), "test_initial": start, "start_digest": digest}

    rows = [row("evolving", 0, 0.8, 0.60), row("reference", 0, 0.7, 0.60), row("fixed", 0, 0.1, 0.60),
            # seed 1: the evolving cell was rerun elsewhere, from another warm start
            row("evolving", 1, 0.9, 0.66), row("reference", 1, 0.7, 0.64), row("fixed", 1, 0.1, 0.64),
            # seed 2: digests decide where both rows carry one (same start, whatever step 0 scored)
            row("evolving", 2, 0.8, 0.61, "d2"), row("reference", 2, 0.75, 0.62, "d2"), row("fixed", 2, 0.1, 0.61, "x")]
    comp = ev.comparisons(rows)["a"]
    assert comp["evolving - reference"]["seeds"] == [0, 2] and comp["evolving - reference"]["unpaired_seeds"] == [1]
    assert comp["evolving - fixed"]["seeds"] == [0] and comp["evolving - fixed"]["unpaired_seeds"] == [1, 2]
    assert comp["evolving - reference"]["test_main"]["values"] == [pytest.approx(0.1), pytest.approx(0.05)]
    text = ev.markdown({"aggregate": ev.aggregate(rows), "comparisons": ev.comparisons(rows), "seeds": [0, 1, 2],
                        "mode": "cold", "audit_rate": 0.05})
    assert "a seed(s) 1, 2" in text and "different warm starts" in text


def test_a_measurement_names_the_machine_it_ran_on():
    m = bench.machine()
    assert m["cores"] == os.cpu_count() and m["cpu"]
    got = [{"cells_ran": 54, "cells": 54, "seeds": 3, "flaws": 6, "jobs": 2, "wall_s": 5400.0,
            "machine": {"cpu": "Some CPU", "cores": 2, "cpu_model": "family 6 model 1"}}]
    text = bench.markdown({"aggregate": {}, "comparisons": {}, "seeds": [0, 1, 2], "mode": "cold", "audit_rate": "0.05",
                           "cost": {"measured": got}})
    assert "ran 54 of its 54 cells (3 seed(s) of 6 flaws, 2 at a time, warm starts included) in 1.50 h " \
           "on Some CPU (2 cores, family 6 model 1)." in text

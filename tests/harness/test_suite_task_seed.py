"""``benchmarks/evolution.py --task-seed``: every cell draws its splits from a new task seed."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _evolution():
    import benchmarks.evolution

    return benchmarks.evolution


def test_task_seed_replaces_the_seed_of_every_cells_task_url():
    ev = _evolution()
    suite = ev.load_suite(str(ROOT / "configs" / "suite" / "suite.toml")) if hasattr(ev, "load_suite") else None
    if suite is None:
        import tomllib
        suite = tomllib.loads((ROOT / "configs" / "suite" / "suite.toml").read_text())
    flaws = ["arithmetic/hedge", "code/visible_tests"]
    plain = ev.cells(suite, flaws, ["fixed"], [100], mode="cold", audit_sweep=None, smoke=False)
    fresh = ev.cells(suite, flaws, ["fixed"], [100], mode="cold", audit_sweep=None, smoke=False, task_seed=7)
    for a, b in zip(plain, fresh):
        assert not any(s.startswith("task.train=") for s in a["sets"])
        url = [s for s in b["sets"] if s.startswith("task.train=")][-1]
        assert url.endswith('seed=7"') and "seed=0" not in url and "validation=200" in url
        assert b["name"] == a["name"] + "__task7"
    smoke = ev.cells(suite, flaws, ["fixed"], [1], mode="cold", audit_sweep=None, smoke=True, task_seed=3)
    assert all('validation=40' in [s for s in c["sets"] if s.startswith("task.train=")][-1] for c in smoke)


def test_task_seed_refuses_a_file_dataset():
    ev = _evolution()
    with pytest.raises(SystemExit, match="generated tasks"):
        ev.with_task_seed("data/train.jsonl", 3)
    assert ev.with_task_seed("generate://addition?digits=2&seed=0&test=4", 5) == "generate://addition?digits=2&test=4&seed=5"

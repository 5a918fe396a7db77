"""Run names: a full id, a unique prefix, ``@last``/``latest`` and ``PREFIX@last``, in the
library and in every CLI command that takes a run."""

from __future__ import annotations

import json

import pytest

from evo_core.store import open_store
from evo_core.store.runs import RunNameError, resolve_run
from evo_core.synthetic import generate_run
from tests.core.helpers import evo

IDS = ("qs-evolving-aa11", "qs-fixed-bb22", "qs-evolving-cc33", "other-evolving-dd44")  # oldest first


@pytest.fixture
def mem_store():
    st = open_store("memory://")
    for rid in IDS:
        generate_run(st, run_id=rid, steps=2, rollouts_per_step=2)
    return st


def test_full_id_prefix_and_last(mem_store):
    st = mem_store
    assert all(resolve_run(st, rid) == rid for rid in IDS)
    assert resolve_run(st, "qs-fixed") == "qs-fixed-bb22"
    assert resolve_run(st, "other") == "other-evolving-dd44"
    assert resolve_run(st, "@last") == resolve_run(st, "latest") == "other-evolving-dd44"
    assert resolve_run(st, "qs-evolving@last") == "qs-evolving-cc33"  # newest by store order, not by name
    assert resolve_run(st, "qs@last") == "qs-evolving-cc33"


def test_ambiguous_prefix_lists_candidates(mem_store):
    with pytest.raises(RunNameError) as ei:
        resolve_run(mem_store, "qs-evolving")
    msg = str(ei.value)
    assert "ambiguous" in msg and "qs-evolving-aa11" in msg and "qs-evolving-cc33" in msg and "@last" in msg
    assert ei.value.candidates == ("qs-evolving-cc33", "qs-evolving-aa11")
    assert "\n" not in msg


@pytest.mark.parametrize("name", ["ghost", "ghost@last", "", "  "])
def test_unknown_names_are_errors(mem_store, name):
    with pytest.raises(RunNameError):
        resolve_run(mem_store, name)


def test_empty_store():
    with pytest.raises(RunNameError, match="holds no runs"):
        resolve_run(open_store("memory://"), "@last")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('names')}/evo.sqlite"
    st = open_store(url)
    generate_run(st, run_id="demo-evolving-1111", steps=6, rollouts_per_step=4)
    generate_run(st, run_id="demo-evolving-2222", steps=6, rollouts_per_step=4)
    st.close()
    return url


@pytest.mark.parametrize("cmd", [
    ["log", "RUN", "-n", "1", "--json"],
    ["checkout", "RUN", "--json"],
    ["diff", "RUN", "0", "head", "--json"],
    ["verify", "RUN", "--no-blobs"],
    ["audit", "RUN", "--json"],
    ["replay", "RUN", "--no-write", "--json"],
    ["report", "RUN", "-o", "OUT"],
    ["tail", "RUN", "--no-follow", "--json"],
])
def test_every_command_takes_prefix_and_last(two_runs, tmp_path, cmd):
    url = two_runs
    for name in ("demo-evolving@last", "@last", "demo-evolving-2"):
        args = [name if a == "RUN" else str(tmp_path / "out") if a == "OUT" else a for a in cmd]
        r = evo(*args, "--store", url)
        assert r.returncode == 0, (args, r.stderr)
        if "--json" in cmd and cmd[0] in ("checkout", "audit"):
            assert json.loads(r.stdout)["run_id"] == "demo-evolving-2222"
    args = ["demo-evolving" if a == "RUN" else str(tmp_path / "out") if a == "OUT" else a for a in cmd]
    r = evo(*args, "--store", url)
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "ambiguous" in err and "demo-evolving-1111" in err, err

import json

import pytest
from typer.testing import CliRunner

from evo_core.simulation import run_simulated
from evo_core.store import open_store
from evo_core.testing import isolated_plugins


@pytest.fixture(scope="module")
def skill_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("st") / "a.sqlite"
    url = f"sqlite:///{path}"
    st = open_store(url)
    run_simulated(st, isolated_plugins(), steps=20, seed=1, checkpoint_dir=str(path.parent / "ck"))
    st.close()
    return url


def _app():
    import typer

    from evo_core.cli import harness_cmds

    app = typer.Typer()

    @app.callback()
    def _root():
        pass

    harness_cmds.register(app)
    return app


def test_list_export_import(skill_store, tmp_path):
    r = CliRunner().invoke(_app(), ["skills", "--store", skill_store, "--json"])
    assert r.exit_code == 0, r.output
    skills = json.loads(r.output)
    assert skills and skills[0]["uses"] >= 0 and skills[0]["bundle"]["intervention"]["name"]
    table = CliRunner().invoke(_app(), ["skills", "--store", skill_store])
    # not a terminal: tab-separated values, a header row and one row per skill
    rows = [line.split("\t") for line in table.output.splitlines()]
    assert table.exit_code == 0 and rows[0][0] == "skill" and len(rows) == len(skills) + 1
    f = tmp_path / "skills.json"
    assert CliRunner().invoke(_app(), ["skills", "export", str(f), "--store", skill_store]).exit_code == 0
    assert json.loads(f.read_text())["format"] == "evo-skills"
    other = f"sqlite:///{tmp_path / 'b.sqlite'}"
    r = CliRunner().invoke(_app(), ["skills", "import", str(f), "--store", other])
    assert r.exit_code == 0 and f"imported {len(skills)} new" in r.output
    r2 = CliRunner().invoke(_app(), ["skills", "import", str(f), "--store", other])
    assert "imported 0 new" in r2.output
    listed = json.loads(CliRunner().invoke(_app(), ["skills", "--store", other, "--json"]).output)
    assert {s["skill_id"] for s in listed} == {s["skill_id"] for s in skills}


def test_import_bad_file_is_one_line_error(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    r = CliRunner().invoke(_app(), ["skills", "import", str(bad), "--store", "memory://"])
    assert r.exit_code != 0
    r2 = CliRunner().invoke(_app(), ["skills", "import", str(tmp_path / "missing.json"), "--store", "memory://"])
    assert r2.exit_code != 0


def test_list_missing_store_is_an_error(tmp_path):
    r = CliRunner().invoke(_app(), ["skills", "--store", f"sqlite:///{tmp_path / 'nope.sqlite'}"])
    assert r.exit_code != 0

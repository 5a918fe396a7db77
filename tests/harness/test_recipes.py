from pathlib import Path

import pytest

from evo_core.harness.recipes import MissingPathError, check_paths, named_paths

RECIPES = sorted((Path(__file__).resolve().parents[2] / "configs" / "recipes").glob("*.toml"))


def test_three_recipes_exist():
    assert {p.stem for p in RECIPES} >= {"math", "code", "swe"}


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_recipe_validates_and_names_its_paths(path):
    from evo_core.config import load_config

    cfg = load_config(str(path)).to_dict()
    keys = {k for k, _ in named_paths(cfg)}
    assert {"task.train", "task.test", "policy.path"} <= keys
    assert cfg["distributed"] and cfg["harness"]["mode"] == ""  # each run arm sets it
    with pytest.raises(MissingPathError) as e:
        check_paths(cfg)
    assert "config key 'task.train'" in str(e.value) and "\n" not in str(e.value)


def test_recipe_passes_when_paths_exist(tmp_path):
    from evo_core.config import load_config

    cfg = load_config(str(RECIPES[0])).to_dict()
    for key, _ in named_paths(cfg):
        p = tmp_path / key.replace(".", "_")
        p.mkdir()
        section, *rest = key.split(".")
        node = cfg[section]
        for part in rest[:-1]:
            node = node[part]
        node[rest[-1]] = str(p)
    check_paths(cfg)

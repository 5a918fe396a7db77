import pytest

from evo_core.config import ConfigError, apply_overrides, config_from_dict, load_config, parse_override


def test_quickstart_config_loads_and_matches_calibration():
    cfg = load_config("configs/quickstart.toml")
    assert cfg.run.harnesses == ("fixed", "evolving")
    assert (cfg.rl.prompts_per_step, cfg.rl.group_size, cfg.rl.lr, cfg.rl.warmup_steps) == (32, 8, 1e-4, 30)
    assert cfg.task.options["flaw"] == "hedge" and cfg.sft.enabled and cfg.harness["audit"]["rate"] == 0.05
    assert cfg.harness["mode"] == "" and cfg.for_arm("fixed").harness["mode"] == "fixed"  # the arm sets the mode
    assert cfg.for_arm("fixed").harness["mode"] == "fixed" and cfg.for_arm("fixed").run.arm == "fixed"
    assert cfg.for_arm("fixed").config_hash() != cfg.for_arm("evolving").config_hash()


def test_every_arm_is_an_overlay_that_changes_only_what_it_says():
    from evo_core.arms import ARMS

    base = load_config("configs/quickstart.toml")
    ref = base.for_arm("reference")
    assert ref.task.reward == "oracle" and ref.harness["gates"]["policy"]["trust"] == "validation"
    assert ref.rl == base.rl and ref.task.options == base.task.options and ref.sft == base.sft
    es = base.for_arm("fixed+early-stop")
    assert es.harness["mode"] == "fixed" and es.harness["gates"]["policy"]["trust"] == "validation"
    assert es.task == base.for_arm("fixed").task and es.rl == base.for_arm("fixed").rl
    assert all(base.for_arm(a).run.arm == a for a in ARMS)
    go = base.for_arm("evolving/gate-only")
    assert all(go.harness["proposers"][p]["enabled"] is False for p in ("skills", "contrast", "rules"))
    with pytest.raises(ConfigError, match="unknown harness arm"):
        base.for_arm("evolving/magic")


@pytest.mark.parametrize("item,path,value", [
    ("rl.lr=3e-4", ["rl", "lr"], 3e-4),
    ("run.steps=5", ["run", "steps"], 5),
    ("sft.enabled=false", ["sft", "enabled"], False),
    ("run.name=hello", ["run", "name"], "hello"),
    ('run.harnesses=["fixed"]', ["run", "harnesses"], ["fixed"]),
    ("task.options.flaw=echo", ["task", "options", "flaw"], "echo"),
])
def test_set_values_are_typed(item, path, value):
    assert parse_override(item) == (path, value)


def test_overrides_apply_and_validate():
    cfg = config_from_dict(apply_overrides({}, ["rl.lr=0.01", "rl.algorithm=dapo"]))
    assert cfg.rl.lr == 0.01 and cfg.rl.algorithm == "dapo"


@pytest.mark.parametrize("data,needle", [
    ({"rl": {"lrr": 1}}, "unknown config key 'rl.lrr'"),
    ({"bogus": {}}, "unknown config key 'bogus'"),
    ({"rl": {"lr": "fast"}}, "'rl.lr' must be a number"),
    ({"run": {"steps": 1.5}}, "'run.steps' must be an integer"),
    ({"run": {"steps": 0}}, "'run.steps' must be an integer >= 1"),
    ({"sft": {"enabled": "yes"}}, "'sft.enabled' must be true or false"),
    ({"rl": {"algorithm": "ppo"}}, "'rl.algorithm' must be one of"),
    ({"run": {"harnesses": ["lazy"]}}, "run.harnesses"),
    ({"policy": {"kind": "hf"}}, "policy.path"),
    ({"policy": {"tiny": {"layers": 2}}}, "policy.tiny.layers"),
    ({"harness": {"diagnose_evry": 3}}, "diagnose_evry"),
    ({"sft": {"steps": -5}}, "'sft.steps' must be an integer >= 1"),
    ({"rl": {"lr": float("nan")}}, "'rl.lr' must be a finite number >= 0"),
    ({"rl": {"lr": -1e-4}}, "'rl.lr' must be a finite number >= 0"),
    ({"rl": {"temperature": -0.5}}, "'rl.temperature' must be a finite number >= 0"),
])
def test_bad_config_names_the_key(data, needle):
    with pytest.raises(ConfigError, match=None) as ei:
        config_from_dict(data)
    assert needle in str(ei.value)


def test_set_errors(tmp_path):
    with pytest.raises(ConfigError, match="key=value"):
        parse_override("rl.lr")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "nope.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text("[rl\nlr=")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(str(bad))
    with pytest.raises(ConfigError, match="not a table"):
        apply_overrides({"rl": {"lr": 1}}, ["rl.lr.x=2"])


def test_hash_is_stable_and_sensitive():
    a = config_from_dict({"rl": {"lr": 1e-4}})
    assert a.config_hash() == config_from_dict({"rl": {"lr": 1e-4}}).config_hash()
    assert a.config_hash() != config_from_dict({"rl": {"lr": 2e-4}}).config_hash()

import pytest

from evo_core.harness import HarnessConfig, HarnessConfigError, build_harness


def test_defaults_and_roundtrip():
    cfg = HarnessConfig.from_dict({})
    assert cfg.mode == "" and cfg.evolving  # unset until a run arm sets it; evolving meanwhile
    assert "reward_oracle_gap" in cfg.diagnostics and set(cfg.gates) == {"validity", "statistical", "policy"}
    assert "answer_hedging" not in cfg.diagnostics and not cfg.priors  # cold by default: no flaw-specific prior
    assert set(cfg.proposers) == {"skills", "contrast", "rules"} and cfg.audit.rate == 0.05
    again = HarnessConfig.from_dict(cfg.to_dict())
    assert again == cfg


@pytest.mark.parametrize("data,needle", [
    ({"mdoe": "fixed"}, "'harness.mdoe'"),
    ({"backtest": {"k_step": 3}}, "'harness.backtest.k_step'"),
    ({"ablations": {"no_revisions": True}}, "'harness.ablations.no_revisions'"),
    ({"audit": {"rat": 0.1}}, "'harness.audit.rat'"),
    ({"mode": "static"}, "harness.mode"),
    ({"backtest": {"confidence": 1.5}}, "harness.backtest.confidence"),
    ({"ablations": {"no_revision": "yes"}}, "harness.ablations.no_revision"),
    ({"diagnostics": {"answer_hedging": 3}}, "harness.diagnostics.answer_hedging"),
    ({"window_steps": 0}, "harness.window_steps"),
    ({"skills_from": [1]}, "harness.skills_from"),
])
def test_bad_config_names_the_key(data, needle):
    with pytest.raises(HarnessConfigError) as e:
        HarnessConfig.from_dict(data)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_shorthand_and_fixed_mode(pm):
    cfg = HarnessConfig.from_dict({"mode": "fixed", "diagnostics": {"answer_hedging": True}, "skills_from": "x.json",
                                   "ablations": {"no_online_backtest": True}})
    assert cfg.diagnostics["answer_hedging"] == {} and cfg.skills_from == ("x.json",)
    assert not cfg.evolving and cfg.ablations.no_online_backtest
    h = build_harness(cfg, pm, run_id="r")
    assert hasattr(h, "new_pass")


def test_one_diagnostic_table_tunes_one_and_leaves_the_defaults_on():
    from evo_core.harness.config import DEFAULT_DIAGNOSTICS

    cfg = HarnessConfig.from_dict({"diagnostics": {"truncation_rate": {"max_rate": 0.5}, "my_spec": {"spec": {}}}})
    assert set(cfg.diagnostics) == set(DEFAULT_DIAGNOSTICS) | {"my_spec"}
    assert cfg.diagnostics["truncation_rate"] == {"max_rate": 0.5}
    off = HarnessConfig.from_dict({"diagnostics": {"entropy_collapse": {"enabled": False}}})
    assert off.diagnostics["entropy_collapse"] == {"enabled": False}
    only = HarnessConfig.from_dict({"replace_diagnostics": True, "diagnostics": {"truncation_rate": {}}})
    assert set(only.diagnostics) == {"truncation_rate"}


def test_priors_join_only_when_switched_on():
    from evo_core.harness.engine import Catalog, with_priors
    from evo_core.testing import isolated_plugins

    cat = Catalog.from_plugins(isolated_plugins("evo_plugins.diagnostics", "evo_plugins.proposers", "evo_plugins.priors"))
    cold = with_priors(HarnessConfig.from_dict({}), cat)
    warm = with_priors(HarnessConfig.from_dict({"priors": True}), cat)
    assert "answer_hedging" not in cold.diagnostics and "priors" not in cold.proposers
    assert {"answer_hedging", "swe_test_tampering", "format_violations"} <= set(warm.diagnostics)
    assert "priors" in warm.proposers


def test_tuning_one_gate_keeps_the_others():
    cfg = HarnessConfig.from_dict({"gates": {"policy": {"tolerance": 0.01}}})
    assert set(cfg.gates) == {"validity", "statistical", "policy"} and cfg.gates["policy"] == {"tolerance": 0.01}
    off = HarnessConfig.from_dict({"gates": {"statistical": {"enabled": False}}})
    assert off.gates["statistical"] == {"enabled": False}

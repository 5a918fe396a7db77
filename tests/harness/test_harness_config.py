import pytest

from evo_core.harness import HarnessConfig, HarnessConfigError, build_harness


def test_defaults_and_roundtrip():
    cfg = HarnessConfig.from_dict({})
    assert cfg.mode == "evolving" and cfg.evolving
    assert "answer_hedging" in cfg.diagnostics and set(cfg.gates) == {"validity", "statistical", "policy"}
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
    assert cfg.diagnostics == {"answer_hedging": {}} and cfg.skills_from == ("x.json",)
    assert not cfg.evolving and cfg.ablations.no_online_backtest
    h = build_harness(cfg, pm, run_id="r")
    assert hasattr(h, "on_step") and hasattr(h, "on_run_end")


def test_tuning_one_gate_keeps_the_others():
    cfg = HarnessConfig.from_dict({"gates": {"policy": {"tolerance": 0.01}}})
    assert set(cfg.gates) == {"validity", "statistical", "policy"} and cfg.gates["policy"] == {"tolerance": 0.01}
    off = HarnessConfig.from_dict({"gates": {"statistical": {"enabled": False}}})
    assert off.gates["statistical"] == {"enabled": False}

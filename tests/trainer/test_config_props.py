"""Every numeric setting rejects nonsense at load: NaN, infinities, a value below or above
its range, a wrong type, and an unknown key next to it. Each error is one ``ConfigError``
line that names the full key. Plugin parameters (``[harness.diagnostics.NAME]`` and the
other plugin tables) are held to their declarations the same way."""

from __future__ import annotations

import math
import typing
from typing import Any, Optional

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evo_core.api.params import declared_parameters
from evo_core.config import ConfigError, RunConfig, apply_overrides, config_from_dict
from evo_core.config_checks import check_plugin_params
from evo_core.config_schema import Count, Number
from evo_core.harness.config import HarnessConfig

NUMERIC = (int, float, Optional[int], Optional[float])


def _numeric_fields(cls: type, where: str) -> list[tuple[str, type, Any]]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in attrs.fields(cls):
        key = f"{where}.{f.name}" if where else f.name
        tp = hints[f.name]
        if attrs.has(tp):
            out += _numeric_fields(tp, key)
        elif tp in NUMERIC:
            base = float if tp in (float, Optional[float]) else int
            out.append((key, base, f.validator))
    return out


SETTINGS = [s for s in _numeric_fields(RunConfig, "") if not s[0].startswith("harness")] + \
    _numeric_fields(HarnessConfig, "harness")


def _nested(key: str, value: Any) -> dict[str, Any]:
    data: dict[str, Any] = {}
    node = data
    parts = key.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
    return data


def test_every_numeric_setting_declares_its_range():
    assert len(SETTINGS) > 60
    unranged = [k for k, _, v in SETTINGS if not isinstance(v, (Count, Number))]
    assert not unranged, unranged
    keys = {k for k, _, _ in SETTINGS}
    for k in ("harness.audit.rate", "harness.backtest.confidence", "rl.clip_low", "rl.top_p", "rl.weight_decay",
              "task.validation_fraction", "eval.samples", "rl.warmup_steps", "sft.warmup_steps",
              "rl.micro_batch_size", "run.threads", "policy.tiny.hidden_size"):
        assert k in keys


def _wrong_values(base: type, validator: Any) -> st.SearchStrategy[Any]:
    wrong_type = st.one_of(st.text(max_size=5), st.booleans(), st.lists(st.integers(), max_size=2),
                           st.dictionaries(st.text(max_size=3), st.integers(), max_size=1))
    options = [wrong_type, st.sampled_from([math.nan, math.inf, -math.inf])]
    if base is int:
        options.append(st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != int(x)))
    lo = validator.minimum if isinstance(validator, Count) else validator.lo
    if lo is not None:
        if base is int:
            options.append(st.integers(min_value=-(10 ** 6), max_value=int(lo) - 1))
        else:
            below = st.floats(min_value=lo - 1e6, max_value=lo, exclude_max=not validator.lo_open, allow_nan=False)
            options.append(below)
    hi = validator.hi if isinstance(validator, Number) else None
    if hi is not None:
        options.append(st.floats(min_value=hi, max_value=hi + 1e6, exclude_min=not validator.hi_open, allow_nan=False))
    return st.one_of(options)


@st.composite
def _bad_setting(draw: Any) -> tuple[str, Any]:
    key, base, validator = draw(st.sampled_from(SETTINGS))
    if draw(st.integers(0, 9)) == 0:  # an unknown key beside it (a typo)
        return key.rsplit(".", 1)[0] + "." + draw(st.sampled_from(["typo", "max_rte", "lr_", "Steps"])), 1
    return key, draw(_wrong_values(base, validator))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_bad_setting())
def test_a_wrong_value_of_any_numeric_setting_is_one_line_naming_the_key(bad):
    key, value = bad
    with pytest.raises(ConfigError) as ei:
        config_from_dict(_nested(key, value))
    msg = str(ei.value)
    assert f"'{key}'" in msg and "\n" not in msg, (key, value, msg)


@pytest.mark.parametrize("item", ["harness.audit.rate=nan", "rl.top_p=nan", "rl.clip_low=-inf", "rl.lr=inf",
                                  "eval.samples=-2", "run.threads=-1", "run.steps='5'"])
def test_set_overrides_reach_the_same_check(item):
    with pytest.raises(ConfigError, match=f"'{item.split('=')[0]}'"):
        config_from_dict(apply_overrides({}, [item]))


# --- plugin parameters --------------------------------------------------------------------


def _plugin_params():
    from evo_core.plugins import get_plugin_manager

    pm = get_plugin_manager()
    rows = []
    for table, what in (("diagnostics", "diagnostic"), ("gates", "gate"), ("proposers", "proposer"),
                        ("interventions", "intervention")):
        for name, plugin in sorted(getattr(pm, table)().items()):
            for pname, p in declared_parameters(plugin).items():
                if p.kind in (int, float):
                    rows.append((f"harness.{table}.{name}", what, plugin, pname, p))
    return rows


PLUGIN_PARAMS = _plugin_params()


def test_installed_plugins_declare_numeric_parameters():
    assert len(PLUGIN_PARAMS) > 30
    assert any(w == "harness.diagnostics.truncation_rate" and n == "max_rate" for w, _, _, n, _ in PLUGIN_PARAMS)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PLUGIN_PARAMS),
       st.one_of(st.sampled_from([math.nan, math.inf, -math.inf]), st.text(max_size=4), st.booleans(),
                 st.lists(st.integers(), max_size=2), st.just(None), st.just("typo")))
def test_a_wrong_plugin_parameter_is_one_line_naming_the_key(row, value):
    where, what, plugin, pname, _p = row
    if value == "typo":
        key, params = f"{where}.{pname}_x", {f"{pname}_x": 1.0}
    else:
        key, params = f"{where}.{pname}", {pname: value}
    with pytest.raises(ConfigError) as ei:
        check_plugin_params(where, what, plugin, params)
    msg = str(ei.value)
    assert f"'{key}'" in msg and "\n" not in msg, (key, value, msg)


def test_declared_ranges_hold():
    from evo_plugins.diagnostics.core import TruncationRate

    where = "harness.diagnostics.truncation_rate"
    with pytest.raises(ConfigError, match=r"'harness.diagnostics.truncation_rate.max_rate' must be <= 1"):
        check_plugin_params(where, "diagnostic", TruncationRate(), {"max_rate": 1.5})
    check_plugin_params(where, "diagnostic", TruncationRate(), {"max_rate": 0.5, "enabled": True, "version": "1"})

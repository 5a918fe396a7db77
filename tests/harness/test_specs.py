import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evo_core.testing import rollout


def mk(i=0, *, answers=1, **kw):
    return rollout(i, answer_count=answers, **kw)
from evo_core.harness.specs import SpecError, evaluate_spec, flagged_ids, validate_spec

HEDGE_PAID = {
    "kind": "multi_answer_rewarded", "severity": "invalid",
    "where": {"all": [{"signal": "answer_count", "op": ">", "value": 1}, {"field": "reward", "op": ">=", "value": 1}]},
    "statistic": {"type": "rate"}, "threshold": {"op": ">", "value": 0.2}, "min_n": 5,
}


def test_rate_fires_and_does_not():
    hacked = [mk(i, answers=2 if i % 2 else 1) for i in range(20)]
    clean = [mk(i, answers=1) for i in range(20)]
    r = evaluate_spec(HEDGE_PAID, hacked)
    assert r.fired and r.value == 0.5 and len(r.evidence) == 10
    r2 = evaluate_spec(HEDGE_PAID, clean)
    assert not r2.fired and r2.value == 0.0
    assert not evaluate_spec({**HEDGE_PAID, "min_n": 50}, hacked).fired  # too little evidence
    assert flagged_ids(HEDGE_PAID, hacked) == {r.event_id for r in hacked if r.signals["answer_count"] > 1}


def test_trend_gap_diff_mean():
    rows = [mk(i, step=s, answers=2 if i < s else 1) for s in range(1, 6) for i in range(10)]
    trend = {"kind": "k", "where": {"signal": "answer_count", "op": ">", "value": 1}, "statistic": {"type": "trend"},
             "threshold": {"op": ">", "value": 0.05}}
    r = evaluate_spec(trend, rows)
    assert r.fired and abs(r.value - 0.1) < 1e-9
    gap = {"kind": "len", "statistic": {"type": "gap", "of": {"field": "length"},
                                        "a": {"field": "correct", "op": "==", "value": False},
                                        "b": {"field": "correct", "op": "==", "value": True}},
           "threshold": {"op": ">", "value": 2}}
    rows2 = [mk(i, reward=0.0, length=10) for i in range(5)] + [mk(i, reward=1.0, length=4) for i in range(5)]
    assert evaluate_spec(gap, rows2).value == 6 and evaluate_spec(gap, rows2).fired
    diff = {"kind": "gap", "statistic": {"type": "diff", "x": {"field": "reward"}, "y": {"field": "strict_correct"}},
            "threshold": {"op": ">", "value": 0.3}}
    rows3 = [mk(i, reward=1.0, strict=i % 2 == 0) for i in range(10)] + [mk(99, reward=1.0)]  # unaudited one ignored
    r3 = evaluate_spec(diff, rows3)
    assert r3.n == 10 and abs(r3.value - 0.5) < 1e-9 and r3.fired
    mean = {"kind": "m", "statistic": {"type": "mean", "of": {"signal": "answer_count"}}, "threshold": {"op": ">=", "value": 2}}
    assert not evaluate_spec(mean, rows3).fired


@pytest.mark.parametrize("spec,needle", [
    ({"kind": "k", "where": {"signal": "x", "op": "~", "value": 1}, "threshold": {"op": ">", "value": 0}}, "op"),
    ({"kind": "k", "where": {"field": "__class__", "op": "==", "value": 1}, "threshold": {"op": ">", "value": 0}}, "field"),
    ({"kind": "k", "where": {"signal": "x", "op": ">", "value": [1]}, "threshold": {"op": ">", "value": 0}}, "scalar"),
    ({"kind": "k", "where": {"signal": "x", "op": ">", "value": 1}, "threshold": {"op": ">", "value": "0"}}, "threshold"),
    ({"kind": "k", "where": {"signal": "x", "op": ">", "value": 1}, "threshold": {"op": ">", "value": 0}, "code": "x"}, "unknown"),
    ({"kind": "", "where": {"signal": "x", "op": ">", "value": 1}, "threshold": {"op": ">", "value": 0}}, "kind"),
    ({"kind": "k", "statistic": {"type": "rate"}, "threshold": {"op": ">", "value": 0}}, "where"),
    ({"kind": "k", "severity": "fatal", "where": {"signal": "x", "op": ">", "value": 1}, "threshold": {"op": ">", "value": 0}}, "severity"),
])
def test_invalid_specs_are_rejected(spec, needle):
    with pytest.raises(SpecError) as e:
        validate_spec(spec)
    assert needle in str(e.value)


def test_deep_or_huge_predicates_rejected():
    p = {"signal": "x", "op": "==", "value": 1}
    for _ in range(12):
        p = {"not": p}
    with pytest.raises(SpecError):
        validate_spec({"kind": "k", "where": p, "threshold": {"op": ">", "value": 0}})


def test_code_in_values_is_just_data():
    spec = {"kind": "k", "where": {"signal": "answer_count", "op": "==", "value": "__import__('os').system('false')"},
            "threshold": {"op": ">", "value": 0}}
    assert not evaluate_spec(spec, [mk(1)]).fired


leaf = st.fixed_dictionaries({"signal": st.sampled_from(["answer_count", "nope", "hedged"]),
                              "op": st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "exists"]),
                              "value": st.one_of(st.integers(-3, 3), st.booleans(), st.text(max_size=3), st.none())})
preds = st.recursive(leaf, lambda c: st.one_of(st.builds(lambda xs: {"all": xs}, st.lists(c, min_size=1, max_size=3)),
                                              st.builds(lambda x: {"not": x}, c)), max_leaves=6)


@settings(max_examples=60, deadline=None)
@given(preds, st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=0, max_size=12))
def test_random_specs_never_raise(pred, rows):
    spec = {"kind": "k", "where": pred, "threshold": {"op": ">", "value": 0.1}}
    rollouts = [mk(i, answers=a, hedged=h) for i, (a, h) in enumerate(rows)]
    res = evaluate_spec(spec, rollouts)
    assert res.value is None or 0.0 <= res.value <= 1.0


def test_compiled_spec_answers_as_evaluate_spec_and_keeps_no_stale_result():
    """A compiled spec (kept by repr) gives evaluate_spec's answer; its one-entry result cache
    is keyed by the rollouts' identity and hands out its own stats each time."""
    from evo_core.harness.specs import CompiledSpec, compiled_spec, evaluate_spec
    from evo_core.testing import rollout

    spec = {"kind": "k", "where": {"signal": "s", "op": "==", "value": True}, "statistic": {"type": "rate"},
            "threshold": {"op": ">", "value": 0.2}}
    rows = tuple(rollout(i, s=i % 3 == 0) for i in range(30))
    c = CompiledSpec(spec)
    first = c.evaluate(rows)
    assert first == evaluate_spec(spec, rows) and first.fired
    first.stats["value"] = -1.0  # a caller's change does not reach the cache
    again = c.evaluate(rows)
    assert again.stats["value"] == first.value and again.stats is not first.stats
    other = tuple(rollout(i, s=False) for i in range(30))
    assert c.evaluate(other).value == 0.0  # another tuple: evaluated afresh
    assert compiled_spec(dict(spec)) is compiled_spec(spec)
    changed = {**spec, "threshold": {"op": ">", "value": 0.9}}
    assert compiled_spec(changed) is not compiled_spec(spec) and not evaluate_spec(changed, rows).fired

"""The compiled predicate (the bulk path of spec evaluation) agrees with the interpreted one."""

from hypothesis import given, settings
from hypothesis import strategies as st

from evo_core.harness.specs import compile_predicate, matches
from evo_core.testing import rollout

# few distinct values, so that ties (where < and <= differ) are common
values = st.sampled_from([0, 1, 2, 1.0, 1.5, True, False, "1", "", "a", None])
refs = st.one_of(st.fixed_dictionaries({"signal": st.sampled_from(["s1", "s2", "absent"])}),
                 st.fixed_dictionaries({"feature": st.sampled_from(["chars", "digits", "numbers", "first_char", "absent"])}),
                 st.fixed_dictionaries({"field": st.sampled_from(["reward", "truncated", "split", "strict_correct"])}))
leaf = st.builds(lambda ref, op, v: {**ref, "op": op, "value": v}, refs,
                 st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "exists", "in"]), values)
in_leaf = st.builds(lambda ref, vs: {**ref, "op": "in", "value": vs}, refs, st.lists(values, max_size=3))
preds = st.recursive(st.one_of(leaf, in_leaf), lambda c: st.one_of(
    st.builds(lambda xs: {"all": xs}, st.lists(c, min_size=1, max_size=3)),
    st.builds(lambda xs: {"any": xs}, st.lists(c, min_size=1, max_size=3)),
    st.builds(lambda x: {"not": x}, c)), max_leaves=6)
rows = st.lists(st.tuples(values, values, st.sampled_from(["", "12", "ab c", "7x"]), st.booleans()), max_size=8)


def _safe(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # both paths must fail alike (e.g. 'in' against an unhashable)
        return ("error", type(exc).__name__)


@settings(max_examples=150, deadline=None)
@given(preds, rows)
def test_compiled_predicate_equals_interpreted(pred, data):
    compiled = compile_predicate(pred)
    for i, (s1, s2, text, trunc) in enumerate(data):
        r = rollout(i, text=text, truncated=trunc, reward=s1 if isinstance(s1, (int, float)) else 0.5, s1=s1, s2=s2)
        assert _safe(compiled, r) == _safe(matches, pred, r), (pred, r.signals, r.features)

"""A group's features equal each response's own features, the task's and the group's, however
often its samples repeat one another (repeats are computed once)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from evo_core.harness.features import features_for_group, group_features, response_features, task_features

texts = st.lists(st.sampled_from(["82", "82 ", "8 2", "1+2=3", "", "abc\n12", "37,45", "99999", "82"]) | st.text(max_size=12),
                 min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(texts, st.sampled_from(["37+45=", "", "f(n)=n+? f(10)==11\n$ ", "7 and 07"]), st.data())
def test_group_features_equal_per_response_computation(group, prompt, data):
    n_tokens = data.draw(st.lists(st.integers(0, 3), min_size=len(group), max_size=len(group)))
    truncated = data.draw(st.lists(st.booleans(), min_size=len(group), max_size=len(group)))
    got = features_for_group(group, prompt, n_tokens, truncated)
    rel = group_features(group)
    want = [{**task_features(prompt), **response_features(t, prompt=prompt, n_tokens=n, truncated=tr), **g}
            for t, n, tr, g in zip(group, n_tokens, truncated, rel)]
    assert got == want
    assert all(a is not b for a, b in zip(got, got[1:]))  # each rollout owns its dict

from hypothesis import given, strategies as st
from evo_core.harness.stats import paired_bootstrap, slope


def test_paired_bootstrap_detects_a_real_gain():
    control = {f"i{k}": float(k % 2) for k in range(100)}
    treat = {k: 1.0 for k in control}
    b = paired_bootstrap(control, treat, n_boot=500, seed=1)
    assert b.n == 100 and b.mean_diff == 0.5 and b.ci[0] > 0.3 and b.worse == 0


def test_paired_bootstrap_includes_zero_without_effect():
    control = {f"i{k}": float(k % 2) for k in range(100)}
    treat = {f"i{k}": float((k // 2) % 2) for k in range(100)}  # same mean, different items
    b = paired_bootstrap(control, treat, n_boot=500, seed=1)
    assert b.ci[0] < 0 < b.ci[1] and b.worse == 25 and b.better == 25


def test_pairing_only_on_shared_items():
    assert paired_bootstrap({"a": 1.0}, {"b": 1.0}) is None
    b = paired_bootstrap({"a": 0.0, "b": 1.0}, {"b": 1.0, "c": 0.0}, n_boot=50)
    assert b.n == 1 and b.items == ("b",)


def test_slope():
    assert slope([1, 2, 3], [1, 2, 3]) == 1.0
    assert slope([1, 1], [0, 5]) is None and slope([1], [1]) is None


def test_worse_margin_ignores_small_item_noise():
    control = {f"i{k}": 0.5 for k in range(40)}
    treat = {f"i{k}": 0.25 if k < 10 else (0.0 if k < 12 else 0.75) for k in range(40)}
    assert paired_bootstrap(control, treat, n_boot=50).worse == 12
    b = paired_bootstrap(control, treat, n_boot=50, worse_margin=0.25)
    assert b.worse == 2 and b.worse_frac == 0.05


@given(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=1, max_size=60),
       st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=60), st.integers(0, 2**40))
def test_paired_bootstrap_interval_is_ordered_bounded_and_seeded(c, t, seed):
    items = [f"i{k}" for k in range(min(len(c), len(t)))]
    control, treat = dict(zip(items, c)), dict(zip(items, t))
    b = paired_bootstrap(control, treat, n_boot=200, seed=seed)
    diffs = [treat[i] - control[i] for i in items]
    assert min(diffs) - 1e-12 <= b.ci[0] <= b.ci[1] <= max(diffs) + 1e-12
    assert b.ci == paired_bootstrap(control, treat, n_boot=200, seed=seed).ci

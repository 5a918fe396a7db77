"""The harness's statistics against scipy and against closed forms.

The t functions are scipy's own (``special.stdtr``/``stdtrit``), so they are also checked
through other routes: the incomplete-beta identity (``special.betainc``), the closed forms
at 1 and 2 degrees of freedom, and ``stats.t.interval``. The percentile bootstrap draws its
resamples differently from ``scipy.stats.bootstrap`` (multinomial counts over distinct
values, another random stream) and scipy's default method is BCa, so the two are compared
on identical resamples, with ``method="percentile"``."""

from __future__ import annotations

import inspect
import math
import statistics

import numpy as np
import pytest
from scipy import special, stats

from evo_core.harness.stats import paired_bootstrap, percentile_interval, t_cdf, t_interval, t_quantile

DOFS = (1, 2, 3, 4, 5, 7, 10, 19, 30, 60, 200, 1000)
TS = np.linspace(-30.0, 30.0, 241)
PS = (1e-6, 1e-4, 1e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.975, 0.99, 0.999, 1 - 1e-4)


def _rng_kw(seed: int) -> dict:
    """scipy >= 1.15 takes ``rng``; older releases ``random_state``."""
    key = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"
    return {key: np.random.default_rng(seed)}


@pytest.mark.parametrize("dof", DOFS)
def test_t_cdf_matches_scipy_and_the_incomplete_beta_identity(dof):
    for t in TS:
        got = t_cdf(float(t), dof)
        assert got == pytest.approx(stats.t.cdf(t, dof), abs=1e-9)
        # P(T <= t) = 1 - I_x(v/2, 1/2) / 2 for t > 0, x = v / (v + t^2), by symmetry below 0
        tail = 0.5 * special.betainc(dof / 2.0, 0.5, dof / (dof + t * t))
        assert got == pytest.approx(1.0 - tail if t > 0 else tail, abs=1e-9)


def test_t_cdf_closed_forms():
    for t in TS:
        assert t_cdf(float(t), 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)  # Cauchy
        assert t_cdf(float(t), 2) == pytest.approx(0.5 + t / (2.0 * math.sqrt(2.0 + t * t)), abs=1e-12)


@pytest.mark.parametrize("dof", DOFS)
def test_t_quantile_matches_scipy_and_inverts_the_cdf(dof):
    for p in PS:
        q = t_quantile(p, dof)
        assert q == pytest.approx(stats.t.ppf(p, dof), rel=1e-9, abs=1e-9)
        assert t_cdf(q, dof) == pytest.approx(p, rel=1e-9)


def test_t_quantile_closed_forms_and_normal_limit():
    for p in PS:
        assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)
        assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-9)
        assert t_quantile(p, 10**7) == pytest.approx(statistics.NormalDist().inv_cdf(p), rel=1e-5)
    # the 95% two-sided value for 9 degrees of freedom, as every t table prints it
    assert t_quantile(0.975, 9) == pytest.approx(2.2621571627982, abs=1e-12)


@pytest.mark.parametrize("p,dof", [(0.0, 3), (1.0, 3), (-0.1, 3), (0.5, 0), (float("nan"), 3), (0.5, float("nan"))])
def test_t_quantile_refuses_bad_arguments(p, dof):
    with pytest.raises(ValueError):
        t_quantile(p, dof)


@pytest.mark.parametrize("xs", [[0.1, 0.3], [1.0, 2.0, 4.0], [0.02, -0.01, 0.05, 0.0, 0.03], list(range(10))])
@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
def test_t_interval_is_scipys(xs, confidence):
    ti = t_interval(xs, confidence)
    lo, hi = stats.t.interval(confidence, len(xs) - 1, loc=np.mean(xs), scale=stats.sem(xs))
    assert (ti.lo, ti.hi) == (pytest.approx(lo, abs=1e-9), pytest.approx(hi, abs=1e-9))
    assert ti.sd == pytest.approx(np.std(xs, ddof=1), abs=1e-12)


def test_t_interval_degenerate_cases():
    assert t_interval([1.0]) is None
    ti = t_interval([0.5, 0.5, 0.5])
    assert (ti.lo, ti.mean, ti.hi) == (0.5, 0.5, 0.5)


# --- the percentile bootstrap ----------------------------------------------------------------


@pytest.mark.parametrize("n_boot", [50, 999, 2000])
@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95])
def test_percentile_interval_on_scipys_own_resamples(n_boot, confidence):
    """Identical resamples: scipy's percentile interval interpolates (numpy's linear
    percentile) where ours takes an order statistic; each end lies within the order
    statistics next to ours."""
    x = np.random.default_rng(7).normal(size=41)
    res = stats.bootstrap((x,), np.mean, method="percentile", n_resamples=n_boot, confidence_level=confidence,
                          **_rng_kw(1))
    dist = np.sort(res.bootstrap_distribution)
    a = (1.0 - confidence) / 2.0
    # what scipy computed is numpy's percentile of the resample means, so this is like for like
    assert np.allclose([res.confidence_interval.low, res.confidence_interval.high],
                       np.percentile(dist, [100 * a, 100 * (1 - a)]), rtol=0, atol=1e-12)
    lo, hi = percentile_interval(dist, confidence)
    i, j = int(a * n_boot), int((1 - a) * n_boot) - 1
    assert (lo, hi) == (dist[i], dist[j])
    assert dist[max(0, i - 1)] <= res.confidence_interval.low <= dist[i + 1]
    assert dist[j - 1] <= res.confidence_interval.high <= dist[min(n_boot - 1, j + 2)]


def test_paired_bootstrap_is_the_percentile_interval_of_its_own_resamples():
    """The multinomial draw is reproduced step by step: same seed, same resamples, same ends."""
    gen = np.random.default_rng(11)
    control = {f"i{k}": float(v) for k, v in enumerate(gen.integers(0, 2, 60))}
    treat = {f"i{k}": float(v) for k, v in enumerate(gen.integers(0, 2, 60))}
    b = paired_bootstrap(control, treat, n_boot=1000, confidence=0.9, seed=5)
    diffs = np.array([treat[i] - control[i] for i in sorted(control)])
    values, counts = np.unique(diffs, return_counts=True)
    draws = np.random.default_rng(5).multinomial(len(diffs), counts / len(diffs), size=1000)
    means = np.sort(draws @ values / len(diffs))
    assert b.ci == (means[50], means[949]) == percentile_interval(means, 0.9)


def test_multinomial_resampling_matches_index_resampling():
    """Drawing counts over distinct values is the same distribution as scipy's item-by-item
    resampling: with many resamples of each, the intervals and spreads agree."""
    diffs = np.repeat([-1.0, 0.0, 0.5, 1.0], [9, 40, 6, 25])
    items = {f"i{k}": 0.0 for k in range(len(diffs))}
    ours = paired_bootstrap(items, {f"i{k}": float(d) for k, d in enumerate(diffs)}, n_boot=20000, confidence=0.9,
                            seed=3)
    res = stats.bootstrap((diffs,), np.mean, method="percentile", n_resamples=20000, confidence_level=0.9, **_rng_kw(3))
    se = diffs.std() / math.sqrt(len(diffs))  # the bootstrap distribution's exact spread
    assert res.standard_error == pytest.approx(se, rel=0.03)
    assert ours.ci[0] == pytest.approx(res.confidence_interval.low, abs=0.1 * se)
    assert ours.ci[1] == pytest.approx(res.confidence_interval.high, abs=0.1 * se)

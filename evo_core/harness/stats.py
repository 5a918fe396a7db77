"""Small statistics the harness decides with: paired item-level bootstrap, slopes, rates."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

import attrs

if TYPE_CHECKING:
    import numpy as np


@attrs.frozen
class PairedBootstrap:
    """Treatment minus control over items scored in both branches."""

    n: int
    mean_diff: float
    ci: tuple[float, float]
    worse: int  # items where treatment scored below control
    better: int
    worse_frac: float
    control_mean: float
    treatment_mean: float
    items: tuple[str, ...] = ()


def paired_bootstrap(
    control: Mapping[str, float],
    treatment: Mapping[str, float],
    *,
    n_boot: int = 2000,
    confidence: float = 0.9,
    seed: int = 0,
    worse_margin: float = 0.0,
) -> Optional[PairedBootstrap]:
    """Percentile bootstrap CI of mean(treatment - control), resampling *items* (pairs).

    Pairing removes the between-item variance: both branches answer the same held-out
    items, so only the per-item difference is resampled. None when no item is shared."""
    items = sorted(set(control) & set(treatment))
    if not items:
        return None
    diffs = [float(treatment[i]) - float(control[i]) for i in items]
    n = len(diffs)
    lo, hi = percentile_interval(_bootstrap_means(diffs, n_boot, seed), confidence)
    worse = sum(1 for d in diffs if d < -worse_margin)
    better = sum(1 for d in diffs if d > worse_margin)
    return PairedBootstrap(
        n=n, mean_diff=sum(diffs) / n, ci=(lo, hi), worse=worse, better=better, worse_frac=worse / n,
        control_mean=sum(float(control[i]) for i in items) / n,
        treatment_mean=sum(float(treatment[i]) for i in items) / n, items=tuple(items),
    )


def percentile_interval(sorted_means: "np.ndarray", confidence: float) -> tuple[float, float]:
    """The percentile bootstrap interval from ``B`` sorted resample means: the order
    statistics ``B*a`` and ``B*(1-a) - 1`` (0-based, truncated), ``a = (1 - confidence) / 2``.

    Each end is an order statistic, never an interpolation: on the same resamples it sits
    next to ``scipy.stats.bootstrap(method="percentile")``'s end (numpy's interpolated
    percentile). scipy's default method is BCa and its random stream is not ours, so the two
    are compared on identical resamples only (tests/harness/test_stats_scipy.py)."""
    b = len(sorted_means)
    alpha = (1.0 - confidence) / 2.0
    lo = float(sorted_means[max(0, int(alpha * b))])
    hi = float(sorted_means[min(b - 1, int((1.0 - alpha) * b) - 1)])
    return lo, hi


def _bootstrap_means(diffs: Sequence[float], n_boot: int, seed: int) -> "np.ndarray":
    """Sorted means of ``n_boot`` resamples (with replacement) of ``diffs``.

    Item differences take few distinct values (scores are 0/1 or small averages), so a resample
    is drawn as multinomial counts over the distinct values: the same distribution as drawing
    items one by one, at a cost that does not grow with the number of items."""
    import numpy as np

    values, counts = np.unique(np.asarray(diffs, dtype=float), return_counts=True)
    n = len(diffs)
    draws = np.random.default_rng(int(seed) & (2**64 - 1)).multinomial(n, counts / n, size=n_boot)
    return np.sort(draws @ values / n)


def slope(xs: Sequence[float], ys: Sequence[float]) -> Optional[float]:
    """Least-squares slope of ys on xs; None with fewer than two distinct xs."""
    if len(xs) != len(ys) or len(xs) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def mean(values: Sequence[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


# --- Student's t, for intervals over a few replicate pairs ---------------------------------
# scipy's cephes routines (stdtr/stdtrit) replace a hand-written incomplete beta and a
# bisection quantile; tests/harness/test_stats_scipy.py pins them against scipy.stats.


def t_cdf(t: float, dof: float) -> float:
    """P(T <= t) for Student's t with ``dof`` degrees of freedom."""
    from scipy.special import stdtr

    return float(stdtr(dof, t))


def t_quantile(p: float, dof: float) -> float:
    """The ``p`` quantile of Student's t with ``dof`` degrees of freedom."""
    if not 0.0 < p < 1.0 or not dof >= 1:
        raise ValueError("t_quantile needs 0 < p < 1 and dof >= 1")
    from scipy.special import stdtrit

    return float(stdtrit(dof, p))


@attrs.frozen
class TInterval:
    n: int
    mean: float
    lo: float
    hi: float
    sd: float


def t_interval(xs: Sequence[float], confidence: float = 0.9) -> Optional[TInterval]:
    """Two-sided t-interval of the mean of ``xs`` (independent replicates); None below two.
    With zero spread it is the point itself."""
    import math

    n = len(xs)
    if n < 2:
        return None
    m = sum(xs) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    half = t_quantile(1.0 - (1.0 - confidence) / 2.0, n - 1) * sd / math.sqrt(n)
    return TInterval(n, m, m - half, m + half, sd)


def fisher_greater(a: int, b: int, c: int, d: int) -> float:
    """One-sided Fisher exact test on the 2x2 table [[a, b], [c, d]]: the probability, with the
    margins fixed, of a first-row count of at least ``a`` (row 1 has a higher rate of column 1
    than row 2). The hypergeometric tail, computed exactly."""
    if min(a, b, c, d) < 0:
        raise ValueError("fisher_greater: counts must be non-negative")
    row1, col1, n = a + b, a + c, a + b + c + d
    if n == 0 or row1 == 0:
        return 1.0
    total = math.comb(n, row1)
    hi = min(row1, col1)
    return min(1.0, sum(math.comb(col1, k) * math.comb(n - col1, row1 - k) for k in range(a, hi + 1)) / total)


def binomial_greater(k: int, n: int, p: float) -> float:
    """One-sided binomial test: P(X >= k) for X ~ Binomial(n, p), computed exactly."""
    if n <= 0 or k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    return min(1.0, sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1)))

"""Small statistics the harness decides with: paired item-level bootstrap, slopes, rates."""

from __future__ import annotations

import random
from typing import Mapping, Optional, Sequence

import attrs


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
    rng = random.Random(seed)
    means = []
    for _ in range(n_boot):
        s = 0.0
        for _ in range(n):
            s += diffs[rng.randrange(n)]
        means.append(s / n)
    means.sort()
    alpha = (1.0 - confidence) / 2.0
    lo = means[max(0, int(alpha * n_boot))]
    hi = means[min(n_boot - 1, int((1.0 - alpha) * n_boot) - 1)]
    worse = sum(1 for d in diffs if d < -worse_margin)
    better = sum(1 for d in diffs if d > worse_margin)
    return PairedBootstrap(
        n=n, mean_diff=sum(diffs) / n, ci=(lo, hi), worse=worse, better=better, worse_frac=worse / n,
        control_mean=sum(float(control[i]) for i in items) / n,
        treatment_mean=sum(float(treatment[i]) for i in items) / n, items=tuple(items),
    )


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

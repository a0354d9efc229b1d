"""Small statistics for small query sets: bootstrap intervals and a paired randomization test.

Both are vectorized with numpy and seeded, so a report is reproducible run to run.
"""

from __future__ import annotations

import itertools

import numpy as np

EXACT_UP_TO = 16  # queries; 2^16 sign patterns are enumerated exactly, more are sampled


def bootstrap_ci(values: np.ndarray, *, resamples: int = 2000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean; NaN values (left-out queries) are dropped."""
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return None
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


def paired_randomization_test(before: np.ndarray, after: np.ndarray, *, permutations: int = 10000,
                              seed: int = 0) -> float | None:
    """Two-sided p-value that the mean paired difference `after - before` is zero.

    Under the null each query's difference is as likely to have either sign. With up to
    `EXACT_UP_TO` queries every sign pattern is enumerated (an exact test); beyond that,
    `permutations` random patterns are drawn. Pairs with a NaN side are dropped.
    """
    a = np.asarray(before, dtype=np.float64)
    b = np.asarray(after, dtype=np.float64)
    keep = ~(np.isnan(a) | np.isnan(b))
    diff = (b - a)[keep]
    if diff.size == 0:
        return None
    observed = abs(diff.mean())
    if diff.size <= EXACT_UP_TO:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=diff.size)))
    else:
        rng = np.random.default_rng(seed)
        signs = rng.choice((1.0, -1.0), size=(permutations, diff.size))
    null = np.abs((signs * diff).mean(axis=1))
    # the tolerance keeps floating-point noise from splitting patterns that are exactly as extreme
    return float(np.mean(null >= observed - 1e-12))

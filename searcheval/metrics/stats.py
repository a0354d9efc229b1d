"""Small statistics for small query sets: bootstrap intervals and a paired randomization test.

Both are vectorized with numpy and seeded, so a report is reproducible run to run.

The paired randomization (sign-flip) test has one implementation, `sign_flip_pvalues`, used by the
gate (`paired_randomization_test`, one metric) and by replay's A/B (many metrics at once). Its
convention: two-sided, statistic |sum of differences| (the mean's, for a fixed number of pairs);
with at most `EXACT_UP_TO` pairs every sign pattern is enumerated and p = (patterns at least as
extreme) / 2^n, exact; beyond, `permutations` random patterns from `seed` give
p = (hits + 1) / (permutations + 1), which never reports 0 for a finite sample.
"""

from __future__ import annotations

import math

import numpy as np

from searcheval.errors import InputError

EXACT_UP_TO = 16  # pairs; 2^16 sign patterns are enumerated exactly, more are sampled
DEFAULT_PERMUTATIONS = 10_000


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


def sign_flip_pvalues(diffs: np.ndarray, *, permutations: int = DEFAULT_PERMUTATIONS,
                      seed: int = 0) -> np.ndarray:
    """Two-sided paired sign-flip p-value of each column of `diffs` (pairs x tests).

    See the module docstring for the convention. Random patterns are shared by all columns. A
    NaN difference counts as zero, which is the same as leaving the pair out (a zero is as
    extreme under either sign); a column of zeros (all ties) gets p = 1; no rows give NaN.
    """
    d = np.nan_to_num(np.asarray(diffs, dtype=np.float64).reshape(len(diffs), -1))
    n, m = d.shape
    if n == 0:
        return np.full(m, np.nan)
    total = d.sum(axis=0)
    observed = np.abs(total)
    # floating-point noise must not split patterns that are exactly as extreme
    tol = 1e-9 * (np.abs(d).sum(axis=0) + 1.0)
    hits = np.zeros(m, dtype=np.int64)
    if n <= EXACT_UP_TO:
        count = 2 ** n
        chunk = max(1, 2 ** 20 // n)
        for start in range(0, count, chunk):
            codes = np.arange(start, min(start + chunk, count))
            bits = ((codes[:, None] >> np.arange(n)) & 1).astype(np.float64)
            hits += (np.abs(2.0 * bits @ d - total) >= observed - tol).sum(axis=0)
        return hits / count
    if permutations < 1:
        raise InputError(f"expected at least 1 permutation, got {permutations}",
                         field="permutations")
    rng = np.random.default_rng(seed)
    chunk = max(1, min(permutations, 4_000_000 // n))
    done = 0
    while done < permutations:
        c = min(chunk, permutations - done)
        raw = rng.integers(0, 256, size=(c, (n + 7) // 8), dtype=np.uint8)
        bits = np.unpackbits(raw, axis=1, count=n).astype(np.float64)
        # sum of s_i d_i with s_i = 2 bit_i - 1
        hits += (np.abs(2.0 * bits @ d - total) >= observed - tol).sum(axis=0)
        done += c
    return (hits + 1) / (permutations + 1)


def paired_randomization_test(before: np.ndarray, after: np.ndarray, *,
                              permutations: int = DEFAULT_PERMUTATIONS,
                              seed: int = 0) -> float | None:
    """Two-sided p-value that the mean paired difference `after - before` is zero.

    Under the null each query's difference is as likely to have either sign (see the module
    docstring for exact vs sampled). Pairs with a NaN side are dropped; None when none is left.
    """
    a = np.asarray(before, dtype=np.float64)
    b = np.asarray(after, dtype=np.float64)
    keep = ~(np.isnan(a) | np.isnan(b))
    diff = (b - a)[keep]
    if diff.size == 0:
        return None
    return float(sign_flip_pvalues(diff[:, None], permutations=permutations, seed=seed)[0])


# --------------------------------------------------------------------------- small query sets


def smallest_p(changed: int) -> float:
    """The smallest two-sided p a paired sign-flip test can reach with `changed` non-zero
    differences: only the observed signs and their mirror image are as extreme, 2 of 2^n."""
    return 1.0 if changed <= 0 else min(1.0, 2.0 / 2.0 ** changed)


def _z(level: float, power: float) -> float:
    from statistics import NormalDist

    normal = NormalDist()
    return normal.inv_cdf(1.0 - level / 2.0) + normal.inv_cdf(power)


def min_detectable_effect(sd: float, n: int, *, level: float = 0.05,
                          power: float = 0.8) -> float | None:
    """The smallest mean paired difference a two-sided test at `level` detects with `power`
    over `n` queries whose per-query differences spread with standard deviation `sd` (normal
    approximation: (z_{1-level/2} + z_power) * sd / sqrt(n)). None without queries."""
    if n < 1 or sd is None:
        return None
    return _z(level, power) * sd / math.sqrt(n)


def queries_needed(sd: float, effect: float, *, level: float = 0.05,
                   power: float = 0.8) -> int | None:
    """Queries needed to detect a mean paired difference of `effect` (topic-set-size design,
    normal approximation): ceil(((z_{1-level/2} + z_power) * sd / effect)^2), and never fewer than
    a sign-flip test needs to reach `level` at all. None for an effect of 0."""
    if effect is None or effect <= 0 or sd is None:
        return None
    n = math.ceil((_z(level, power) * sd / effect) ** 2)
    return max(n, math.ceil(math.log2(2.0 / level)))


def pooled_sd(differences: list[np.ndarray]) -> tuple[float | None, int]:
    """Pooled standard deviation of several sets of paired per-query differences (each set: one
    pair of runs or configurations); sets without variation (identical runs) say nothing about
    the spread of a real change and are left out. Returns (sd, sets used)."""
    variances, weights = [], []
    for d in differences:
        d = np.asarray(d, dtype=np.float64)
        d = d[~np.isnan(d)]
        if d.size < 2 or not np.any(d != 0):
            continue
        variances.append(float(np.var(d, ddof=1)))
        weights.append(d.size - 1)
    if not variances:
        return None, 0
    return math.sqrt(float(np.average(variances, weights=weights))), len(variances)

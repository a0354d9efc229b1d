"""The golden queries split into a tuning part and a held-out part, before the first trial.

Stratified by category: within each category (a query without one is in the category ""), the
query ids are sorted, shuffled by a generator seeded with `seed` and the category's name, and the
first round(share * n) go to the held-out part, keeping at least one query on each side of a
category of two or more. The same queries, share and seed always give the same split.

A paired sign-flip test over n held-out queries cannot reach p <= level unless
2 / 2^n <= level (n >= 6 at 0.05): fewer held-out queries than that are refused; fewer than the
minimum detectable effect needs for the smallest effect worth finding are warned, with the
number it needs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from searcheval.defaults import POWER, SIGNIFICANCE_LEVEL
from searcheval.errors import InputError
from searcheval.metrics.stats import queries_needed
from searcheval.types import Query


@dataclass(frozen=True)
class Split:
    tuning: tuple[str, ...]
    held_out: tuple[str, ...]
    share: float
    seed: int

    def to_dict(self) -> dict:
        return {"tuning": list(self.tuning), "held_out": list(self.held_out),
                "share": self.share, "seed": self.seed}


def split_queries(queries: Sequence[Query], share: float, seed: int = 0) -> Split:
    if isinstance(share, bool) or not isinstance(share, (int, float)) \
            or not 0.0 < float(share) < 1.0:
        raise InputError(f"expected a held-out share in (0, 1), got {share!r}", field="held_out")
    by_category: dict[str, list[str]] = {}
    for q in queries:
        by_category.setdefault(q.category or "", []).append(q.id)
    tuning, held = [], []
    for category in sorted(by_category):
        ids = sorted(by_category[category])
        random.Random(f"{seed}/{category}").shuffle(ids)
        n = len(ids)
        k = int(math.floor(share * n + 0.5))
        if n >= 2:
            k = min(max(k, 1), n - 1)
        held += ids[:k]
        tuning += ids[k:]
    order = {q.id: i for i, q in enumerate(queries)}
    return Split(tuple(sorted(tuning, key=order.get)), tuple(sorted(held, key=order.get)),
                 float(share), int(seed))


def smallest_testable(level: float = SIGNIFICANCE_LEVEL) -> int:
    """The fewest pairs a two-sided sign-flip test needs to reach `level` at all."""
    return math.ceil(math.log2(2.0 / level))


def check_held_out(split: Split, *, sd: float | None, effect: float,
                   level: float = SIGNIFICANCE_LEVEL, power: float = POWER) -> str | None:
    """Refuses a held-out part too small to test anything; returns a warning when it is smaller
    than the minimum detectable effect needs for `effect` (None when it is enough)."""
    n = len(split.held_out)
    floor = smallest_testable(level)
    if n < floor:
        raise InputError(f"the split leaves {n} held-out queries; a paired test needs at least "
                         f"{floor} to reach p <= {level:g} at all (raise the held-out share or "
                         "add queries)", field="held_out")
    needed = queries_needed(sd, effect, level=level, power=power) if sd else None
    if needed is not None and n < needed:
        return (f"the held-out part has {n} queries; detecting a difference of {effect:g} with "
                f"{power:.0%} power at level {level:g} needs {needed} (spread of per-query "
                f"differences sd {sd:.3f}): a real improvement of that size may be called no "
                "difference")
    return None

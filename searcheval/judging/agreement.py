"""Agreement between judges, on the pairs two or more judges graded (each judge's latest fresh
grade):

- Cohen's kappa with quadratic weights per pair of judges, over the items both graded
  (scikit-learn's `cohen_kappa_score(..., weights="quadratic")`);
- Krippendorff's alpha, ordinal, over all judges at once (the `krippendorff` package), which
  allows any judge to miss any item;

both overall and per query category, and the items the judges disagree on most (widest range
of grades, then the largest variance). A statistic that is undefined (fewer than two items, or
every grade the same, so that no disagreement is even possible) is None, never a number.
"""

from __future__ import annotations

import math
import warnings
from itertools import combinations

import numpy as np

from searcheval.defaults import AGREEMENT_FLOOR, DISAGREEMENTS
from searcheval.errors import InputError


def _defined(value: float) -> float | None:
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


def check_floor(floor: object) -> float:
    """An agreement floor is a number in [-1, 1] (alpha and kappa range up to 1)."""
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or math.isnan(floor) \
            or not -1.0 <= floor <= 1.0:
        raise InputError(f"expected an agreement floor in [-1, 1], got {floor!r}",
                         field="agreement_floor")
    return float(floor)


def weighted_kappa(a: list[int], b: list[int], labels: list[int]) -> float | None:
    """Cohen's kappa of two judges' grades of the same items, quadratic weights."""
    if len(a) < 2:
        return None
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined (one label) -> nan, reported as None
        return _defined(cohen_kappa_score(a, b, weights="quadratic", labels=labels))


def ordinal_alpha(matrix: np.ndarray, labels: list[int]) -> float | None:
    """Krippendorff's alpha, ordinal, of a judges x items matrix (NaN: not graded)."""
    if matrix.size == 0 or matrix.shape[0] < 2:
        return None
    pairable = (~np.isnan(matrix)).sum(axis=0) >= 2
    if pairable.sum() < 1:
        return None
    values = matrix[:, pairable]
    if len(np.unique(values[~np.isnan(values)])) < 2:
        return None  # every grade the same: no disagreement is possible, alpha is 0/0
    import krippendorff

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _defined(krippendorff.alpha(reliability_data=values,
                                           level_of_measurement="ordinal",
                                           value_domain=labels))


def pair_stats(items: dict[tuple[str, str], dict[str, int]], labels: list[int]) -> dict:
    """Alpha over all judges and kappa per pair of judges, of {(query, doc): {judge: grade}}."""
    judges = sorted({j for grades in items.values() for j in grades})
    keys = sorted(items)
    matrix = np.full((len(judges), len(keys)), np.nan)
    for col, key in enumerate(keys):
        for judge, grade in items[key].items():
            matrix[judges.index(judge), col] = grade
    kappas = []
    for a, b in combinations(judges, 2):
        common = [k for k in keys if a in items[k] and b in items[k]]
        kappas.append({"judges": [a, b], "items": len(common),
                       "kappa": weighted_kappa([items[k][a] for k in common],
                                               [items[k][b] for k in common], labels)})
    return {"items": len(keys), "judges": judges, "alpha": ordinal_alpha(matrix, labels),
            "kappa": kappas}


def agreement(latest: dict[tuple[str, str], dict[str, int]], categories: dict[str, str],
              grade_scale: tuple[int, int], *, floor: float = AGREEMENT_FLOOR,
              disagreements: int = DISAGREEMENTS) -> dict:
    """metrics.json's `judging.agreement` block from {(query, doc): {judge: grade}}.

    `below_floor` is True only when alpha is defined and below `floor`: with no item graded by
    two judges there is nothing to measure, which the block says (`items` 0), not an alert."""
    labels = list(range(int(grade_scale[0]), int(grade_scale[1]) + 1))
    multi = {pair: grades for pair, grades in latest.items() if len(grades) >= 2}
    overall = pair_stats(multi, labels)
    by_category = {}
    for category in sorted({categories.get(q, "unclassified") for q, _ in multi}):
        subset = {p: g for p, g in multi.items() if categories.get(p[0], "unclassified") == category}
        stats = pair_stats(subset, labels)
        by_category[category] = {"items": stats["items"], "alpha": stats["alpha"]}
    ranked = sorted(multi.items(), key=lambda kv: (-(max(kv[1].values()) - min(kv[1].values())),
                                                   -float(np.var(list(kv[1].values()))), kv[0]))
    worst = [{"query_id": q, "doc_id": d, "grades": dict(sorted(g.items())),
              "range": max(g.values()) - min(g.values())}
             for (q, d), g in ranked[:disagreements] if max(g.values()) > min(g.values())]
    alpha = overall["alpha"]
    return {**overall, "by_category": by_category, "disagreements": worst, "floor": floor,
            "below_floor": alpha is not None and alpha < floor}

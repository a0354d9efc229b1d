"""The human audit of a model judge: which of its grades humans re-grade, and how well the two agree.

- `audit_sample`: a stratified random sample of a judge's graded pairs, strata = (the model's grade,
  the query's category). The sample's size is max(`minimum`, ceil(`share` x graded pairs)), at most
  every pair; it is spread over the strata in proportion to their size (largest remainders), each
  stratum that has pairs gets at least one while the size allows, and the pairs of a stratum are
  drawn with `random.Random(seed)` from their sorted order, so one seed gives one sample. Pairs a
  human already graded are audited already: they are counted first, and the draw tops them up.
  The sample is queued on the rating page as a pool (`audit:<judge>`): the page shows a human
  their own grade only, never the model's.
- `model_agreement`: the model's latest grade of each audited pair against the humans' grade of it
  (the median of the humans' latest grades, the lower middle one when their number is even, as the
  effective-grade rule takes it): quadratic weighted kappa (scikit-learn), Krippendorff's alpha,
  ordinal (`krippendorff`), both with percentile bootstrap intervals over the audited pairs
  (seeded), per query category, and the confusion matrix (rows: the humans' grade, columns: the
  model's).
- `judge_audits`: every model judge of a set of judgment rows, its agreement and its standing
  (`counting.source_standing`: whether its grades count).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Mapping

import numpy as np

from searcheval.judging.agreement import ordinal_alpha, weighted_kappa
from searcheval.judging.counting import source_standing
from searcheval.judging.judges import AuditPolicy
from searcheval.judging.judgments import JudgmentRow, latest_by_judge

Pair = tuple[str, str]
BOOTSTRAP = 1000


def audit_sample(model_grades: Mapping[Pair, int], categories: Mapping[str, str],
                 policy: AuditPolicy, audited: set[Pair] = frozenset()) -> list[Pair]:
    """The pairs humans should grade for this judge's audit (module docstring), in a seeded random
    order; pairs already `audited` are part of the sample and are not returned again."""
    pairs = sorted(model_grades)
    if not pairs:
        return []
    size = min(len(pairs), max(policy.minimum, math.ceil(policy.share * len(pairs))))
    strata: dict[tuple, list[Pair]] = defaultdict(list)
    for pair in pairs:
        strata[(model_grades[pair], categories.get(pair[0], "unclassified"))].append(pair)
    keys = sorted(strata, key=lambda k: (k[0], str(k[1])))
    # proportional allocation, at least one per stratum while the size allows
    quota = {k: size * len(strata[k]) / len(pairs) for k in keys}
    alloc = {k: min(len(strata[k]), int(quota[k])) for k in keys}
    for k in sorted(keys, key=lambda k: -len(strata[k])):
        if alloc[k] == 0 and sum(alloc.values()) < size:
            alloc[k] = 1
    for k in sorted(keys, key=lambda k: -(quota[k] - int(quota[k]))):
        if sum(alloc.values()) >= size:
            break
        if alloc[k] < len(strata[k]):
            alloc[k] += 1
    while sum(alloc.values()) < size:  # small strata full: the rest from the largest ones
        k = max((k for k in keys if alloc[k] < len(strata[k])), key=lambda k: len(strata[k]))
        alloc[k] += 1
    rng = random.Random(policy.seed)
    chosen: list[Pair] = []
    for k in keys:
        members = strata[k]
        done = [p for p in members if p in audited]
        rest = [p for p in members if p not in audited]
        rng.shuffle(rest)
        chosen.extend(rest[:max(0, alloc[k] - len(done))])
    rng.shuffle(chosen)
    return chosen


def consensus(grades: Mapping[str, int]) -> int:
    values = sorted(grades.values())
    return values[(len(values) - 1) // 2]


def _stats(model: list[int], human: list[int], labels: list[int]) -> tuple:
    matrix = np.array([model, human], dtype=float)
    return weighted_kappa(human, model, labels), ordinal_alpha(matrix, labels)


def _interval(values: list[float | None]) -> list[float] | None:
    defined = [v for v in values if v is not None]
    if len(defined) < 10:
        return None
    return [float(np.percentile(defined, 2.5)), float(np.percentile(defined, 97.5))]


def model_agreement(model: Mapping[Pair, int], humans: Mapping[Pair, Mapping[str, int]],
                    categories: Mapping[str, str], grade_scale: tuple[int, int], *,
                    bootstrap: int = BOOTSTRAP, seed: int = 0) -> dict:
    """The model's grades against the humans' on the pairs both graded (module docstring)."""
    labels = list(range(int(grade_scale[0]), int(grade_scale[1]) + 1))
    pairs = sorted(p for p in model if humans.get(p))
    m = [model[p] for p in pairs]
    h = [consensus(humans[p]) for p in pairs]
    kappa, alpha = _stats(m, h, labels) if pairs else (None, None)
    intervals = {"kappa": None, "alpha": None}
    if bootstrap and len(pairs) >= 2:
        rng = np.random.default_rng(seed)
        ks, alphas = [], []
        idx_all = np.arange(len(pairs))
        for _ in range(bootstrap):
            idx = rng.choice(idx_all, size=len(pairs), replace=True)
            k, a = _stats([m[i] for i in idx], [h[i] for i in idx], labels)
            ks.append(k)
            alphas.append(a)
        intervals = {"kappa": _interval(ks), "alpha": _interval(alphas)}
    confusion = [[0] * len(labels) for _ in labels]
    for mg, hg in zip(m, h):
        if mg in labels and hg in labels:
            confusion[labels.index(hg)][labels.index(mg)] += 1
    by_category = {}
    for category in sorted({categories.get(q, "unclassified") for q, _ in pairs}):
        sub = [i for i, p in enumerate(pairs) if categories.get(p[0], "unclassified") == category]
        k, a = _stats([m[i] for i in sub], [h[i] for i in sub], labels)
        by_category[category] = {"items": len(sub), "kappa": k, "alpha": a}
    exact = sum(1 for a, b in zip(m, h) if a == b)
    return {"items": len(pairs), "kappa": kappa, "alpha": alpha,
            "kappa_interval": intervals["kappa"], "alpha_interval": intervals["alpha"],
            "exact_share": exact / len(pairs) if pairs else None,
            "labels": labels, "confusion": confusion, "confusion_rows": "human grade",
            "confusion_columns": "model grade", "by_category": by_category}


def split_rows(rows: list[JudgmentRow], reference: tuple[str, ...] = ("human",)
               ) -> tuple[dict[str, dict[Pair, int]], dict[Pair, dict[str, int]]]:
    """({model judge: {pair: its latest grade}}, {pair: {reference judge: latest grade}})."""
    models: dict[str, dict[Pair, int]] = defaultdict(dict)
    humans: dict[Pair, dict[str, int]] = defaultdict(dict)
    for pair, by_judge in latest_by_judge(rows).items():
        for judge, row in by_judge.items():
            if row.source == "model":
                models[judge][pair] = row.grade
            elif row.source in reference:
                humans[pair][judge] = row.grade
    return dict(models), dict(humans)


def judge_audits(rows: list[JudgmentRow], categories: Mapping[str, str],
                 grade_scale: tuple[int, int], policies: Mapping[str, AuditPolicy] | None = None,
                 *, bootstrap: int = 0, reference: tuple[str, ...] = ("human",)) -> dict:
    """{model judge: {graded, agreement, policy, counts, reason}} of the model judges in `rows`."""
    policies = policies or {}
    models, humans = split_rows(rows, reference)
    out = {}
    for judge, grades in sorted(models.items()):
        policy = policies.get(judge) or AuditPolicy()
        a = model_agreement(grades, humans, categories, grade_scale, bootstrap=bootstrap,
                            seed=policy.seed)
        standing = source_standing("model", a, minimum=policy.minimum, floor=policy.floor)
        out[judge] = {"graded": len(grades), "agreement": a, "policy": policy.to_dict(),
                      "counts": standing.counts, "reason": standing.reason}
    return out

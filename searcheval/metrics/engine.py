"""The metric engine: nDCG@k, MRR(@k), Recall@k, Precision@k, MAP(@k), judged@k, R-precision,
Success@k, bpref, ERR@k, RBP and its residual, abstention. Names: `searcheval.metrics.names`.

Conventions (DESIGN.md, "Metric conventions"):

- Ranks come from scores, descending; ties are broken by document id, descending (trec_eval's order).
- nDCG@k: DCG = sum_{i=1..k} gain(grade_i) / log2(i + 1). The ideal ranking is every judged document
  with grade > 0, sorted by grade, cut at k. Gain is 2^g - 1 (`exponential`, the default) or g
  (`linear`, trec_eval).
- Binary metrics (MRR, Precision, Recall, MAP) call a document relevant when grade >= relevance_level.
- MRR: 1 / rank of the first relevant result, 0 if none; MRR@k counts only the top k.
- Recall@k: relevant in the top k / all relevant judged. Precision@k: relevant in the top k / k.
- MAP: sum of precision at the rank of each relevant retrieved document / all relevant judged; MAP@k
  counts only relevant documents in the top k (trec_eval's map_cut).
- judged@k: share of the top min(k, returned) results that carry any judgment (grade 0 included);
  an empty ranking has nothing unjudged and scores 1.
- R-precision: relevant in the top R / R, where R is the number of relevant judged (0 if R = 0).
- Success@k: 1 if any relevant document is in the top k, else 0.
- bpref (trec_eval's): (1/R) sum over the relevant retrieved documents r of
  1 - min(n_r, R) / min(N, R), where n_r counts the judged nonrelevant documents (grade <
  relevance_level) ranked above r and N all judged nonrelevant; unjudged documents are skipped.
- ERR@k (Chapelle et al., as gdeval and ir_measures): sum_{i<=k} R_i / i * prod_{j<i} (1 - R_j),
  R = (2^g - 1) / 2^4 (gdeval's fixed top grade 4); unjudged documents have R = 0.
- RBP (Moffat and Zobel, binary at relevance_level): (1 - p) sum_i rel_i p^(i-1), p = 0.8 unless
  named (`rbp(p=0.5)`). rbp_residual: what RBP could still gain if every unjudged document in the
  ranking and every document after its end were relevant: (1 - p) sum_{i unjudged} p^(i-1) + p^n
  for a ranking of n, i.e. 1 - (1 - p) sum_{i judged} p^(i-1).
- abstention: only for queries with no relevant judgment: 1 if nothing was returned, else 0; the
  other queries are left out of its mean.
- A query with no relevant judgment gets nDCG and Recall by policy: `one` (the seed methodology's
  "nothing to get wrong", default), `zero` (trec_eval), or `skip` (left out of the mean). MRR, P,
  MAP, R-precision, Success, bpref, ERR and RBP are 0 for it.
- Which queries (`complete`): False, as trec_eval: the queries both judged and in the run; True, as
  trec_eval -c: every judged query, a query missing from the run scoring 0 on every metric; None
  (the library's default, kept for the nightly): every judged query, a missing one an empty
  ranking, or with `trec_compat` the queries both judged and in the run. With `trec_compat` (linear
  gain, policy `zero`) every per-query number equals pytrec_eval's.

Evaluation is vectorized: the run becomes a padded score matrix (queries x depth) and the judgments a
padded matrix (queries x judged docs); the rank of every judged document is counted with numpy in
one pass, and each metric is a few array operations over all queries. Only queries where a judged
document shares its score with another document fall back to Python for the tie-break.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Iterable, Literal, Mapping, Sequence

import numpy as np

from searcheval.defaults import (ERR_MAX_GRADE, GAIN, NO_RELEVANT, RBP_PERSISTENCE,
                                 RELEVANCE_LEVEL, SCORE_METRICS)
from searcheval.errors import InputError
from searcheval.metrics.names import Metric, parse_metric, parse_metrics

Gain = Literal["exponential", "linear"]
Policy = Literal["one", "zero", "skip"]

# the name table (searcheval's, ir_measures' and trec_eval's names) lives in metrics/names.py
__all__ = ["Metric", "parse_metric", "parse_metrics", "Settings", "Evaluation", "evaluate"]


@dataclass(frozen=True)
class Settings:
    gain: Gain = GAIN
    relevance_level: int = RELEVANCE_LEVEL
    no_relevant: Policy = NO_RELEVANT
    trec_compat: bool = False

    def __post_init__(self) -> None:
        if self.gain not in ("exponential", "linear"):
            raise InputError(f"expected gain exponential or linear, got {self.gain!r}", field="gain")
        if self.no_relevant not in ("one", "zero", "skip"):
            raise InputError(f"expected no-relevant policy one, zero or skip, got "
                             f"{self.no_relevant!r}", field="no_relevant")
        if self.relevance_level < 1:
            raise InputError("the relevance level must be >= 1", field="relevance_level")

    @property
    def effective_gain(self) -> Gain:
        return "linear" if self.trec_compat else self.gain

    @property
    def effective_policy(self) -> Policy:
        return "zero" if self.trec_compat else self.no_relevant


@dataclass
class Evaluation:
    """Per-query values (NaN = left out of the mean) and their means, for a list of metrics."""

    query_ids: list[str]
    values: dict[str, np.ndarray]
    missed: int = 0  # judged queries the run did not answer (left out unless complete)
    unjudged: int = 0  # queries of the run without any judgment (never averaged)

    @property
    def means(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for name, arr in self.values.items():
            kept = arr[~np.isnan(arr)]
            out[name] = float(kept.mean()) if kept.size else None
        return out

    def per_query(self) -> dict[str, dict[str, float | None]]:
        columns = {name: arr.tolist() for name, arr in self.values.items()}
        return {
            qid: {name: (None if math.isnan(col[i]) else col[i]) for name, col in columns.items()}
            for i, qid in enumerate(self.query_ids)
        }

    def to_dict(self) -> dict:
        """The `searcheval score --format json` shape."""
        return {"queries": len(self.query_ids), "counts": self.counts, "means": self.means,
                "per_query": self.per_query()}

    @property
    def counts(self) -> dict[str, int]:
        """How many queries were averaged, how many judged queries the run missed, how many run
        queries had no judgments."""
        return {"averaged": len(self.query_ids), "judged_missing_from_run": self.missed,
                "run_not_judged": self.unjudged}

    def to_dataframe(self):
        """A pandas DataFrame: one row per query (index `query_id`), one column per metric; NaN
        where a query is left out of a metric's mean."""
        import pandas as pd

        frame = pd.DataFrame({name: arr for name, arr in self.values.items()},
                             index=pd.Index(self.query_ids, name="query_id"))
        return frame


# --------------------------------------------------------------------------- evaluation


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    metrics: str | Iterable[str] | Sequence[Metric] = SCORE_METRICS,
    settings: Settings = Settings(),
    *,
    query_ids: Sequence[str] | None = None,
    complete: bool | None = None,
) -> Evaluation:
    """Score `run` against `qrels` on `query_ids`, or on the queries `complete` chooses (see the
    module docstring)."""
    specs = parse_metrics(metrics) if isinstance(metrics, str) else \
        [m if isinstance(m, Metric) else parse_metric(m) for m in metrics]
    missed = sum(1 for q in qrels if q not in run)
    unjudged = sum(1 for q in run if q not in qrels)
    if query_ids is None:
        if complete or (complete is None and not settings.trec_compat):
            query_ids = list(qrels)
        else:
            query_ids = [q for q in qrels if q in run]
    qids = list(query_ids)
    ranked = _Ranked.build(qids, qrels, run)
    values = compute(specs, ranked, settings)
    if complete:
        absent = np.fromiter((q not in run for q in qids), dtype=bool, count=len(qids))
        for arr in values.values():
            arr[absent & ~np.isnan(arr)] = 0.0
    return Evaluation(query_ids=qids, values=values, missed=missed, unjudged=unjudged)


def compute(specs: Sequence[Metric], ranked: "_Ranked", settings: Settings) -> dict[str, np.ndarray]:
    """Every metric of `specs` over the queries of `ranked`."""
    gain, policy, level = settings.effective_gain, settings.effective_policy, \
        settings.relevance_level
    return {spec.name: _compute(spec, ranked, gain, policy, level) for spec in specs}


@dataclass
class _Ranked:
    """Judged documents of every query with their 0-based rank in that query's ranking."""

    grades: np.ndarray  # (Q, R) int, padded with 0
    judged: np.ndarray  # (Q, R) bool: a real judgment (not padding)
    ranks: np.ndarray  # (Q, R) float: 0-based rank, inf when not retrieved or padding
    returned: np.ndarray  # (Q,) number of documents returned

    @classmethod
    def build(cls, qids: list[str], qrels: Mapping, run: Mapping) -> "_Ranked":
        empty: dict = {}
        runs = [run.get(q) or empty for q in qids]
        judg = [qrels.get(q) or empty for q in qids]
        n_q = len(qids)
        returned = np.fromiter(map(len, runs), dtype=np.int64, count=n_q)
        n_judged = np.fromiter(map(len, judg), dtype=np.int64, count=n_q)
        depth = int(returned.max()) if n_q else 0
        width = max(int(n_judged.max()) if n_q else 0, 1)

        scores = _padded(np.fromiter(chain.from_iterable(r.values() for r in runs),
                                     dtype=np.float64, count=int(returned.sum())),
                         returned, max(depth, 1), -np.inf)
        judged = np.arange(width) < n_judged[:, None]
        total = int(n_judged.sum())
        grades = _padded(np.fromiter(chain.from_iterable(j.values() for j in judg),
                                     dtype=np.int64, count=total), n_judged, width, 0)
        jscores = _padded(np.fromiter(
            chain.from_iterable(map(r.get, j, repeat(math.nan)) for r, j in zip(runs, judg)),
            dtype=np.float64, count=total), n_judged, width, np.nan)

        # Count, for every judged score, the scores above it and equal to it in its query's row,
        # by a binary search over each row sorted ascending (all rows step together).
        rows = np.sort(scores, axis=1)
        retrieved = ~np.isnan(jscores)
        target = np.where(retrieved, jscores, np.inf)
        at_most = _count_at_most(rows, target)
        ranks = np.where(retrieved, rows.shape[1] - at_most, np.inf).astype(np.float64)
        # The judged doc itself sits at at_most - 1; a tie exists when the value before it is equal.
        flat = rows.ravel()
        before = np.arange(n_q)[:, None] * rows.shape[1] + np.maximum(at_most - 2, 0)
        tied = retrieved & (at_most >= 2) & (flat[before] == target)
        # Tie-break by doc id, descending, only where a judged doc shares its score.
        for q, j in zip(*np.nonzero(tied)):
            doc = list(judg[q])[j]
            score = runs[q][doc]
            ranks[q, j] += sum(1 for d, v in runs[q].items() if v == score and d > doc)
        return cls(grades=grades, judged=judged, ranks=ranks, returned=returned)


def _padded(flat: np.ndarray, lengths: np.ndarray, width: int, fill) -> np.ndarray:
    """Rows of `lengths` values taken in order from `flat`, padded with `fill` to `width`."""
    if flat.size == lengths.size * width:  # every row full: no padding to place
        return flat.reshape(lengths.size, width)
    out = np.full((lengths.size, width), fill, dtype=flat.dtype)
    out[np.arange(width) < lengths[:, None]] = flat
    return out


def _count_at_most(rows: np.ndarray, target: np.ndarray) -> np.ndarray:
    """For each target[q, j], how many of rows[q] (sorted ascending) are <= it.

    A branchless binary search that every (q, j) takes in step: log2(depth) rounds of one gather.
    """
    width = rows.shape[1]
    flat = rows.ravel()
    base = np.broadcast_to(np.arange(rows.shape[0])[:, None] * width, target.shape).copy()
    start = base.copy()
    n = width
    while n > 1:
        half = n // 2
        base = np.where(flat[base + half] <= target, base + half, base)
        n -= half
    return base - start + (flat[base] <= target)


def _gain(grades: np.ndarray, gain: Gain) -> np.ndarray:
    g = np.maximum(grades, 0).astype(np.float64)
    return np.exp2(g) - 1.0 if gain == "exponential" else g


def _compute(spec: Metric, r: _Ranked, gain: Gain, policy: Policy, level: int) -> np.ndarray:
    relevant = r.judged & (r.grades >= level)
    num_rel = relevant.sum(axis=1)
    no_rel = num_rel == 0
    k = spec.k
    in_k = r.ranks < k if k is not None else np.isfinite(r.ranks)

    if spec.kind == "ndcg":
        gains = np.where(r.judged & (r.grades > 0), _gain(r.grades, gain), 0.0)
        discount = 1.0 / np.log2(r.ranks + 2.0)  # inf ranks give 0
        dcg = (gains * np.where(in_k, discount, 0.0)).sum(axis=1)
        ideal = -np.sort(-gains, axis=1)[:, :k]
        idcg = (ideal / np.log2(np.arange(ideal.shape[1]) + 2.0)).sum(axis=1)
        no_gain = idcg == 0
        value = np.divide(dcg, idcg, out=np.zeros_like(dcg), where=~no_gain)
        return _apply_policy(value, no_gain, policy)
    if spec.kind == "recall":
        found = (relevant & in_k).sum(axis=1)
        value = np.divide(found, num_rel, out=np.zeros(len(found)), where=~no_rel)
        return _apply_policy(value, no_rel, policy)
    if spec.kind == "precision":
        return (relevant & in_k).sum(axis=1) / float(k)
    if spec.kind == "mrr":
        first = np.where(relevant & in_k, r.ranks, np.inf).min(axis=1, initial=np.inf)
        return np.where(np.isfinite(first), 1.0 / (first + 1.0), 0.0)
    if spec.kind == "map":
        rel_ranks = np.sort(np.where(relevant & in_k, r.ranks, np.inf), axis=1)
        hits = np.arange(1, rel_ranks.shape[1] + 1, dtype=np.float64)
        precision = np.where(np.isfinite(rel_ranks), hits / (rel_ranks + 1.0), 0.0).sum(axis=1)
        return np.divide(precision, num_rel, out=np.zeros(len(precision)), where=~no_rel)
    if spec.kind == "judged":
        shown = np.minimum(r.returned, k)
        judged_top = (r.judged & in_k).sum(axis=1)
        return np.divide(judged_top, shown, out=np.ones(len(shown)), where=shown > 0)
    if spec.kind == "abstention":
        return np.where(no_rel, (r.returned == 0).astype(np.float64), np.nan)
    if spec.kind == "rprec":
        found = (relevant & (r.ranks < num_rel[:, None])).sum(axis=1)
        return np.divide(found, num_rel, out=np.zeros(len(found)), where=~no_rel)
    if spec.kind == "success":
        return (relevant & in_k).any(axis=1).astype(np.float64)
    if spec.kind == "bpref":
        return _bpref(r, relevant, num_rel)
    if spec.kind == "err":
        return _err(r, k)
    if spec.kind in ("rbp", "rbp_residual"):
        p = spec.p if spec.p is not None else RBP_PERSISTENCE
        weight = np.where(np.isfinite(r.ranks), (1.0 - p) * np.power(p, np.where(
            np.isfinite(r.ranks), r.ranks, 0.0)), 0.0)
        if spec.kind == "rbp":
            return np.where(relevant, weight, 0.0).sum(axis=1)
        return 1.0 - np.where(r.judged, weight, 0.0).sum(axis=1)
    raise InputError(f"unknown metric {spec.name!r}", field="metrics")  # parse_metric prevents this


def _in_rank_order(r: _Ranked) -> tuple[np.ndarray, np.ndarray]:
    """Column order of each row by rank (retrieved judged documents first, best first)."""
    order = np.argsort(r.ranks, axis=1, kind="stable")
    return order, np.take_along_axis(r.ranks, order, axis=1)


def _bpref(r: _Ranked, relevant: np.ndarray, num_rel: np.ndarray) -> np.ndarray:
    nonrel = r.judged & ~relevant
    num_nonrel = nonrel.sum(axis=1)
    order, ranks = _in_rank_order(r)
    retrieved = np.isfinite(ranks)
    rel = np.take_along_axis(relevant, order, axis=1) & retrieved
    non = np.take_along_axis(nonrel, order, axis=1) & retrieved
    above = np.cumsum(non, axis=1) - non  # judged nonrelevant ranked above each column
    cap = np.minimum(num_nonrel, num_rel)[:, None].astype(np.float64)
    share = np.divide(np.minimum(above, num_rel[:, None]), cap, out=np.zeros(above.shape),
                      where=cap > 0)
    total = np.where(rel, 1.0 - np.where(above > 0, share, 0.0), 0.0).sum(axis=1)
    return np.divide(total, num_rel, out=np.zeros(len(total)), where=num_rel > 0)


def _err(r: _Ranked, k: int) -> np.ndarray:
    order, ranks = _in_rank_order(r)
    grades = np.take_along_axis(np.where(r.judged, r.grades, 0), order, axis=1)
    stop = np.where(ranks < k, (np.exp2(np.clip(grades, 0, ERR_MAX_GRADE)) - 1.0) / 2.0 ** ERR_MAX_GRADE, 0.0)
    # reach[i] = prod_{j<i} (1 - stop_j): the chance the user gets to the i-th judged document
    reach = np.concatenate([np.ones((stop.shape[0], 1)), np.cumprod(1.0 - stop, axis=1)[:, :-1]],
                           axis=1)
    return (stop * reach / np.where(np.isfinite(ranks), ranks + 1.0, 1.0)).sum(axis=1)


def _apply_policy(value: np.ndarray, undefined: np.ndarray, policy: Policy) -> np.ndarray:
    fill = {"one": 1.0, "zero": 0.0, "skip": np.nan}[policy]
    return np.where(undefined, fill, value)


def ranking(run_for_query: Mapping[str, float]) -> list[str]:
    """Document ids in rank order: score descending, then id descending (trec_eval's order)."""
    return [d for d, _ in sorted(run_for_query.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]

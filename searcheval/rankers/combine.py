"""The `fuse` kind: any configurations combined, whatever their kind (bm25, dense, fused, http,
python, trec, a plug-in's).

    hybrid:
      kind: fuse
      params:
        runs: [bm25, engine_v2, dense]     # the configurations it combines (any kind)
        method: combsum                    # rrf | combsum | combmnz
        normalisation: min-max             # none | min-max | z-score (combsum, combmnz)
        weights: {bm25: 0.3, dense: 0.7}   # a run not named weighs 1
        rrf_k: 60                          # rrf's rank offset

Why a new kind beside `fused`: `fused` is what the seed's production serves, a lexical and a
dense list with hard filters, a settlement prior and abstention; its parameters and hashes stay
as they are. `fuse` is plain score and rank fusion of any number of lists, so it can combine an
`http` engine with a `trec` file, and its weights are what `searcheval tune` searches.

For one query, each list is put best first (score descending, ties by id descending; a document
listed twice keeps its best entry), rank from 1. With weight w_i of list i:

    rrf(d)     = sum over lists i holding d of  w_i / (rrf_k + rank_i(d))
    combsum(d) = sum over lists i holding d of  w_i * norm_i(d)
    combmnz(d) = combsum(d) * (number of lists holding d)

    min-max:  norm_i(d) = (s_i(d) - min_i) / max(max_i - min_i, 1e-9)
    z-score:  norm_i(d) = (s_i(d) - mean_i) / max(sd_i, 1e-9)     (population sd)
    none:     norm_i(d) = s_i(d)

min, max, mean and sd are over the list's own entries for that query; a list that does not hold
d adds nothing. These are ranx's `rrf` (unweighted), `comb_sum`, `comb_mnz`, `wsum`,
`min-max` and `zmuv` (the test suite checks equality; a weighted combmnz is `wsum` times the count,
not ranx's `wmnz`, which multiplies the unweighted sum by the sum of the weights). ranx's functions are not called: they work
on its numba `Run` objects, while a tuning trial re-fuses the same cached per-query arrays
hundreds of times (`PreparedLists`), which this module does with numpy without rebuilding
anything. The result is best first, ties by id descending, cut at the depth asked.

A query that failed in any combined configuration is an error of the fused run too (never an
empty result).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from searcheval.errors import InputError
from searcheval.rankers.params import Param
from searcheval.rankers.registry import Kind, RunContext, register_kind, run_configuration
from searcheval.types import Query, RankedRun

METHODS = ("rrf", "combsum", "combmnz")
NORMALISATIONS = ("none", "min-max", "z-score")
TINY = 1e-9  # ranx's floor of a min-max or z-score denominator

PARAMS = {
    "runs": Param("names", help="the configurations it combines (any kind)"),
    "method": Param("string", "rrf", "rrf | combsum | combmnz", choices=METHODS),
    "normalisation": Param("string", "min-max", "score normalisation of combsum and combmnz",
                           choices=NORMALISATIONS),
    "weights": Param("mapping", {}, "weight of each combined configuration (default 1)",
                     item=Param("number", minimum=0.0)),
    "rrf_k": Param("number", 60.0, "rrf's rank offset", minimum=0.0),
}


def _best_first(hits: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    out, seen = [], set()
    for doc_id, score in sorted(hits, key=lambda h: (h[1], h[0]), reverse=True):
        if doc_id not in seen:
            seen.add(doc_id)
            out.append((doc_id, float(score)))
    return out


@dataclass
class PreparedLists:
    """One query's lists, laid out once for many fusions: the union of their documents, each
    list's rank (from 1; 0 where absent) and raw score, and the normalised scores (made once per
    normalisation, on first use)."""

    ids: np.ndarray  # (documents,) str
    order: np.ndarray  # position of each id in id-descending order (the tie break)
    ranks: np.ndarray  # (documents, lists) float, 0 = absent
    scores: np.ndarray  # (documents, lists) raw, 0 where absent
    present: np.ndarray  # (documents, lists) bool
    _normalised: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(cls, lists: Sequence[Sequence[tuple[str, float]]]) -> "PreparedLists":
        ordered = [_best_first(hits) for hits in lists]
        index: dict[str, int] = {}
        for hits in ordered:
            for doc_id, _ in hits:
                index.setdefault(doc_id, len(index))
        n, m = len(index), len(ordered)
        ranks = np.zeros((n, m))
        scores = np.zeros((n, m))
        for j, hits in enumerate(ordered):
            for rank, (doc_id, score) in enumerate(hits, start=1):
                i = index[doc_id]
                ranks[i, j] = rank
                scores[i, j] = score
        ids = np.array(list(index), dtype=str) if n else np.array([], dtype=str)
        order = np.empty(n, dtype=np.int64)
        order[np.argsort(ids)[::-1]] = np.arange(n)  # 0 = the largest id
        return cls(ids=ids, order=order, ranks=ranks, scores=scores, present=ranks > 0)

    def normalised(self, how: str) -> np.ndarray:
        if how not in self._normalised:
            self._normalised[how] = normalise(self.scores, self.present, how)
        return self._normalised[how]

    def fuse(self, weights: np.ndarray, method: str = "rrf", normalisation: str = "min-max",
             rrf_k: float = 60.0, depth: int | None = None) -> list[tuple[str, float]]:
        """The fused list, best first (ties by id descending), at most `depth` entries."""
        if not self.ids.size:
            return []
        w = np.asarray(weights, dtype=np.float64)
        if method == "rrf":
            contrib = np.where(self.present, w / (rrf_k + np.where(self.present, self.ranks, 1.0)),
                               0.0)
            fused = contrib.sum(axis=1)
        else:
            fused = (np.where(self.present, self.normalised(normalisation), 0.0) * w).sum(axis=1)
            if method == "combmnz":
                fused = fused * self.present.sum(axis=1)
        top = np.lexsort((self.order, -fused))  # score descending, then id descending
        if depth is not None:
            top = top[:depth]
        return [(str(self.ids[i]), float(fused[i])) for i in top]


def normalise(scores: np.ndarray, present: np.ndarray, how: str) -> np.ndarray:
    """Each column's scores normalised over its present entries (the module docstring)."""
    if how == "none":
        return scores
    out = np.zeros_like(scores)
    for j in range(scores.shape[1]):
        mask = present[:, j]
        if not mask.any():
            continue
        s = scores[mask, j]
        if how == "min-max":
            out[mask, j] = (s - s.min()) / max(s.max() - s.min(), TINY)
        elif how == "z-score":
            out[mask, j] = (s - s.mean()) / max(s.std(), TINY)
        else:
            raise InputError(f"expected a normalisation of {', '.join(NORMALISATIONS)}, got "
                             f"{how!r}", field="normalisation")
    return out


def fuse_lists(lists: Sequence[Sequence[tuple[str, float]]], weights: Sequence[float] | None = None,
               method: str = "rrf", normalisation: str = "min-max", rrf_k: float = 60.0,
               depth: int | None = None) -> list[tuple[str, float]]:
    """One query's lists `[(id, score)]` fused (the module docstring); weights default to 1."""
    if method not in METHODS:
        raise InputError(f"expected a method of {', '.join(METHODS)}, got {method!r}",
                         field="method")
    w = np.ones(len(lists)) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (len(lists),):
        raise InputError(f"expected {len(lists)} weights, got {len(w)}", field="weights")
    return PreparedLists.of(lists).fuse(w, method, normalisation, rrf_k, depth)


def weight_vector(params: Mapping, names: Sequence[str] | None = None) -> np.ndarray:
    names = list(names if names is not None else params["runs"])
    return np.array([float(params["weights"].get(n, 1.0)) for n in names])


def fuse_runs(name: str, runs: Sequence[RankedRun], queries: Sequence[Query], params: Mapping,
              k: int, prepared: Mapping[str, PreparedLists] | None = None) -> RankedRun:
    """The fused run of `queries` from the combined configurations' runs (in `params["runs"]`
    order); `prepared` (query -> PreparedLists of these runs) skips the layout."""
    weights = weight_vector(params)
    results, latency, errors = {}, {}, {}
    for q in queries:
        failed = [(r.configuration, r.errors[q.id]) for r in runs if q.id in r.errors]
        if failed:
            source, error = failed[0]
            errors[q.id] = {**error, "cause": f"{source}: {error.get('cause')}"}
            continue
        start = time.perf_counter()
        lists = prepared[q.id] if prepared is not None else \
            PreparedLists.of([r.results.get(q.id, []) for r in runs])
        results[q.id] = lists.fuse(weights, params["method"], params["normalisation"],
                                   params["rrf_k"], k)
        latency[q.id] = (sum(r.latency_ms.get(q.id, 0.0) for r in runs)
                         + (time.perf_counter() - start) * 1000.0)
    usage = {"requests": float(sum(r.usage.get("requests", 0.0) for r in runs))}
    return RankedRun(configuration=name, results=results, latency_ms=latency, errors=errors,
                     usage=usage)


def _validate(params: dict, entry: str, file: str | None) -> dict:
    runs = params["runs"]
    if not runs:
        raise InputError("expected at least one configuration to combine", file=file,
                         field=f"{entry}.runs")
    if len(set(runs)) != len(runs):
        raise InputError(f"expected each configuration once, got {runs}", file=file,
                         field=f"{entry}.runs")
    for name in params["weights"]:
        if name not in runs:
            raise InputError(f"weights name {name!r}, which is not one of runs "
                             f"({', '.join(runs)})", file=file, field=f"{entry}.weights.{name}")
    weights = {n: float(params["weights"].get(n, 1.0)) for n in runs}
    if not any(w > 0 for w in weights.values()):
        raise InputError("expected at least one weight > 0", file=file, field=f"{entry}.weights")
    return {**params, "weights": weights}


def run_fuse(configuration, context: RunContext, queries: Sequence[Query], query_vectors,
             k: int) -> RankedRun:
    runs = [run_configuration(configuration.component(n), context, queries, query_vectors, k)
            for n in configuration.params["runs"]]
    return fuse_runs(configuration.name, runs, queries, configuration.params, k)


KIND = register_kind(Kind(
    name="fuse", params=PARAMS, run=run_fuse, validate=_validate,
    references_params=("runs",),
    description="rrf, combsum or combmnz of any configurations, weighted and normalised"))

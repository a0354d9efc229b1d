"""The `fused` configuration, what production serves: bm25 + dense, filtered, prior, abstention.

For one query, given the bm25 list `[(id, bm25 score)]` and the dense list `[(id, cosine)]`:

1. Each list is put best first (score descending, ties by id descending); a document listed twice
   keeps its best entry only.
2. Hard filters: a resource that `query.filters.admits` refuses (network, asset, maximum price; a
   resource without a price fails any price limit) is removed from both lists. Ranks are taken
   after filtering, as if the retrievers filtered in the query; each list keeps its best `depth`.
3. Evidence per candidate: a bm25 entry is a lexical match when its score is > `bm25_floor`; a
   dense entry counts when its cosine is >= `candidate_floor`. A candidate with neither is dropped.
4. Abstention: with no lexical match among the admissible documents, the dense list alone must
   answer: its best cosine is >= `abstain_floor`, or it is >= `candidate_floor` and leads the
   runner-up by >= `abstain_margin` (one listing clearly stands out). Otherwise the query has no
   good answer and the result is empty.
5. Reciprocal-rank fusion (Cormack, Clarke & Buettcher 2009) over the evidence lists of step 3:
       rrf(d) = sum over lists L holding d of  weight_L / (rrf_k + rank_L(d))      rank from 1
6. Settlement-reliability prior: a Beta(prior_a, prior_b) prior on the success rate,
       reliability(d) = (success_rate * settled_30d + prior_a) / (settled_30d + prior_a + prior_b)
   so a resource with no history (settled_30d 0, or success_rate None) gets the prior mean
   prior_a / (prior_a + prior_b) = 0.9, not 0. It scales the fused score with a small weight:
       score(d) = rrf(d) * (1 - prior_weight + prior_weight * reliability(d))
   The factor lies in [0.96, 1]: it reorders near-ties (the same two ranks in swapped lists tie
   exactly in RRF) but cannot lift a weak match over a strong one.
7. Best first, ties by id descending, at most `depth` results.

Constants (`FusionParams` defaults). Every floor was read off the 15 fixture queries with real
all-MiniLM-L6-v2 cosines (3 no-result and 3 paraphrase queries decide them): they are untuned
beyond those 15 queries and must be re-derived for another catalog or model.

| constant | default | what it is | how it was chosen |
| --- | --- | --- | --- |
| `rrf_k` | 60 | RRF rank offset | Cormack et al. 2009; what most RRF implementations use |
| `weights` | (1.0, 1.0) | (bm25, dense) list weights | equal: 15 queries give no ground to prefer one |
| `prior_a` | 9.0 | Beta prior pseudo-successes | prior mean 0.9 with the weight of 10 payments: a new listing ranks like a typical good one, and ~10 real payments move it |
| `prior_b` | 1.0 | Beta prior pseudo-failures | see prior_a |
| `prior_weight` | 0.04 | largest relative change the prior makes | a listing at ranks (1, 1) in both lists with reliability 0 still beats one at (4, 4) with reliability 1: (2/61) * 0.96 > 2/64 (0.05 would not: 61/64 = 0.953) |
| `bm25_floor` | 3.0 | a bm25 score above this is a lexical match | in the fixture catalog (BM25 defaults) one rare word in the description alone scores ~2.5, in the tags ~3.6, in the name ~4.1; the no-result queries' best bm25 scores are 0.99 ("from") and 2.66 ("next"), the lowest top score of a query whose bm25 top hit is its answer is 5.29: any value in (2.66, 5.29) separates them. Absolute BM25 units: they grow with ln(catalog size) |
| `candidate_floor` | 0.25 | smallest cosine that counts as dense evidence | the weakest correct answer without a lexical match (q06 "put this paragraph into Japanese" -> translate-text) has 0.284; most unrelated listings are below 0.2 |
| `abstain_floor` | 0.45 | best cosine that answers a query without any lexical match | the no-result queries' best cosines are 0.134, 0.188, 0.287; answerable ones without a lexical match 0.284, 0.420, 0.554 |
| `abstain_margin` | 0.06 | lead over the runner-up cosine that also answers (None: off) | no-result leads are 0.022-0.050, the two paraphrase queries under abstain_floor lead by 0.107 and 0.125; this rule exists because no single cosine floor separates q06 (0.284) from q11 "predict next week lottery numbers" (0.287) |
| `depth` | 100 | entries kept per list (after filtering) and results returned | the depth the runs are made with |

On the fixtures (throwaway check with real cosines, judgments of 2026-12-02 18:54) mean nDCG@10
(gain 2^g - 1, 1.0 for a query with no relevant judgment): fused 0.996, dense 0.934, bm25 0.754;
fused abstains on all three no-result queries and keeps every filter.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from searcheval.errors import InputError
from searcheval.types import Query, RankedRun, Resource

CONFIGURATION = "fused"


def _finite(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


@dataclass(frozen=True)
class FusionParams:
    """Every constant of the fused configuration; see the module docstring for each default."""

    rrf_k: float = 60.0
    weights: tuple[float, float] = (1.0, 1.0)  # (bm25, dense)
    prior_a: float = 9.0
    prior_b: float = 1.0
    prior_weight: float = 0.04
    bm25_floor: float = 3.0
    candidate_floor: float = 0.25
    abstain_floor: float = 0.45
    abstain_margin: float | None = 0.06
    depth: int = 100

    def __post_init__(self) -> None:
        where = "FusionParams."
        if not _finite(self.rrf_k) or self.rrf_k < 0:
            raise InputError(f"expected a finite rrf_k >= 0, got {self.rrf_k!r}",
                             field=where + "rrf_k")
        if (not isinstance(self.weights, tuple) or len(self.weights) != 2
                or not all(_finite(w) and w >= 0 for w in self.weights)):
            raise InputError(f"expected (bm25 weight, dense weight), finite and >= 0, got "
                             f"{self.weights!r}", field=where + "weights")
        for name in ("prior_a", "prior_b"):
            value = getattr(self, name)
            if not _finite(value) or value <= 0:
                raise InputError(f"expected a finite pseudo-count > 0, got {value!r}",
                                 field=where + name)
        if not _finite(self.prior_weight) or not 0.0 <= self.prior_weight <= 1.0:
            raise InputError(f"expected prior_weight in [0, 1], got {self.prior_weight!r}",
                             field=where + "prior_weight")
        if not _finite(self.bm25_floor) or self.bm25_floor < 0:
            raise InputError(f"expected a finite bm25_floor >= 0, got {self.bm25_floor!r}",
                             field=where + "bm25_floor")
        for name in ("candidate_floor", "abstain_floor"):
            value = getattr(self, name)
            if not _finite(value) or not -1.0 <= value <= 1.0:
                raise InputError(f"expected a cosine in [-1, 1], got {value!r}", field=where + name)
        if self.candidate_floor > self.abstain_floor:
            raise InputError(f"expected candidate_floor <= abstain_floor, got "
                             f"{self.candidate_floor} > {self.abstain_floor}",
                             field=where + "candidate_floor")
        if self.abstain_margin is not None and (not _finite(self.abstain_margin)
                                                or not 0.0 <= self.abstain_margin <= 2.0):
            raise InputError(f"expected abstain_margin in [0, 2] or None, got "
                             f"{self.abstain_margin!r}", field=where + "abstain_margin")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 1:
            raise InputError(f"expected a whole depth >= 1, got {self.depth!r}",
                             field=where + "depth")


def reliability(resource: Resource, prior_a: float = 9.0, prior_b: float = 1.0) -> float:
    """Smoothed settlement success rate: (successes + a) / (settled_30d + a + b).

    successes = success_rate * settled_30d; with no history (settled_30d 0, or success_rate None)
    this is the prior mean a / (a + b).
    """
    if resource.success_rate is None or resource.settled_30d <= 0:
        return prior_a / (prior_a + prior_b)
    settled = resource.settled_30d
    return (resource.success_rate * settled + prior_a) / (settled + prior_a + prior_b)


def _best_first(hits: Sequence[tuple[str, float]], source: str,
                query_id: str) -> list[tuple[str, float]]:
    """Sorted best first (ties by id descending), each id once (its best entry)."""
    for doc_id, score in hits:
        if not _finite(score):
            raise InputError(f"expected a finite {source} score for {doc_id!r} in query "
                             f"{query_id!r}, got {score!r}", field=f"{source}.score")
    out: list[tuple[str, float]] = []
    seen: set[str] = set()
    for doc_id, score in sorted(hits, key=lambda h: (h[1], h[0]), reverse=True):
        if doc_id not in seen:
            seen.add(doc_id)
            out.append((doc_id, float(score)))
    return out


def _dense_answers(semantic: list[tuple[str, float]], params: FusionParams) -> bool:
    """Whether the dense list alone is evidence enough to answer (see step 4)."""
    if not semantic:
        return False
    best = semantic[0][1]
    if best >= params.abstain_floor:
        return True
    if params.abstain_margin is None or len(semantic) < 2 or best < params.candidate_floor:
        return False
    return best - semantic[1][1] >= params.abstain_margin


def fuse(
    query: Query,
    bm25: Sequence[tuple[str, float]],
    dense: Sequence[tuple[str, float]],
    resources_by_id: Mapping[str, Resource],
    params: FusionParams = FusionParams(),
) -> list[tuple[str, float]]:
    """The fused ranking of one query: [(id, score)] best first, ties by id descending."""

    def admitted(hits: list[tuple[str, float]], source: str) -> list[tuple[str, float]]:
        kept = []
        for doc_id, score in hits:
            resource = resources_by_id.get(doc_id)
            if resource is None:
                raise InputError(f"the {source} list of query {query.id!r} names {doc_id!r}, "
                                 "which is not in the catalog", field=f"{source}.id")
            if query.filters.admits(resource):
                kept.append((doc_id, score))
                if len(kept) == params.depth:
                    break
        return kept

    lexical = admitted(_best_first(bm25, "bm25", query.id), "bm25")
    semantic = admitted(_best_first(dense, "dense", query.id), "dense")
    lexical = [(d, s) for d, s in lexical if s > params.bm25_floor]
    if not lexical and not _dense_answers(semantic, params):
        return []
    semantic = [(d, c) for d, c in semantic if c >= params.candidate_floor]

    scores: dict[str, float] = {}
    for weight, hits in zip(params.weights, (lexical, semantic)):
        for rank, (doc_id, _) in enumerate(hits, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (params.rrf_k + rank)
    w = params.prior_weight
    for doc_id in scores:
        r = reliability(resources_by_id[doc_id], params.prior_a, params.prior_b)
        scores[doc_id] *= 1.0 - w + w * r
    ranked = sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)
    return ranked[: params.depth]


def run_fused(
    bm25_run: RankedRun,
    dense_run: RankedRun,
    resources: Sequence[Resource],
    queries: Sequence[Query],
    params: FusionParams = FusionParams(),
) -> RankedRun:
    """The `fused` configuration over `queries`, from the bm25 and dense runs of the same queries.

    latency_ms per query = bm25 latency + dense latency + the time of `fuse`, since production runs
    both retrievals; a run without a latency for a query contributes 0 ms.
    """
    resources_by_id: dict[str, Resource] = {}
    for r in resources:
        if r.id in resources_by_id:
            raise InputError(f"duplicate resource id {r.id!r}", field="id")
        resources_by_id[r.id] = r
    results: dict[str, list[tuple[str, float]]] = {}
    latency: dict[str, float] = {}
    for q in queries:
        if q.id in results:
            raise InputError(f"duplicate query id {q.id!r}", field="id")
        for run in (bm25_run, dense_run):
            if q.id not in run.results:
                raise InputError(f"the {run.configuration} run has no result list for query "
                                 f"{q.id!r}", field=f"{run.configuration}.results")
        start = time.perf_counter()
        fused = fuse(q, bm25_run.results[q.id], dense_run.results[q.id], resources_by_id, params)
        fusion_ms = (time.perf_counter() - start) * 1000.0
        results[q.id] = fused
        latency[q.id] = (bm25_run.latency_ms.get(q.id, 0.0) + dense_run.latency_ms.get(q.id, 0.0)
                         + fusion_ms)
    return RankedRun(configuration=CONFIGURATION, results=results, latency_ms=latency)

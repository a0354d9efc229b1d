"""Click models: relevance from clicks, with the position bias taken out.

Users click the first results more because they look at them more, not only because they are
better: raw click-through rate (CTR) makes whatever ranking is served look right. Two estimates
correct for that, both from the traces' impressions (what was shown at which rank, and clicked
or not):

- **PBM**, the position-based model (Craswell et al. 2008; Chuklin, Markov and de Rijke, *Click
  Models for Web Search*, 2015, ch. 3): a result at rank r is examined with probability theta_r,
  and clicked when examined with probability alpha_qd (its attractiveness, the relevance
  estimate): P(click) = theta_r * alpha_qd. Both are estimated by expectation-maximisation. For
  an impression without a click the posteriors are
  P(E=1, R=0 | C=0) = theta (1 - alpha) / (1 - theta alpha) and
  P(R=1, E=0 | C=0) = alpha (1 - theta) / (1 - theta alpha); each iteration sets alpha_qd to
  (clicks + the non-clicks' expected relevance) / impressions of the pair, and theta_r likewise
  per rank, accelerated by SQUAREM; EM starts from the raw CTR curve. The product theta_r alpha_qd is what the clicks identify: the curve is reported
  relative to rank 1 (theta_1 = 1, alpha scaled by the same factor and capped at 1).
- **COEC**, clicks over expected clicks (as OpenSearch's Search Relevance Workbench computes it
  from UBI events): a pair's clicks divided by the clicks an average result would have had at the
  ranks it was shown, sum over its impressions of the CTR of that rank. 1 is average.

Impressions are aggregated into (pair, rank) cells first, so EM runs over cells, not traces:
a million traces of ten results are at most ten million cells, usually far fewer. No maintained
click-model library fits (PyPI's `clickmodels` is Python 2 of 2014, `pyclickmodels` unmaintained
Cython, `clax-models` needs JAX), so this is numpy, tested against a simulation
(tests/unit/test_clicks.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from searcheval.errors import InputError
from searcheval.io.traces import TraceTable, normalize_query

MODELS = ("pbm", "coec")
DEFAULT_MAX_RANK = 10  # impressions below this rank are not used
DEFAULT_MIN_IMPRESSIONS = 10  # a pair shown fewer times gets no grade
EM_ITERATIONS = 3000  # EM steps at most (SQUAREM-accelerated; each step is cheap)
EM_TOLERANCE = 1e-6
#: estimate -> grade on a 0..3 scale: grade = how many thresholds the estimate reaches
DEFAULT_THRESHOLDS = {"pbm": (0.1, 0.3, 0.6), "coec": (0.5, 1.0, 2.0)}


def text_query_id(text: str) -> str:
    """The query id of a trace without one: `q-` + 12 hex of sha256 of the normalised text (the
    same id `searcheval queries sample` writes, so sampled queries and implicit grades meet)."""
    return "q-" + hashlib.sha256(normalize_query(text).encode("utf-8")).hexdigest()[:12]


def query_keys(table: TraceTable) -> tuple[np.ndarray, list[str]]:
    """Per trace, a code into the returned names: the trace's query_id, else `text_query_id`."""
    names: dict[str, int] = {}
    by_id = np.array([names.setdefault(q, len(names)) for q in table.query_ids] + [-1],
                     dtype=np.int64)
    by_text = np.array([names.setdefault(text_query_id(t), len(names)) for t in table.queries],
                       dtype=np.int64)
    codes = np.where(table.query_id >= 0, by_id[table.query_id], by_text[table.query])
    return codes, list(names)


@dataclass
class Impressions:
    """Impressions aggregated into (pair, rank) cells: `n` shown, `c` clicked. Pair p is
    (queries[pair_query[p]], docs[pair_doc[p]]); ranks are 0-based."""

    cell_pair: np.ndarray
    cell_rank: np.ndarray
    n: np.ndarray
    c: np.ndarray
    pair_query: np.ndarray
    pair_doc: np.ndarray
    queries: list[str]
    docs: list[str]
    max_rank: int
    traces: int  # traces with a known click list that were used
    window: dict = field(default_factory=dict)

    @property
    def pairs(self) -> int:
        return len(self.pair_query)

    def pair_impressions(self) -> np.ndarray:
        return np.bincount(self.cell_pair, weights=self.n, minlength=self.pairs)

    def pair_clicks(self) -> np.ndarray:
        return np.bincount(self.cell_pair, weights=self.c, minlength=self.pairs)


def impressions(table: TraceTable, *, max_rank: int = DEFAULT_MAX_RANK) -> Impressions:
    """The shown results (rank <= max_rank) of the traces whose clicks are known (a `clicks`
    field, possibly empty), with whether each was clicked."""
    if isinstance(max_rank, bool) or not isinstance(max_rank, int) or max_rank < 1:
        raise InputError(f"expected a rank >= 1, got {max_rank!r}", field="max_rank")
    b = table.behaviour
    if b is None or not b.has_clicks.any():
        raise InputError("no trace records its clicks (a `clicks` field); a click model needs "
                         "them", file=table.source, field="clicks")
    counts = np.diff(b.shown_offsets)
    n_rows = len(counts)
    row = np.repeat(np.arange(n_rows, dtype=np.int64), counts)
    rank = np.arange(len(b.shown), dtype=np.int64) - np.repeat(b.shown_offsets[:-1], counts)
    clicked = np.zeros(len(b.shown), dtype=bool)
    c_counts = np.diff(b.click_offsets)
    c_row = np.repeat(np.arange(n_rows, dtype=np.int64), c_counts)
    clicked[b.shown_offsets[c_row] + b.click_pos.astype(np.int64) - 1] = True
    keep = (rank < max_rank) & b.has_clicks[row]
    row, rank, clicked = row[keep], rank[keep], clicked[keep]
    qcode, qnames = query_keys(table)
    ndocs = max(len(table.docs), 1)
    # one sort of every impression: by (query, document, rank); the pairs come from the cells
    cell_key = (qcode[row] * ndocs + b.shown[keep].astype(np.int64)) * max_rank + rank
    del row
    cells, cell = np.unique(cell_key, return_inverse=True)
    cell = cell.ravel()
    n = np.bincount(cell, minlength=len(cells)).astype(np.float64)
    c = np.bincount(cell, weights=clicked, minlength=len(cells))
    uniq, cell_pair = np.unique(cells // max_rank, return_inverse=True)
    ts = table.ts[b.has_clicks] if len(table) else np.zeros(0)
    window = {}
    if len(ts):
        from datetime import datetime, timezone

        window = {"first": datetime.fromtimestamp(float(ts.min()), timezone.utc).isoformat(),
                  "last": datetime.fromtimestamp(float(ts.max()), timezone.utc).isoformat()}
    return Impressions(cell_pair=cell_pair.ravel(), cell_rank=cells % max_rank, n=n, c=c,
                       pair_query=uniq // ndocs, pair_doc=uniq % ndocs, queries=qnames,
                       docs=table.docs, max_rank=max_rank,
                       traces=int(b.has_clicks.sum()), window=window)


@dataclass
class ClickModel:
    """A fitted model: per pair its estimate (alpha for PBM, COEC), per rank the examination
    (PBM, relative to rank 1) or the CTR (COEC)."""

    model: str
    estimate: np.ndarray
    per_rank: np.ndarray
    impressions: Impressions
    iterations: int = 0
    converged: bool = True
    parameters: dict = field(default_factory=dict)

    def curve(self) -> list[dict]:
        """The position bias curve: per rank (1-based), the examination (PBM) or CTR (COEC)."""
        shown = np.bincount(self.impressions.cell_rank, weights=self.impressions.n,
                            minlength=self.impressions.max_rank)
        key = "examination" if self.model == "pbm" else "ctr"
        return [{"rank": r + 1, key: float(v), "impressions": int(shown[r])}
                for r, v in enumerate(self.per_rank.tolist())]


def fit_pbm(imp: Impressions, *, iterations: int = EM_ITERATIONS,
            tolerance: float = EM_TOLERANCE) -> ClickModel:
    """PBM by EM over the cells (see the module docstring), accelerated by SQUAREM (Varadhan and
    Roland 2008: two EM steps, a step along their extrapolation, one EM step from there, kept
    only when its likelihood is no worse than plain EM's). `iterations` caps the EM steps."""
    p, r, n, c = imp.cell_pair, imp.cell_rank, imp.n, imp.c
    npairs, nranks = imp.pairs, imp.max_rank
    pair_n = np.maximum(np.bincount(p, weights=n, minlength=npairs), 1)
    rank_n = np.bincount(r, weights=n, minlength=nranks)
    missed = n - c
    # start from the raw CTR curve (relative to rank 1) and each pair's clicks over the clicks
    # that curve expects of it
    rank_c = np.bincount(r, weights=c, minlength=nranks)
    ctr = np.divide(rank_c, rank_n, out=np.zeros(nranks), where=rank_n > 0)
    theta = np.clip(ctr / ctr[0], 0.01, 1.0) if ctr[0] > 0 else np.full(nranks, 0.5)
    expected = np.bincount(p, weights=n * theta[r], minlength=npairs)
    alpha = np.clip(np.divide(np.bincount(p, weights=c, minlength=npairs), expected,
                              out=np.full(npairs, 0.5), where=expected > 0), 0.01, 0.99)

    def step(x: np.ndarray) -> np.ndarray:
        a, t = x[:npairs][p], x[npairs:][r]
        denom = np.maximum(1.0 - a * t, 1e-12)
        new_a = np.bincount(p, weights=c + missed * (a * (1.0 - t) / denom),
                            minlength=npairs) / pair_n
        new_t = np.divide(np.bincount(r, weights=c + missed * (t * (1.0 - a) / denom),
                                      minlength=nranks), rank_n, out=np.zeros(nranks),
                          where=rank_n > 0)
        # theta * alpha is what clicks identify: hold theta_1 = 1 so EM does not wander along
        # the ridge of equal products (and convergence is measured on identified values)
        if new_t[0] > 0:
            new_a, new_t = np.minimum(new_a * new_t[0], 1.0), new_t / new_t[0]
        return np.concatenate([new_a, new_t])

    def loglik(x: np.ndarray) -> float:
        q = np.clip(x[:npairs][p] * x[npairs:][r], 1e-12, 1 - 1e-12)
        return float((c * np.log(q) + missed * np.log1p(-q)).sum())

    x = np.concatenate([alpha, theta])
    done, steps = False, 0
    while steps < iterations:
        x1 = step(x)
        x2 = step(x1)
        steps += 2
        rr, v = x1 - x, x2 - 2 * x1 + x
        vv = float(np.sqrt(v @ v))
        if vv == 0.0:
            new = x2
        else:
            s = min(-float(np.sqrt(rr @ rr)) / vv, -1.0)
            jump = np.clip(x - 2 * s * rr + s * s * v, 1e-9, 1.0)
            new = step(jump)
            steps += 1
            if not loglik(new) >= loglik(x2):
                new = x2
        change = float(np.abs(new - x).max(initial=0.0))
        x = new
        if change < tolerance:
            done = True
            break
    return ClickModel("pbm", x[:npairs], x[npairs:], imp, iterations=steps, converged=done,
                      parameters={"em_steps": steps, "tolerance": tolerance,
                                  "converged": done, "acceleration": "squarem"})


def fit_coec(imp: Impressions) -> ClickModel:
    """Clicks over expected clicks: expected = sum over a pair's cells of n * CTR(rank)."""
    nranks = imp.max_rank
    rank_n = np.bincount(imp.cell_rank, weights=imp.n, minlength=nranks)
    rank_c = np.bincount(imp.cell_rank, weights=imp.c, minlength=nranks)
    ctr = np.divide(rank_c, rank_n, out=np.zeros(nranks), where=rank_n > 0)
    expected = np.bincount(imp.cell_pair, weights=imp.n * ctr[imp.cell_rank],
                           minlength=imp.pairs)
    clicks = imp.pair_clicks()
    coec = np.divide(clicks, expected, out=np.zeros(imp.pairs), where=expected > 0)
    return ClickModel("coec", coec, ctr, imp)


def fit(imp: Impressions, model: str = "pbm") -> ClickModel:
    if model not in MODELS:
        raise InputError(f"expected a click model {', '.join(MODELS)}, got {model!r}",
                         field="model")
    return fit_pbm(imp) if model == "pbm" else fit_coec(imp)


def raw_ctr(imp: Impressions) -> np.ndarray:
    """Clicks / impressions per pair: the biased estimate the models correct."""
    return imp.pair_clicks() / np.maximum(imp.pair_impressions(), 1)


def check_thresholds(thresholds, scale: tuple[int, int], model: str) -> tuple[float, ...]:
    """Thresholds mapping an estimate onto lo..hi: hi - lo ascending numbers."""
    lo, hi = scale
    values = DEFAULT_THRESHOLDS.get(model) if thresholds is None else thresholds
    if values is None:
        raise InputError(f"expected a click model {', '.join(MODELS)}, got {model!r}",
                         field="model")
    try:
        values = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise InputError(f"expected numbers, got {thresholds!r}", field="thresholds") from None
    if len(values) != hi - lo or any(b <= a for a, b in zip(values, values[1:])) \
            or not all(np.isfinite(values)):
        raise InputError(f"expected {hi - lo} ascending thresholds for the grades {lo}..{hi}, "
                         f"got {list(values)}", field="thresholds")
    return values


def grades(estimate: np.ndarray, thresholds: tuple[float, ...], lo: int = 0) -> np.ndarray:
    """lo + the number of thresholds each estimate reaches."""
    return lo + np.searchsorted(np.asarray(thresholds), estimate, side="right")

"""The dict path at scale: `searcheval.evaluate` and `searcheval.Evaluator` on runs given as
`{query: {doc: score}}` (the shape ranx, ir_measures and BEIR share) of many rows.

The dict engine (`searcheval.metrics.engine.evaluate`) spends most of its time on Python's side:
checking every id and score of the run, reading the scores out, then ranking in numpy. Here the
run is read by `_native.scan_dict_run` (C, built with the package, `searcheval/_native.c`): one
walk over the dicts that checks and reads every id and score once and looks each judged document
up in its query's ranking. Where the package was installed without a C compiler, `read_python`
does the same in three passes of Python's C iterators (`map`, `chain`, `np.fromiter`: the ids'
types, the scores' types, the scores) and one `dict.get` per judgment, a few times slower. The
judged documents' ranks are then counted by a small compiled loop, and the metrics come from the
compiled path's loop (`searcheval.metrics.kernel._metrics`).

Same inputs, same answers as the dict engine (to 1e-12: the compiled loop adds in another order):
a run this path does not take as it is (a key that is not a str, a score that is not a finite int
or float, an empty id) returns None, and the caller takes the dict engine, which converts or
refuses with its clear error. Runs too small to be worth loading numba never come here
(`searcheval.metrics.api.COMPILED_ROWS`). Ranks follow the engine's order: score descending, ties by document id
descending (only judged documents whose score another document shares are ranked in Python).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Any, Sequence

import numpy as np
from numba import njit, prange

from searcheval.metrics.engine import Evaluation, Metric, Settings

try:  # built with the package (setup.py); optional: without a C compiler, read_python reads
    from searcheval import _native
except ImportError:  # pragma: no cover - an install without a C compiler
    _native = None

# scores read as they are (numpy's float64 is a float; the dict engine takes the same three)
SCORE_TYPES = {float, int, np.float64}


@dataclass
class DictQrels:
    """Judgments checked and read once (`Evaluator` keeps them for every run)."""

    qrels: dict  # {query: {doc: grade}}, as `io.frames.as_qrels` gives them
    qids: list[str]
    index: dict[str, int]  # qids[c] -> c
    judged: list[dict]  # qrels[qids[c]]
    docs: list[str]  # every judged document, query by query
    starts: np.ndarray  # int64 (Q + 1,): judgments of query c are starts[c]:starts[c + 1]
    grade: np.ndarray  # int64, one per judgment


def prepare(qrels: dict) -> DictQrels:
    """`qrels` (already checked: `io.frames.as_qrels`) as arrays."""
    qids = list(qrels)
    judged = [qrels[q] or {} for q in qids]
    lengths = np.fromiter(map(len, judged), dtype=np.int64, count=len(judged))
    starts = np.zeros(len(judged) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    grade = np.fromiter(chain.from_iterable(map(dict.values, judged)), dtype=np.int64,
                        count=int(starts[-1]))
    return DictQrels(qrels=qrels, qids=qids, index={q: c for c, q in enumerate(qids)},
                     judged=judged,
                     docs=list(chain.from_iterable(judged)), starts=starts, grade=grade)


def scores(run: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """Every score of `run` in its order and where each query's start (len(run) + 1,), after the
    checks of `io.frames._checked_in_bulk` (ids exact str, none empty; scores int or float,
    numpy's float64 too, finite); None when any fails."""
    if not isinstance(run, dict) or set(map(type, run)) != {str} or "" in run:
        return None
    rankings = list(run.values())
    if not all(map(isinstance, rankings, repeat(dict))) or \
            any(map(dict.__contains__, rankings, repeat(""))):
        return None
    lengths = np.fromiter(map(len, rankings), dtype=np.int64, count=len(rankings))
    starts = np.zeros(len(rankings) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    key_types = set(map(type, chain.from_iterable(rankings)))
    value_types = set(map(type, chain.from_iterable(map(dict.values, rankings))))
    try:
        out = np.fromiter(chain.from_iterable(map(dict.values, rankings)), dtype=np.float64,
                          count=int(starts[-1]))
    except (TypeError, ValueError, OverflowError):  # a str, or an int past float's range
        return None
    if not key_types <= {str} or not value_types <= SCORE_TYPES or \
            not np.isfinite(out).all():
        return None
    return out, starts


@dataclass
class Read:
    """A run read against the judgments (`read` or `read_python`)."""

    scores: np.ndarray  # float64, every score of the run in its order
    run_starts: np.ndarray  # int64 (len(run) + 1,): where each of the run's queries starts
    where: np.ndarray  # int64, one per judged query: its position in the run, -1: absent
    judged_score: np.ndarray  # float64, one per judgment: the document's score, NaN: not retrieved


def read(prepared: DictQrels, run: Any) -> Read | None:
    """`run` read by the C scan (`_native.scan_dict_run`), or by `read_python` where the package was
    installed without it; None when the run is not a dict this path takes as it is."""
    if _native is None:
        return read_python(prepared, run)
    if not isinstance(run, dict) or not run:  # as read_python: an empty run goes the engine
        return None
    found = _native.scan_dict_run(run, prepared.index, prepared.docs, prepared.starts)
    if found is None:
        return None
    scores_, run_starts, where, judged_score = found
    return Read(scores=np.frombuffer(scores_, dtype=np.float64),
                run_starts=np.frombuffer(run_starts, dtype=np.int64),
                where=np.frombuffer(where, dtype=np.int64),
                judged_score=np.frombuffer(judged_score, dtype=np.float64))


def read_python(prepared: DictQrels, run: Any) -> Read | None:
    """What `_native.scan_dict_run` reads, in Python's C iterators (a few times slower)."""
    found = scores(run)
    if found is None:
        return None
    flat, run_starts = found
    position = {q: i for i, q in enumerate(run)}
    where = np.fromiter(map(position.get, prepared.qids, repeat(-1)), dtype=np.int64,
                        count=len(prepared.qids))
    empty: dict = {}
    rankings = [run.get(q) or empty for q in prepared.qids]
    judged_score = np.fromiter(
        chain.from_iterable(map(r.get, j, repeat(math.nan))
                            for r, j in zip(rankings, prepared.judged)),
        dtype=np.float64, count=prepared.grade.size)
    return Read(scores=flat, run_starts=run_starts, where=where, judged_score=judged_score)


def evaluate(prepared: DictQrels, run: Any, metrics: Sequence[Metric], settings: Settings, *,
             complete: bool | None = None) -> Evaluation | None:
    """`run` scored against `prepared` as `engine.evaluate` scores it, or None when the run is
    not a dict this path takes as it is (the caller then takes the dict engine)."""
    found = read(prepared, run)
    if found is None:
        return None
    import numba

    from searcheval.metrics import kernel

    qids = prepared.qids
    where = found.where
    present = where >= 0
    missed = int(len(qids) - np.count_nonzero(present))
    unjudged = len(run) - (len(qids) - missed)
    lengths = np.diff(found.run_starts)
    returned = np.where(present, lengths[np.maximum(where, 0)], 0)  # (a run read is not empty)
    with kernel._PARALLEL:
        numba.set_num_threads(kernel._threads())
        rank, tied = _ranks(found.scores, found.run_starts, where, prepared.starts,
                            found.judged_score)
    if tied.any():  # a judged document shares its score: ties go by document id, descending
        query_of = np.repeat(np.arange(len(qids)), np.diff(prepared.starts))
        for j in np.flatnonzero(tied).tolist():
            ranking, doc = run[qids[query_of[j]]], prepared.docs[j]
            score = ranking[doc]
            rank[j] += sum(1 for d, v in ranking.items() if v == score and d > doc)

    if complete or (complete is None and not settings.trec_compat):
        chosen = np.arange(len(qids))
    else:
        chosen = np.flatnonzero(present)
    values = metric_values(prepared, chosen, rank, returned, metrics, settings)
    if complete:
        absent = ~present[chosen]
        for arr in values.values():
            arr[absent & ~np.isnan(arr)] = 0.0
    query_ids = qids if chosen.size == len(qids) else [qids[i] for i in chosen.tolist()]
    return Evaluation(query_ids=list(query_ids), values=values, missed=missed,
                      unjudged=unjudged)


def metric_values(prepared: DictQrels, chosen: np.ndarray, rank: np.ndarray,
                  returned: np.ndarray, metrics: Sequence[Metric],
                  settings: Settings) -> dict[str, np.ndarray]:
    """Each metric over the chosen queries from their judgments' ranks: the compiled loop for the
    metrics it has, the numpy engine (`columnar._blocks`) for the others."""
    from searcheval.io.trec import QrelsColumns
    from searcheval.metrics import kernel
    from searcheval.metrics.columnar import _blocks

    values: dict[str, np.ndarray] = {}
    compiled = [m for m in metrics if m.kind in kernel.KERNEL_KINDS]
    if compiled:
        kinds = np.array([kernel.KERNEL_KINDS[m.kind] for m in compiled], dtype=np.int64)
        cutoffs = np.array([-1 if m.k is None else m.k for m in compiled], dtype=np.int64)
        with kernel._PARALLEL:
            out = kernel._metrics(chosen, prepared.starts, prepared.grade, rank, returned, kinds,
                                  cutoffs, settings.effective_gain == "exponential",
                                  kernel.POLICIES[settings.effective_policy],
                                  settings.relevance_level)
        values.update({m.name: out[i] for i, m in enumerate(compiled)})
    rest = [m for m in metrics if m.kind not in kernel.KERNEL_KINDS]
    if rest:
        columns = QrelsColumns(qids=prepared.qids, docs=None, q=None, d=None,
                               grade=prepared.grade, starts=prepared.starts)
        values.update(_blocks(columns, chosen, rank, returned, rest, settings))
    return {m.name: values[m.name] for m in metrics}


@njit(cache=True, parallel=True)
def _ranks(score, run_starts, where, starts, judged_score):
    """Each judgment's 0-based rank by score alone (inf: not retrieved) and whether another
    document of its query has the same score (the tie-break then goes by id, in Python)."""
    rank = np.full(judged_score.size, np.inf)
    tied = np.zeros(judged_score.size, dtype=np.bool_)
    for c in prange(where.size):
        p = where[c]
        if p < 0:
            continue
        s, e = run_starts[p], run_starts[p + 1]
        for j in range(starts[c], starts[c + 1]):
            v = judged_score[j]
            if v != v:  # NaN: not in the run
                continue
            above = 0
            same = 0
            for i in range(s, e):
                x = score[i]
                if x > v:
                    above += 1
                elif x == v:
                    same += 1
            rank[j] = above
            tied[j] = same > 1
    return rank, tied

"""The columnar path of the metric engine: runs and judgments as integer-coded arrays (from TREC
files through pyarrow, or from DataFrames), never as dicts of strings.

A run arrives in chunks of whole queries (`searcheval.io.trec.iter_run_chunks`, parsed on a second
thread while this one scores). In each chunk the rows are keyed by (query, document) in the chunk's
own codes and sorted once: a document listed twice for a query sits next to itself (refused through
the exact loader), and each judgment of the chunk's queries is found by a binary search, its
document's code coming from a hash of the chunk's ids only (work in proportion to the chunk, however
many documents are judged). Ranks come from one sort over (query, score descending, document id
descending) -- skipped when the file is already in that order, as most are. Only the rank of every
retrieved judged document is kept, so memory is the judgments plus one chunk. The metrics are the
engine's own (`engine.compute`) over blocks of queries, so every number equals the dict path's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from searcheval.errors import InputError
from searcheval.io.trec import (Fallback, QrelsColumns, RunChunk, iter_run_chunks,
                                read_qrels_columns, cast, from_numpy, index_in,
                                to_numpy)
from searcheval.io.trec import compute as arrow
from searcheval.metrics.engine import (Evaluation, Metric, Settings, _padded, _Ranked, compute,
                                       parse_metric, parse_metrics)

QUERY_BLOCK = 65_536  # queries whose padded matrices are built at once


def _codes(values, value_set) -> np.ndarray:
    """Index of each of `values` in `value_set` (pyarrow arrays), -1 where absent."""
    found = index_in(values, value_set)
    codes = to_numpy(found).astype(np.int64)
    if found.null_count:  # (pyarrow's fill_null would import pandas for its scalar)
        bits = np.frombuffer(found.buffers()[0], dtype=np.uint8)
        valid = np.unpackbits(bits, bitorder="little")[found.offset:found.offset + len(found)]
        codes[valid == 0] = -1
    return codes


def evaluate_columns(qrels: QrelsColumns, chunks: Iterable[RunChunk], metrics: Sequence[Metric],
                     settings: Settings = Settings(), *, complete: bool | None = False) -> Evaluation:
    """Score a run given in chunks against columnar judgments: the queries both judged and in the
    run; or (`complete`) every judged query, one the run did not answer scoring 0; or (None, the
    library's default) every judged query, one the run did not answer an empty ranking."""

    metrics = parse_metrics(metrics) if isinstance(metrics, str) else \
        [m if isinstance(m, Metric) else parse_metric(m) for m in metrics]
    n_q = len(qrels.qids)
    rank = np.full(qrels.q.size, np.inf)  # 0-based rank of each judgment's document in the run
    returned = np.zeros(n_q, dtype=np.int64)
    present = np.zeros(n_q, dtype=bool)
    qid_code = {qid: i for i, qid in enumerate(qrels.qids)}
    unjudged = 0
    last_qids = cq = None

    for chunk in chunks:
        q, score, d = chunk.q, chunk.score, chunk.d  # rows grouped by query, q non-decreasing
        if not q.size:
            continue
        # (query, document) in the chunk's own codes, sorted once: a document listed twice for a
        # query sits next to itself, and each judgment is found by a binary search
        keys = q.astype(np.int64) * max(len(chunk.docs), 1) + d
        by_key = np.argsort(keys)
        keys = keys[by_key]
        if np.any(keys[1:] == keys[:-1]):
            raise Fallback("duplicate document")
        if chunk.qid_values is not last_qids:  # chunks of one array share their dictionaries
            last_qids = chunk.qid_values
            cq = np.fromiter((qid_code.get(x, -1) for x in chunk.qids), dtype=np.int64,
                             count=len(chunk.qids))
        counts = np.bincount(q, minlength=cq.size)  # rows of each of the chunk's queries
        here = np.flatnonzero(counts)
        unjudged += int(np.count_nonzero(cq[here] < 0))
        mine = here[cq[here] >= 0]  # the chunk's judged queries
        if not mine.size:
            continue
        present[cq[mine]] = True
        returned[cq[mine]] += counts[mine]
        # rank within each query: rows are grouped by query; sort by score (then id) unless sorted
        new_group = np.empty(q.size, dtype=bool)
        new_group[0] = True
        np.not_equal(q[1:], q[:-1], out=new_group[1:])
        group = np.cumsum(new_group) - 1
        starts = np.flatnonzero(new_group)
        same = ~new_group[1:]
        ordered = not np.any(same & (score[1:] > score[:-1]))
        if ordered:  # the usual file: each query's lines best first; only ties to order
            position = np.arange(q.size) - starts[group]
            _order_ties(position, same & (score[1:] == score[:-1]), d, chunk.docs)
        else:
            doc_rank = _doc_rank(chunk.docs)
            order = np.lexsort((-doc_rank[d], -score, group))
            position = np.empty(q.size, dtype=np.int64)
            position[order] = np.arange(q.size) - starts[group[order]]
        # the judgments of those queries, each judged document's code among the chunk's
        # documents (a hash of this chunk's ids only: work in proportion to the chunk)
        lo = qrels.starts[cq[mine]]
        lengths = qrels.starts[cq[mine] + 1] - lo
        rows = np.repeat(lo - (np.cumsum(lengths) - lengths), lengths) + np.arange(lengths.sum())
        doc = _codes(arrow("take", qrels.docs, from_numpy(qrels.d[rows])), chunk.docs)
        retrieved = doc >= 0
        rows = rows[retrieved]
        wanted = np.repeat(mine, lengths)[retrieved] * max(len(chunk.docs), 1) + doc[retrieved]
        at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
        hit = keys[at] == wanted
        rank[rows[hit]] = position[by_key[at[hit]]]

    chosen = np.flatnonzero(present) if complete is False else np.arange(n_q)
    values = _blocks(qrels, chosen, rank, returned, metrics, settings)
    if complete:
        absent = ~present[chosen]
        for arr in values.values():
            arr[absent & ~np.isnan(arr)] = 0.0
    return Evaluation(query_ids=[qrels.qids[i] for i in chosen.tolist()], values=values,
                      missed=int(n_q - present.sum()), unjudged=unjudged)


def _doc_rank(docs) -> np.ndarray:
    """Each document code's place in the byte order of the ids (the order of Python's str)."""

    rank = np.empty(len(docs), dtype=np.int64)
    rank[to_numpy(arrow("array_sort_indices", docs))] = np.arange(len(docs))
    return rank


def _order_ties(position: np.ndarray, tie_next: np.ndarray, d: np.ndarray, docs) -> None:
    """Reorder each run of equal scores (rows i, i+1, ... where tie_next[i]) by document id,
    descending, in place: the tie-break of trec_eval and of the dict engine."""
    if not tie_next.any():
        return
    tied = np.zeros(position.size, dtype=bool)
    tied[:-1] |= tie_next
    tied[1:] |= tie_next
    rows = np.flatnonzero(tied)
    starts = np.ones(rows.size, dtype=bool)
    starts[1:] = ~tie_next[rows[1:] - 1]  # a row continues a run when the one before ties with it
    run = np.cumsum(starts) - 1
    first = position[rows[starts]]
    ids = arrow("take", docs, from_numpy(d[rows]))
    doc_rank = np.empty(rows.size, dtype=np.int64)
    doc_rank[_sort_indices(ids)] = np.arange(rows.size)
    order = np.lexsort((-doc_rank, run))
    run_start = np.flatnonzero(starts)
    position[rows[order]] = first[run[order]] + (np.arange(rows.size) - run_start[run[order]])


def _sort_indices(strings) -> np.ndarray:

    return to_numpy(arrow("array_sort_indices", strings))


def _blocks(qrels: QrelsColumns, chosen: np.ndarray, rank: np.ndarray, returned: np.ndarray,
            metrics: Sequence[Metric], settings: Settings) -> dict[str, np.ndarray]:
    """The engine's metrics over the chosen queries, QUERY_BLOCK at a time."""
    out = {m.name: np.empty(chosen.size) for m in metrics}
    for lo in range(0, chosen.size, QUERY_BLOCK):
        block = chosen[lo:lo + QUERY_BLOCK]
        first, last = qrels.starts[block], qrels.starts[block + 1]
        lengths = last - first
        rows = np.repeat(first - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
        width = max(int(lengths.max()) if block.size else 0, 1)
        grades = _padded(qrels.grade[rows].astype(np.int64), lengths, width, 0)
        ranks = _padded(rank[rows], lengths, width, np.inf)
        judged = np.arange(width) < lengths[:, None]
        ranked = _Ranked(grades=grades, judged=judged, ranks=ranks, returned=returned[block])
        for name, arr in compute(metrics, ranked, settings).items():
            out[name][lo:lo + block.size] = arr
    return out


def evaluate_files(qrels_path: str | Path, run_path: str | Path, metrics: Sequence[Metric],
                   settings: Settings = Settings(), *, complete: bool = False,
                   max_grade: int | None = None, qrels: QrelsColumns | None = None,
                   chunk_rows: int | None = None) -> Evaluation:
    """A TREC run file against a qrels file (or `qrels` already read) through the columnar path,
    or, for files it does not take (`Fallback`), through the exact loaders and the dict engine:
    the same numbers either way, and the exact loaders' refusals for bad input."""
    from searcheval.defaults import MAX_GRADE
    from searcheval.io.trec import load_qrels, load_trec_run
    from searcheval.metrics.engine import evaluate

    try:
        if qrels is None:
            qrels = read_qrels_columns(qrels_path, max_grade=MAX_GRADE if max_grade is None
                                       else max_grade)
        chunks = iter_run_chunks(run_path, **({"rows": chunk_rows} if chunk_rows else {}))
        result = evaluate_columns(qrels, chunks, metrics, settings, complete=complete)
    except Fallback:
        judgments = load_qrels(qrels_path, max_grade=max_grade)
        run = load_trec_run(run_path)
        _refuse_unjudged(run, judgments, qrels_path, run_path)
        return evaluate(judgments, run, metrics, settings, complete=complete)
    if not result.query_ids and result.unjudged:
        # the exact loaders name the first query; read it again only to say so
        _refuse_unjudged(load_trec_run(run_path), load_qrels(qrels_path, max_grade=max_grade),
                         qrels_path, run_path)
    return result


def _refuse_unjudged(run, qrels, qrels_path, run_path) -> None:
    if run and not any(q in qrels for q in run):
        raise InputError(f"no query of the run is judged in {qrels_path} "
                         f"(first: {next(iter(run))!r})", file=run_path)


# --------------------------------------------------------------------------- arrays and DataFrames


def _encoded(values):
    """Query or document ids (numpy / pandas / pyarrow, strings or integers) dictionary-encoded:
    (int32 codes, a string array of the distinct ids). Integers are encoded as integers and only
    their distinct values become decimal strings, as the dict path makes them."""
    import pyarrow as pa

    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        values = from_numpy(values.astype(np.int64, copy=False))
    elif not isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = pa.array(values, from_pandas=True)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.null_count:
        raise Fallback("an id is missing")
    if pa.types.is_large_string(values.type) or pa.types.is_string_view(values.type):
        values = cast(values, pa.string())
    if not (pa.types.is_string(values.type) or pa.types.is_integer(values.type)):
        raise Fallback("ids are not strings or integers")
    encoded = arrow("dictionary_encode", values)
    dictionary = encoded.dictionary
    if pa.types.is_integer(dictionary.type):
        dictionary = cast(dictionary, pa.string())
    return to_numpy(encoded.indices).astype(np.int32), dictionary


def columns_from_arrays(qrels_query, qrels_doc, qrels_grade, run_query, run_doc, run_score, *,
                        max_grade: int | None = None) -> tuple[QrelsColumns, list[RunChunk]]:
    """Judgments and a run given as parallel arrays, as the columnar path's inputs (one chunk).
    Fallback for what the exact path must judge: non-finite scores, fractional grades, duplicates."""
    from searcheval.io.trec import _has_duplicates

    grade = np.asarray(qrels_grade)
    if grade.dtype.kind == "f":
        if not np.isfinite(grade).all() or (grade != np.round(grade)).any():
            raise Fallback("grades are not whole")
    elif grade.dtype.kind not in "iu":
        raise Fallback("grades are not numbers")
    grade = grade.astype(np.int64)
    if grade.size and (grade.min() < 0 or (max_grade is not None and grade.max() > max_grade)):
        raise Fallback("grade outside the scale")
    score = np.asarray(run_score)
    if score.dtype.kind not in "iuf" or not np.isfinite(score.astype(np.float64)).all():
        raise Fallback("scores are not finite numbers")
    score = score.astype(np.float64)

    q, qids = _encoded(qrels_query)
    d, docs = _encoded(qrels_doc)
    order = np.argsort(q, kind="stable")
    q, d, grade = q[order], d[order], grade[order]
    if _has_duplicates(q.astype(np.int64) * max(len(docs), 1) + d):
        raise Fallback("duplicate judgment")
    qrels = QrelsColumns(qids=qids.to_pylist(), docs=docs, qid_values=qids, q=q, d=d,
                         grade=grade, starts=np.searchsorted(q, np.arange(len(qids) + 1)))

    rq, run_qids = _encoded(run_query)
    rdc, run_docs = _encoded(run_doc)
    if rq.size and np.any(rq[1:] < rq[:-1]):  # not grouped in first-seen order: group the rows
        order = np.argsort(rq, kind="stable")
        rq, rdc, score = rq[order], rdc[order], score[order]
    chunk = RunChunk(qids=run_qids.to_pylist(), docs=run_docs, q=rq, d=rdc, score=score,
                     qid_values=run_qids)
    return qrels, [chunk]


def evaluate_frames(qrels_frame, run_frame, metrics: Sequence[Metric], settings: Settings, *,
                    complete: bool | None, qrels_columns: tuple[str, str, str],
                    run_columns: tuple[str, str, str]) -> Evaluation:
    """DataFrames (or anything with named columns) through the columnar path; Fallback when a
    column is missing or its values are what the dict path must refuse."""
    try:
        qrels_parts = [qrels_frame[c] for c in qrels_columns]
        run_parts = [run_frame[c] for c in run_columns]
    except KeyError:
        raise Fallback("a column is missing") from None
    qrels, chunks = columns_from_arrays(*(np.asarray(p) if i == 2 else p
                                          for i, p in enumerate(qrels_parts)),
                                        *(np.asarray(p) if i == 2 else p
                                          for i, p in enumerate(run_parts)))
    return evaluate_columns(qrels, chunks, metrics, settings, complete=complete)

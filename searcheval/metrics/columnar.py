"""The columnar path of the metric engine: runs and judgments as integer-coded arrays (from TREC
files through pyarrow, or from DataFrames), never as dicts of strings.

A run arrives in chunks of whole queries (`searcheval.io.trec.iter_run_chunks`, parsed a block of
lines at a time in this thread). In each chunk the rows are keyed by (query, document) in the chunk's
own codes and sorted once: a document listed twice for a query sits next to itself (refused through
the exact loader), and each judgment of the chunk's queries is found by a binary search, its
document's code coming from a hash of the chunk's ids only (work in proportion to the chunk, however
many documents are judged). Ranks come from one sort over (query, score descending, document id
descending) -- skipped when the file is already in that order, as most are. Only the rank of every
retrieved judged document is kept, so memory is the judgments plus one chunk. The metrics are the
engine's own (`engine.compute`) over blocks of queries, so every number equals the dict path's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from searcheval.errors import InputError
from searcheval.io.trec import (CHUNK_ROWS, Fallback, QrelsColumns, RunChunk, iter_run_chunks,
                                query_runs, read_qrels_columns, cast, from_numpy, index_in, mix,
                                string_hashes, to_numpy)
from searcheval.io.trec import compute as arrow
from searcheval.io.trec import repeats_within
from searcheval.metrics.engine import (Evaluation, Metric, Settings, _padded, _Ranked, compute,
                                       parse_metric, parse_metrics)

QUERY_BLOCK = 4_096  # queries whose padded matrices are built at once (a block's temporaries are
# a few MB; 65,536 at once put 8 MB on `searcheval score`'s peak and were no faster)
_FILTER_BITS = 20  # the join's filter: 1 MiB a thread, all zero between uses
_FILTER_SHIFT = np.uint64(64 - _FILTER_BITS)
_PER_THREAD = threading.local()  # (two threads scoring at once never share a filter)


def _join_filter() -> np.ndarray:
    found = getattr(_PER_THREAD, "filter", None)
    if found is None:
        found = _PER_THREAD.filter = np.zeros(1 << _FILTER_BITS, dtype=np.uint8)
    return found


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
    unjudged = 0
    last_qids = cq = mapped_docs = judged_code = None

    for chunk in chunks:
        q, score, d = chunk.q, chunk.score, chunk.d  # rows grouped by query, q non-decreasing
        n = q.size
        if not n:
            continue
        if chunk.qids is not last_qids:  # chunks of one array share their query ids
            last_qids = chunk.qids
            cq = qrels.codes_of(chunk.qids)  # judged query code, -1 if none
        # the chunk's queries ("groups"), each a run of rows
        new_group = np.empty(n, dtype=bool)
        new_group[0] = True
        np.not_equal(q[1:], q[:-1], out=new_group[1:])
        starts = np.flatnonzero(new_group)
        group = np.cumsum(new_group) - 1
        raw = d is None  # each row's id as it is (a file's chunk), else codes into chunk.docs
        if raw:
            hashes = chunk.hashes if chunk.hashes is not None else string_hashes(chunk.docs)
            _refuse_twice(np.append(starts, n), hashes)  # a document listed twice for a query
        else:
            pairs, pair_rows = _sorted_pairs(group, d, len(chunk.docs))  # refuses one twice
        code = cq[q[starts]]
        unjudged += int(np.count_nonzero(code < 0))
        judged_groups = np.flatnonzero(code >= 0)
        if not judged_groups.size:
            continue
        mine = code[judged_groups]
        present[mine] = True
        returned[mine] += np.diff(np.append(starts, n))[judged_groups]
        # rank within each query: sort by score (then id) unless the rows are in that order
        same = ~new_group[1:]
        ordered = not np.any(same & (score[1:] > score[:-1]))
        if ordered:  # the usual file: each query's lines best first; only ties to order
            position = np.arange(n) - starts[group]
            _order_ties(position, same & (score[1:] == score[:-1]), d, chunk.docs)
        else:
            doc_rank = _doc_rank(chunk.docs)
            order = np.lexsort((-(doc_rank if raw else doc_rank[d]), -score, group))
            position = np.empty(n, dtype=np.int64)
            position[order] = np.arange(n) - starts[group[order]]
        # the judgments of those queries
        lo = qrels.starts[mine]
        lengths = qrels.starts[mine + 1] - lo
        rows = np.repeat(lo - (np.cumsum(lengths) - lengths), lengths) + np.arange(lengths.sum())
        if raw:  # (judged query, id hash) of each row found among those of the judgments
            with np.errstate(over="ignore"):
                wanted = hashes + mix(cq[q].astype(np.uint64) + np.uint64(1))
            judgment_keys = qrels.keys()[rows]
            # a filter first (a byte per slot of the keys' top bits): most rows match nothing
            slots = judgment_keys >> _FILTER_SHIFT
            seen = _join_filter()
            seen[slots] = 1
            maybe = np.flatnonzero(seen[wanted >> _FILTER_SHIFT])
            seen[slots] = 0
            order = np.argsort(judgment_keys)
            judgment_keys = judgment_keys[order]
            at = np.minimum(np.searchsorted(judgment_keys, wanted[maybe]), judgment_keys.size - 1)
            found = (judgment_keys[at] == wanted[maybe]) & (cq[q[maybe]] >= 0)
            hit, matched = maybe[found], rows[order[at[found]]]
            # the same id, not only the same hash
            same = arrow("equal", arrow("take", chunk.docs, from_numpy(hit)),
                         arrow("take", qrels.docs, from_numpy(qrels.d[matched])))
            if same.false_count:
                raise Fallback("two ids with one hash")
            rank[matched] = position[hit]
            continue
        # each judged document's code among the chunk's documents (a hash of this chunk's ids
        # only: work in proportion to the chunk)
        if not chunk.shared_docs:
            doc = _codes(arrow("take", qrels.docs, from_numpy(qrels.d[rows])), chunk.docs)
        else:  # one dictionary for the whole run: every judged document looked up in it once
            if chunk.docs is not mapped_docs:
                mapped_docs, judged_code = chunk.docs, _codes(qrels.docs, chunk.docs)
            doc = judged_code[qrels.d[rows]]
        retrieved = doc >= 0
        rows = rows[retrieved]
        wanted = np.repeat(judged_groups, lengths)[retrieved] * max(len(chunk.docs), 1) + \
            doc[retrieved]
        at = np.minimum(np.searchsorted(pairs, wanted), n - 1)
        hit = pairs[at] == wanted
        rank[rows[hit]] = position[pair_rows[at[hit]]]

    chosen = np.flatnonzero(present) if complete is False else np.arange(n_q)
    values = _blocks(qrels, chosen, rank, returned, metrics, settings)
    if complete:
        absent = ~present[chosen]
        for arr in values.values():
            arr[absent & ~np.isnan(arr)] = 0.0
    return Evaluation(query_ids=[qrels.qids[i] for i in chosen.tolist()], values=values,
                      missed=int(n_q - present.sum()), unjudged=unjudged)


def _sorted_pairs(group: np.ndarray, d: np.ndarray, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """Every row's (query group, document) as one integer, sorted, with the row it came from;
    Fallback when a document is listed twice for a query. The row's number rides in the low bits
    of the sorted integers where they have room (a plain sort is twice as fast as argsort)."""
    n = group.size
    pair = group.astype(np.int64) * max(n_docs, 1) + d
    row_bits = max(int(n - 1).bit_length(), 1)
    largest = (int(group[-1]) + 1) * max(n_docs, 1) - 1  # group is non-decreasing
    if largest.bit_length() + row_bits <= 62:
        packed = np.sort((pair << row_bits) | np.arange(n, dtype=np.int64))
        pairs, rows = packed >> row_bits, packed & ((1 << row_bits) - 1)
    else:
        rows = np.argsort(pair)
        pairs = pair[rows]
    if np.any(pairs[1:] == pairs[:-1]):
        raise Fallback("duplicate document")
    return pairs, rows


def _refuse_twice(starts: np.ndarray, hashes: np.ndarray) -> None:
    """Fallback when a query lists a document twice (query g's rows are starts[g]:starts[g + 1];
    `hashes` each row's id hashed): two equal hashes within a query (`io.trec.repeats_within`).
    Two different ids of one query with the same 64-bit hash would also be sent to the exact
    path, which scores them right."""
    if repeats_within(hashes, starts):
        raise Fallback("duplicate document")


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
    ids = arrow("take", docs, from_numpy(rows if d is None else d[rows]))
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


def _as_arrow(values):
    """Ids (numpy, pandas, pyarrow; strings or integers) as one pyarrow array of strings or
    integers; Fallback for anything else or a missing id."""
    import pyarrow as pa

    if isinstance(values, np.ndarray) and values.dtype.kind in "iu" and _fits_int64(values):
        values = from_numpy(values.astype(np.int64, copy=False))
    elif not isinstance(values, (pa.Array, pa.ChunkedArray)):
        try:  # (uint64 past int64's range stays uint64: its decimal strings are the ids)
            values = pa.array(values, from_pandas=True)
        except (pa.ArrowException, OverflowError, UnicodeError):  # ints and strings mixed, ...
            raise Fallback("ids of mixed or unreadable types") from None
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.null_count:
        raise Fallback("an id is missing")
    if pa.types.is_dictionary(values.type):  # a pandas categorical: its codes are kept
        return values
    if pa.types.is_large_string(values.type) or pa.types.is_string_view(values.type):
        values = cast(values, pa.string())
    if not (pa.types.is_string(values.type) or pa.types.is_integer(values.type)):
        raise Fallback("ids are not strings or integers")
    return values


def _encoded(values, *, first_seen: bool = False):
    """Query or document ids dictionary-encoded: (int32 codes, a string array of the distinct
    ids), in the order they are first seen when `first_seen` (a pandas categorical's own codes
    follow its categories). Integers are encoded as integers and only their distinct values
    become decimal strings, as the dict path makes them."""
    import pyarrow as pa

    encoded = _as_arrow(values)
    if not pa.types.is_dictionary(encoded.type):
        encoded = arrow("dictionary_encode", encoded)
        first_seen = False  # dictionary_encode numbers ids as it meets them
    kind = encoded.dictionary.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_string_view(kind) or pa.types.is_integer(kind)):
        raise Fallback("categories are not strings or integers")
    codes = to_numpy(encoded.indices).astype(np.int32)
    dictionary = encoded.dictionary
    if first_seen:  # renumber the categories that occur, as they first occur
        used, first = np.unique(codes, return_index=True)
        used = used[np.argsort(first)]
        renumber = np.full(len(dictionary), -1, dtype=np.int32)
        renumber[used] = np.arange(used.size, dtype=np.int32)
        codes, dictionary = renumber[codes], arrow("take", dictionary, from_numpy(used))
    if not pa.types.is_string(dictionary.type):
        dictionary = cast(dictionary, pa.string())
    return codes, dictionary


def qrels_from_arrays(query, doc, grade, *, max_grade: int | None = None) -> QrelsColumns:
    """Judgments given as parallel arrays, grouped by query: the columnar path's judgments (built
    once by `Evaluator` for any number of runs). Fallback for what the exact path must judge:
    fractional or negative grades, a (query, document) judged twice."""
    from searcheval.io.trec import _has_duplicates

    if not len(query) == len(doc) == len(grade):
        raise Fallback("columns of different lengths")
    import pyarrow as pa

    grade = whole_grades(grade, max_grade)
    q, qids = _grouped(query, first_seen=True)  # queries in the order the judgments give them
    order = None
    if q.size and np.any(q[1:] < q[:-1]):  # a query's rows apart: grouped
        order = np.argsort(q, kind="stable")
        q, grade = q[order], grade[order]
    starts = np.searchsorted(q, np.arange(len(qids) + 1))
    strings = _as_arrow(doc)
    hashes = None
    if pa.types.is_string(strings.type):  # one id a row, as a file's judgments hold them: no
        # hash table of every id (most of the work with a distinct document per judgment)
        from searcheval.metrics.hashing import string_row_hashes

        docs = strings if order is None else arrow("take", strings, from_numpy(order))
        d = np.arange(len(q), dtype=np.int32)
        # hashed as the compiled join hashes ids: once, for this check and every run's join
        hashes = string_row_hashes(docs)
        _refuse_twice(starts, hashes.view(np.uint64))
    else:
        d, docs = _encoded(strings)
        d = d if order is None else d[order]
        if _has_duplicates(q.astype(np.int64) * max(len(docs), 1) + d):
            raise Fallback("duplicate judgment")
    return QrelsColumns(qids=qids.to_pylist(), docs=docs, q=q, d=d, grade=grade, starts=starts,
                        _hashes=hashes, _qid_array=qids)


def whole_grades(grade, max_grade: int | None = None) -> np.ndarray:
    """Grades as int64; Fallback (for the exact path's refusal) when they are not whole numbers
    in the scale."""
    grade = np.asarray(grade)
    if grade.dtype.kind == "f":
        if not np.isfinite(grade).all() or (grade != np.round(grade)).any():
            raise Fallback("grades are not whole")
    elif grade.dtype.kind not in "iu":
        raise Fallback("grades are not numbers")
    grade = grade.astype(np.int64)
    if grade.size and (grade.min() < 0 or (max_grade is not None and grade.max() > max_grade)):
        raise Fallback("grade outside the scale")
    return grade


def run_from_arrays(query, doc, score, *, rows: int = CHUNK_ROWS) -> list[RunChunk]:
    """A run given as parallel arrays, in chunks of whole queries of about `rows` rows that share
    one dictionary of ids (so judged documents are looked up in it once). Rows of a query apart
    are grouped first. Fallback for scores that are not finite numbers."""
    if not len(query) == len(doc) == len(score):
        raise Fallback("columns of different lengths")
    score = np.asarray(score)
    if score.dtype.kind not in "iuf" or not np.isfinite(score.astype(np.float64)).all():
        raise Fallback("scores are not finite numbers")
    score = score.astype(np.float64, copy=False)
    q, qids = _grouped(query)
    d, docs = _encoded(doc)
    if q.size and np.any(q[1:] < q[:-1]):  # not grouped in first-seen order: group the rows
        order = np.argsort(q, kind="stable")
        q, d, score = q[order], d[order], score[order]
    starts = np.flatnonzero(np.concatenate(([True], q[1:] != q[:-1]))) if q.size else \
        np.zeros(0, dtype=np.int64)
    # each chunk starts at the last query start at or before a multiple of `rows`
    cuts = np.unique(starts[np.searchsorted(starts, np.arange(0, q.size, rows), "right") - 1])
    bounds = [*cuts.tolist(), q.size]
    qid_list = qids.to_pylist()
    return [RunChunk(qids=qid_list, docs=docs, q=q[a:b], d=d[a:b], score=score[a:b],
                     shared_docs=True) for a, b in zip(bounds, bounds[1:])]


def _grouped(values, *, first_seen: bool = False):
    """Query ids as codes: where the rows of each query are together (the usual case), read off
    where the id changes (`io.trec.query_runs`); else dictionary-encoded (`_encoded`, with
    `first_seen`: the queries numbered as they first appear either way)."""
    import pyarrow as pa

    array = _as_arrow(values)
    if not pa.types.is_dictionary(array.type):
        found = query_runs(array)
        if found is not None:
            codes, ids = found
            return codes, ids if pa.types.is_string(ids.type) else cast(ids, pa.string())
    return _encoded(array, first_seen=first_seen)


def _fits_int64(values: np.ndarray) -> bool:
    """Integers that int64 holds (uint64 past its range would wrap negative)."""
    return not (values.dtype == np.uint64 and values.size and
                values.max() > np.iinfo(np.int64).max)


def integer_ids(values) -> np.ndarray | None:
    """`values` (a numpy array, a pandas Series, a pyarrow array) as int64, if they are integers
    that fit; else None."""
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        if type(values).__module__.startswith("pyarrow"):
            import pyarrow as pa

            if not pa.types.is_integer(values.type) or values.null_count:
                return None
            values = values.to_numpy()
        else:  # pandas: a nullable or categorical column is not plain integers
            if getattr(values.dtype, "kind", "O") not in "iu":
                return None
            values = values.to_numpy()
    values = np.asarray(values)
    if values.dtype.kind not in "iu" or values.ndim != 1 or not _fits_int64(values):
        return None
    values = values.astype(np.int64, copy=False)
    if values.size and values.min() == np.iinfo(np.int64).min:  # its negation overflows
        return None
    return values


def _column(frame, name: str):
    try:
        return frame[name]
    except (KeyError, IndexError, TypeError):
        raise Fallback(f"no column {name!r}") from None


def qrels_from_frame(frame, columns: tuple[str, str, str], *,
                     max_grade: int | None = None) -> QrelsColumns:
    """Judgments from a DataFrame (or a pyarrow Table, or a mapping of arrays) by column name."""
    query, doc, grade = (_column(frame, c) for c in columns)
    return qrels_from_arrays(query, doc, np.asarray(grade), max_grade=max_grade)


def run_from_frame(frame, columns: tuple[str, str, str], *,
                   rows: int = CHUNK_ROWS) -> list[RunChunk]:
    """A run from a DataFrame (or a pyarrow Table, or a mapping of arrays) by column name."""
    query, doc, score = (_column(frame, c) for c in columns)
    return run_from_arrays(query, doc, np.asarray(score), rows=rows)

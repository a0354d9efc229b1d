"""The compiled path of `searcheval.Evaluator` for runs and judgments whose ids are integers (a
dict of numpy arrays, a DataFrame or a pyarrow Table with integer id columns): one pass of numba
machine code over the run's rows, then one over the judged queries, each on all cores.

Why compiled: at 20,000 queries x 100 results, numpy's floor (a few array operations per row to
join the run with the judgments, then a few per metric) is about 100 ms; loops in machine code do
the join, the ranks and the metrics in under 20 ms (`searcheval benchmark score`).

The join (`_join`): the run's rows of one query are a segment (where the query id changes).
Blocks of segments run in parallel, each with its own small open-addressing hash table. For each
segment, the query's judgments go into the table stamped with the segment's number (so it is
never cleared), then every row of the segment is looked up in it: a judged document gets its
rank, and a document met twice is reported (the exact path refuses it). Ranks follow the engine's
order: score descending, ties by document id descending as *strings* (the dict path's ids are the
decimal strings of the integers, so 10 < 9); a segment already in that order, as most are, is not
sorted.

The metrics (`_metrics`) follow the engine's conventions (`searcheval.metrics.engine`), computed
per query from its judgments' grades and ranks: nDCG@k, MRR(@k), Recall@k, Precision@k, MAP(@k),
judged@k, R-precision and Success@k. Any other metric is computed by the numpy engine from the
same ranks (`columnar._blocks`), so each of those keeps one definition. The Hypothesis tests hold
every number to the dict engine's within 1e-12 (the sums are added in another order than numpy's
pairwise summation).

Anything the compiled path does not take (a query's rows apart, a document listed twice, a score
that is not finite) raises `Fallback` before anything is returned, and the caller takes the numpy
columnar path, which groups, or the exact path, which refuses with its clear error. numba is
imported only here and in `hashing` (the ids' hashes, which the columnar path's judgments share),
so only tables pay for it (0.3 s, plus one compile after an install).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from searcheval.io.trec import Fallback, QrelsColumns
from searcheval.metrics.columnar import _blocks
from searcheval.metrics.engine import Evaluation, Metric, Settings
from searcheval.metrics.hashing import (_M1, _M2, _MASKS, _PARALLEL, _hash_rows,  # noqa: F401
                                        _mix, _padded_word, _strings, _threads, _word,
                                        string_row_hashes)

# metric kinds the compiled loop computes, by code
KERNEL_KINDS = {"ndcg": 0, "mrr": 1, "recall": 2, "precision": 3, "map": 4, "judged": 5,
                "rprec": 6, "success": 7}
POLICIES = {"one": 0, "zero": 1, "skip": 2}
OK, NOT_FINITE, TWICE, APART = 0, 1, 2, 3
REASONS = {NOT_FINITE: "a score is not a finite number", TWICE: "a document listed twice",
           APART: "the rows of a query apart"}
_HASH = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: multiply, keep the top bits
@dataclass
class IntegerQrels:
    """Judgments with integer ids, prepared once for `_join`: the judged query ids sorted (with
    each one's code in `columns`), and each judgment's document id, in the rows of `columns`."""

    columns: QrelsColumns  # the numpy columnar path's judgments (same rows, same codes)
    keys: np.ndarray  # int64, sorted: the judged query ids
    key_code: np.ndarray  # int64: the code of keys[i] in columns
    doc: np.ndarray  # int64: judged document ids, rows of query c at columns.starts[c]:...


def integer_qrels(query: np.ndarray, doc: np.ndarray, grade) -> IntegerQrels:
    """Judgments whose query and document ids are int64 arrays (`columnar.integer_ids`) made
    ready for the compiled path straight from the numbers, with no hash table or string of
    every id: the same QrelsColumns
    as `columnar.qrels_from_arrays` (queries coded in the order they first come, rows grouped
    by query; the document strings one per row, as a file's judgments hold them). Fallback for
    what the exact path must judge: grades that are not whole, a (query, document) judged
    twice."""
    from searcheval.metrics.columnar import whole_grades

    if not len(query) == len(doc) == len(grade):
        raise Fallback("columns of different lengths")
    grade = whole_grades(grade)
    n = query.size
    change = np.empty(n, dtype=bool)
    change[:1] = True
    np.not_equal(query[1:], query[:-1], out=change[1:])
    heads = np.flatnonzero(change)
    first_ids = query[heads]
    keys, key_code = np.unique(first_ids, return_index=True)
    if keys.size == first_ids.size:  # each query's rows together (the usual table): no sort
        ids_in_order = first_ids
        q = (np.cumsum(change) - 1).astype(np.int32)
    else:  # a query's rows apart: code them in the order they first come, then group
        keys, first, inverse = np.unique(query, return_index=True, return_inverse=True)
        by_first = np.argsort(first, kind="stable")
        key_code = np.empty(keys.size, dtype=np.int64)
        key_code[by_first] = np.arange(keys.size)
        order = np.argsort(key_code[inverse.ravel()], kind="stable")
        query, doc, grade = query[order], doc[order], grade[order]
        q = key_code[inverse.ravel()][order].astype(np.int32)
        ids_in_order = keys[by_first]
    starts = np.zeros(ids_in_order.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(q, minlength=ids_in_order.size), out=starts[1:])
    doc = np.ascontiguousarray(doc, dtype=np.int64)
    if _judged_twice(starts, doc):
        raise Fallback("duplicate judgment")
    import pyarrow as pa  # (its cast makes the decimal strings twice as fast as str())

    qids = pa.array(ids_in_order).cast(pa.string()).to_pylist()
    columns = _IntegerColumns(qids=qids, docs=None, q=q,
                              d=np.arange(n, dtype=np.int32), grade=grade, starts=starts)
    columns.doc_ids = doc
    return IntegerQrels(columns=columns, keys=keys.astype(np.int64),
                        key_code=np.asarray(key_code, dtype=np.int64), doc=doc)


class _IntegerColumns(QrelsColumns):
    """QrelsColumns of integer ids whose document strings (`docs`, one per row) are made on
    first use: the compiled path never reads them, only the numpy paths a run of other ids
    takes."""

    doc_ids: np.ndarray  # int64, one per row

    @property
    def docs(self):
        if self._docs is None:
            import pyarrow as pa

            from searcheval.io.trec import cast, from_numpy

            self._docs = cast(from_numpy(self.doc_ids), pa.string())
        return self._docs

    @docs.setter
    def docs(self, value) -> None:
        self._docs = value


@njit(cache=True)
def _judged_twice(starts, doc):
    """A document judged twice for one query: each query's documents go in a hash table
    stamped with the query's number (never cleared)."""
    widest = 1
    for c in range(starts.size - 1):
        widest = max(widest, starts[c + 1] - starts[c])
    bits = 4
    while (1 << bits) < 2 * widest:
        bits += 1
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    slot_key = np.empty(1 << bits, dtype=np.int64)
    slot_stamp = np.full(1 << bits, -1, dtype=np.int64)
    for c in range(starts.size - 1):
        for j in range(starts[c], starts[c + 1]):
            key = doc[j]
            h = np.int64((np.uint64(key) * _HASH) >> shift)
            while slot_stamp[h] == c:
                if slot_key[h] == key:
                    return True
                h = (h + 1) & mask
            slot_stamp[h] = c
            slot_key[h] = key
    return False


def evaluate(qrels: IntegerQrels, query: np.ndarray, doc: np.ndarray, score,
             metrics: list[Metric], settings: Settings, *, complete: bool | None) -> Evaluation:
    """A run of integer ids scored against `qrels`; `complete` as `evaluate_columns`. Ties are
    broken by the ids' decimal strings."""
    _keep_blocks()
    return _evaluate(qrels.columns, query, doc, score, qrels.keys, qrels.key_code, qrels.doc,
                     _NO_STRINGS, metrics, settings, complete)


def evaluate_coded(columns: QrelsColumns, qids, query, doc, score, metrics: list[Metric],
                   settings: Settings, *, complete: bool | None) -> Evaluation:
    """A run of any ids (strings, a categorical, integers against string judgments) scored
    against `columns` (whose query ids are the pyarrow array `qids`): the run's ids become codes
    (pyarrow's hashing; a categorical's own codes), the judgments' documents are looked up among
    the run's distinct ones, and ties are broken by the ids' UTF-8 bytes, which order as Python's
    strings do."""
    from searcheval.metrics.columnar import _as_arrow, _codes, _encoded, _grouped

    _keep_blocks()
    strings = _string_column(doc)
    if strings is not None:  # no dictionary of the run's ids: hashed where they lie
        return evaluate_hashed(columns, qids, query, strings, score, metrics, settings,
                               complete=complete)
    ids = _as_arrow(doc)
    q, run_qids = _grouped(query)  # where the id changes when the rows are grouped
    d, docs = _encoded(ids)
    key_code = _codes(run_qids, qids)  # each run query's code among the judged, -1 if none
    jdoc = _codes(columns.docs, docs)[columns.d]  # each judgment's document among the run's
    return _evaluate(columns, q, d, score, np.arange(len(run_qids), dtype=np.int64), key_code,
                     jdoc, _strings(docs), metrics, settings, complete)


def evaluate_hashed(columns: QrelsColumns, qids, query, docs, score, metrics: list[Metric],
                    settings: Settings, *, complete: bool | None) -> Evaluation:
    """A run of string ids (`docs` a pyarrow string array, not a dictionary) scored against
    `columns`, without a hash table of the run's ids: each row's id is hashed to 64 bits where
    it lies (`_hash_rows`), the judgments' ids once per set of judgments, and the join matches
    (query, hash); every match is then checked against the ids themselves, and two ids of one
    query with one hash are a Fallback, so a collision never changes a number. Ties are broken
    by the ids' UTF-8 bytes, read in place."""
    from searcheval.metrics.columnar import _codes

    import numba

    q, run_qids = _query_codes(query)
    offsets, data = _strings(docs)
    with _PARALLEL:
        numba.set_num_threads(_threads())
        d = _hash_rows(offsets, data)
        if columns._hashes is None:
            columns._hashes = _hash_rows(*_strings(columns.docs))[columns.d]
    key_code = _codes(run_qids, qids)

    def verify(row_of: np.ndarray) -> None:
        matched = np.flatnonzero(row_of >= 0)
        if not _all_equal(row_of[matched], offsets, data, columns.d[matched].astype(np.int64),
                          *_strings(columns.docs)):
            raise Fallback("two ids with one hash")

    return _evaluate(columns, q, d, score, np.arange(len(run_qids), dtype=np.int64), key_code,
                     columns._hashes, (offsets, data), metrics, settings, complete,
                     own_ids=True, verify=verify)


_NO_STRINGS = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8))
# glibc's malloc keeps blocks up to 32 MiB, and 64 MiB of free heap, for the next call
# (`searcheval.allocator`: 2,000,000 rows of string ids faulted ~10,500 pages in afresh a call)
KEEP_BLOCKS, KEEP_FREE = 32 << 20, 64 << 20


def _keep_blocks() -> None:
    from searcheval import allocator

    allocator.keep_blocks(KEEP_BLOCKS, KEEP_FREE)


def _string_column(values, *, whole: bool = True):
    """`values` as one pyarrow string or large_string array as it lies (a pandas column of
    pyarrow strings is not copied, nor cast; its chunks combined unless not `whole`), or None
    when they are not strings without a gap."""
    import pyarrow as pa

    if not isinstance(values, (pa.Array, pa.ChunkedArray)):
        if getattr(values, "dtype", None) is not None and \
                getattr(values.dtype, "kind", "O") not in "OTU":  # numbers, a categorical
            return None
        try:
            values = pa.array(values, from_pandas=True)
        except (pa.ArrowException, OverflowError, UnicodeError):
            return None
    if isinstance(values, pa.ChunkedArray) and (whole or not values.num_chunks):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if values.null_count or not (pa.types.is_string(values.type)
                                 or pa.types.is_large_string(values.type)):
        return None
    return values


def _query_codes(query):
    """The run's query ids as codes where its rows are grouped by query (read off where the id
    changes, `_mark_new` on each chunk as it lies, without a hash of every row's id) and the ids in order, as
    `columnar._grouped` gives them; `columnar._grouped` itself for anything else."""
    from searcheval.io.trec import cast, compute, from_numpy
    from searcheval.metrics.columnar import _grouped

    import pyarrow as pa

    strings = _string_column(query, whole=False)  # (a pandas column's chunks read in place)
    if strings is None or not len(strings):
        return _grouped(query)
    import numba

    chunks = [c for c in strings.chunks if len(c)] if isinstance(strings, pa.ChunkedArray) \
        else [strings]
    new = np.empty(len(strings), dtype=np.bool_)
    at = 0
    with _PARALLEL:
        numba.set_num_threads(_threads())
        for i, chunk in enumerate(chunks):
            _mark_new(*_strings(chunk), new[at:at + len(chunk)])
            if i:  # the chunk's first id against the one before's last
                new[at] = chunk[0].as_py() != chunks[i - 1][-1].as_py()
            at += len(chunk)
        codes, starts = _number_groups(new)
    # each query's first id, taken from its chunk (a take over the chunked column was 2.5 ms)
    edges = np.cumsum([0] + [len(c) for c in chunks])
    cut = np.searchsorted(starts[:-1], edges)
    first = pa.concat_arrays([chunk.take(from_numpy(starts[cut[i]:cut[i + 1]] - edges[i]))
                              for i, chunk in enumerate(chunks)])
    if not pa.types.is_string(first.type):
        first = cast(first, pa.string())
    if len(compute("unique", first)) != len(first):  # a query's rows apart: grouped there
        return _grouped(query)
    return codes, first


@njit(inline="always")
def _same(offsets, data, i, j, masks):
    """String i equals string j."""
    a, b = offsets[i], offsets[j]
    length = offsets[i + 1] - a
    if offsets[j + 1] - b != length:
        return False
    if length <= 16 and max(a, b) + 16 <= data.size:
        m0, m1 = masks[min(length, 8)], masks[max(length - 8, 0)]
        return (((_word(data, a) ^ _word(data, b)) & m0)
                | ((_word(data, a + 8) ^ _word(data, b + 8)) & m1)) == 0
    for k in range(length):
        if data[np.uint64(a + k)] != data[np.uint64(b + k)]:
            return False
    return True


@njit(cache=True, parallel=True)
def _mark_new(offsets, data, new):
    """new[i]: string i differs from string i - 1 (new[0] True)."""
    n = offsets.size - 1
    masks = _MASKS
    blocks = min(64, n // 65536 + 1)
    for b in prange(blocks):
        for i in range(b * n // blocks, (b + 1) * n // blocks):
            new[i] = i == 0 or not _same(offsets, data, i - 1, i, masks)


@njit(cache=True, parallel=True)
def _number_groups(new):
    """Each row's group (a group starting where new[i]) and where each starts, and the end:
    (codes int32, starts int64 of groups + 1)."""
    n = new.size
    blocks = min(64, n // 65536 + 1)
    size = (n + blocks - 1) // blocks
    counts = np.zeros(blocks + 1, dtype=np.int64)
    for b in prange(blocks):
        found = 0
        for i in range(b * size, min(n, (b + 1) * size)):
            found += new[i]
        counts[b + 1] = found
    base = np.cumsum(counts)
    codes = np.empty(n, dtype=np.int32)
    starts = np.empty(base[-1] + 1, dtype=np.int64)
    for b in prange(blocks):
        c = base[b] - 1
        for i in range(b * size, min(n, (b + 1) * size)):
            if new[i]:
                c += 1
                starts[c] = i
            codes[i] = c
    starts[base[-1]] = n
    return codes, starts


@njit(cache=True, parallel=True)
def _all_equal(rows_a, offsets_a, data_a, rows_b, offsets_b, data_b):
    """String rows_a[i] of the first array equals string rows_b[i] of the second, for every i."""
    masks = _MASKS
    n = rows_a.size
    blocks = min(64, n // 16384 + 1)
    differ = np.zeros(blocks, dtype=np.bool_)
    for b in prange(blocks):
        for i in range(b * n // blocks, (b + 1) * n // blocks):
            a, c = rows_a[i], rows_b[i]
            x, y = offsets_a[a], offsets_b[c]
            length = offsets_a[a + 1] - x
            if offsets_b[c + 1] - y != length:
                differ[b] = True
                break
            if length <= 16 and x + 16 <= data_a.size and y + 16 <= data_b.size:
                m0, m1 = masks[min(length, 8)], masks[max(length - 8, 0)]
                if (((_word(data_a, x) ^ _word(data_b, y)) & m0)
                        | ((_word(data_a, x + 8) ^ _word(data_b, y + 8)) & m1)) != 0:
                    differ[b] = True
                    break
            else:
                for k in range(length):
                    if data_a[np.uint64(x + k)] != data_b[np.uint64(y + k)]:
                        differ[b] = True
                        break
                if differ[b]:
                    break
    return not differ.any()


def _evaluate(columns: QrelsColumns, q, d, score, keys, key_code, jdoc, strings,
              metrics: list[Metric], settings: Settings, complete: bool | None, *,
              sid=None, own_ids=False, verify=None) -> Evaluation:
    n_q = len(columns.qids)
    score = np.asarray(score)
    if score.dtype.kind not in "iuf" or len(score) != len(q) or len(d) != len(q):
        raise Fallback("scores are not numbers, or the columns differ in length")
    import numba

    with _PARALLEL:
        numba.set_num_threads(_threads())
        status, rank, row_of, returned, present, unjudged = _join(
            q, d, None if own_ids else d if sid is None else sid,
            score.astype(np.float64, copy=False), keys,
            key_code, columns.starts, jdoc, n_q, *strings)
    if status != OK:
        raise Fallback(REASONS[status])
    if verify is not None:
        verify(row_of)
    if np.unique(unjudged).size != unjudged.size:  # an unjudged query's rows apart: the numpy
        raise Fallback(REASONS[APART])  # path groups them (and finds a document twice across)
    chosen = np.flatnonzero(present) if complete is False else np.arange(n_q)
    compiled = [m for m in metrics if m.kind in KERNEL_KINDS]
    values: dict[str, np.ndarray] = {}
    if compiled:
        kinds = np.array([KERNEL_KINDS[m.kind] for m in compiled], dtype=np.int64)
        cutoffs = np.array([-1 if m.k is None else m.k for m in compiled], dtype=np.int64)
        with _PARALLEL:
            out = _metrics(chosen, columns.starts, columns.grade, rank, returned, kinds, cutoffs,
                           settings.effective_gain == "exponential",
                           POLICIES[settings.effective_policy], settings.relevance_level)
        values.update({m.name: out[i] for i, m in enumerate(compiled)})
    rest = [m for m in metrics if m.kind not in KERNEL_KINDS]
    if rest:
        values.update(_blocks(columns, chosen, rank, returned, rest, settings))
    values = {m.name: values[m.name] for m in metrics}
    if complete:
        absent = ~present[chosen]
        for arr in values.values():
            arr[absent & ~np.isnan(arr)] = 0.0
    qids = columns.qids
    query_ids = qids if chosen.size == n_q else [qids[i] for i in chosen.tolist()]
    return Evaluation(query_ids=list(query_ids), values=values,
                      missed=int(n_q - np.count_nonzero(present)),
                      unjudged=int(unjudged.size))


# --------------------------------------------------------------------------- the compiled loops


@njit(cache=True)
def _digits(x):
    n = 1
    while x >= 10:
        x //= 10
        n += 1
    return n


@njit(cache=True)
def _string_less(a, b):
    """str(a) < str(b) for int64 a, b (not the smallest int64): '-' sorts before the digits;
    of two digit strings the first differing digit decides, else the shorter is first."""
    if a == b:
        return False
    if (a < 0) != (b < 0):
        return a < 0
    if a < 0:
        a, b = -a, -b
    la, lb = _digits(a), _digits(b)
    pa, pb = a, b
    for _ in range(la - min(la, lb)):
        pa //= 10
    for _ in range(lb - min(la, lb)):
        pb //= 10
    if pa != pb:
        return pa < pb
    return la < lb


@njit(cache=True)
def _bytes_less(a, b, offsets, data):
    """String a < string b, both given by their code in a pyarrow string array (offsets, data):
    byte by byte, unsigned (UTF-8's byte order is the code points' order, Python's)."""
    i, i_end = offsets[a], offsets[a + 1]
    j, j_end = offsets[b], offsets[b + 1]
    while i < i_end and j < j_end:
        if data[i] != data[j]:
            return data[i] < data[j]
        i += 1
        j += 1
    return (i_end - offsets[a]) < (j_end - offsets[b])


@njit(cache=True)
def _before(i, j, score, doc, offsets, data):
    """Row i ranks before row j: higher score, then the greater document id as a string (the
    decimal string of an integer id when there are no `offsets`; string i itself when there is
    no `doc`)."""
    if score[i] != score[j]:
        return score[i] > score[j]
    if doc is None:  # each row's own string (`evaluate_hashed`; numba compiles this case apart)
        return _bytes_less(j, i, offsets, data)
    if offsets.size == 0:
        return _string_less(doc[j], doc[i])
    return _bytes_less(doc[j], doc[i], offsets, data)


@njit(cache=True)
def _order(s, e, score, doc, perm, offsets, data):
    """perm[0:e-s] = the rows s..e-1 in rank order (a merge sort, stable; small segments are
    mostly in order already, and then it is one comparison a row)."""
    n = e - s
    for i in range(n):
        perm[i] = s + i
    width = 1
    tmp = np.empty(n, dtype=np.int64)
    while width < n:
        lo = 0
        while lo < n - width:
            mid = lo + width
            hi = min(lo + 2 * width, n)
            if _before(perm[mid], perm[mid - 1], score, doc, offsets, data):  # else in order
                a, b, k = lo, mid, lo
                while a < mid and b < hi:
                    if _before(perm[b], perm[a], score, doc, offsets, data):
                        tmp[k] = perm[b]
                        b += 1
                    else:
                        tmp[k] = perm[a]
                        a += 1
                    k += 1
                while a < mid:
                    tmp[k] = perm[a]
                    a += 1
                    k += 1
                while b < hi:
                    tmp[k] = perm[b]
                    b += 1
                    k += 1
                for k in range(lo, hi):
                    perm[k] = tmp[k]
            lo += 2 * width
        width *= 2


@njit(cache=True)
def _find(keys, key):
    """The index of `key` in the sorted `keys`, or -1."""
    lo, hi = 0, keys.size
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    if lo < keys.size and keys[lo] == key:
        return lo
    return -1


@njit(cache=True, parallel=True)
def _segments(q):
    """Where each query's rows start (where the id changes), and the end: (segments + 1,)."""
    n = q.size
    blocks = min(64, n // 65536 + 1)
    size = (n + blocks - 1) // blocks
    counts = np.zeros(blocks + 1, dtype=np.int64)
    for b in prange(blocks):
        found = 0
        for i in range(b * size, min(n, (b + 1) * size)):
            if i == 0 or q[i] != q[i - 1]:
                found += 1
        counts[b + 1] = found
    offsets = np.cumsum(counts)
    out = np.empty(offsets[-1] + 1, dtype=np.int64)
    for b in prange(blocks):
        at = offsets[b]
        for i in range(b * size, min(n, (b + 1) * size)):
            if i == 0 or q[i] != q[i - 1]:
                out[at] = i
                at += 1
    out[offsets[-1]] = n
    return out


@njit(cache=True, parallel=True)
def _join(q, d, sid, score, keys, key_code, starts, jdoc, n_q, offsets, data):
    """Every judgment's 0-based rank in the run (inf: not retrieved), the rows each judged query
    returned, which judged queries the run answers, and the ids of the run's unjudged queries
    (one per segment), and the row that matched each judgment (-1: none); or a status other than
    OK, for what the exact path must see. Blocks of segments run on all cores, each with its own
    hash table. `d` is each row's document key (an integer id, a code, a hash of the id), `sid`
    where its id's string is (a code into `offsets`; none: the row's own) for the tie-break."""
    seg = _segments(q)
    n_seg = seg.size - 1
    code = np.empty(n_seg, dtype=np.int64)
    rank = np.full(jdoc.size, np.inf)
    row_of = np.full(jdoc.size, -1, dtype=np.int64)
    returned = np.zeros(n_q, dtype=np.int64)
    blocks = max(1, min(n_seg, 256))
    status = np.zeros(blocks, dtype=np.int64)
    for b in prange(blocks):
        g0, g1 = b * n_seg // blocks, (b + 1) * n_seg // blocks
        need = 16
        for g in range(g0, g1):
            at = _find(keys, q[seg[g]])
            c = -1 if at < 0 else key_code[at]
            code[g] = c
            size = seg[g + 1] - seg[g] + (0 if c < 0 else starts[c + 1] - starts[c])
            need = max(need, 2 * size)
        bits = 4
        while (1 << bits) < need:
            bits += 1
        status[b] = _join_block(q, d, sid, score, seg, g0, g1, code, starts, jdoc, bits, rank,
                                row_of, returned, offsets, data)
    present = np.zeros(n_q, dtype=np.bool_)
    n_unjudged = 0
    for b in range(blocks):
        if status[b] != OK:
            return status[b], rank, row_of, returned, present, code[:0]
    for g in range(n_seg):
        c = code[g]
        if c < 0:
            n_unjudged += 1
        elif present[c]:
            return APART, rank, row_of, returned, present, code[:0]
        else:
            present[c] = True
    unjudged = np.empty(n_unjudged, dtype=np.int64)
    n_unjudged = 0
    for g in range(n_seg):
        if code[g] < 0:
            unjudged[n_unjudged] = q[seg[g]]
            n_unjudged += 1
    return OK, rank, row_of, returned, present, unjudged


@njit(cache=True)
def _join_block(q, d, sid, score, seg, g0, g1, code, starts, jdoc, bits, rank, row_of, returned,
                offsets, data):
    """Segments g0:g1 of `_join`, with a hash table of 2**bits slots: each segment's judgments
    go in stamped with its number (so the table is never cleared), then its rows are looked up
    in rank order."""
    slot_key = np.empty(1 << bits, dtype=np.int64)
    slot_val = np.empty(1 << bits, dtype=np.int64)  # a judgment's row; -1 once its doc is met
    slot_stamp = np.full(1 << bits, -1, dtype=np.int64)  # the segment that filled the slot
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    perm = np.empty(16, dtype=np.int64)
    for g in range(g0, g1):
        s, e = seg[g], seg[g + 1]
        # in rank order already (score descending, ties by id descending as strings)? finite?
        ordered = True
        for i in range(s, e):
            v = score[i]
            if not (v - v == 0.0):  # NaN or infinite
                return NOT_FINITE
            if i > s and not _before(i - 1, i, score, sid, offsets, data):
                ordered = False
        if not ordered:
            if perm.size < e - s:
                perm = np.empty(2 * (e - s), dtype=np.int64)
            _order(s, e, score, sid, perm, offsets, data)
        c = code[g]
        j0, j1 = (0, 0) if c < 0 else (starts[c], starts[c + 1])
        if c >= 0:
            returned[c] = e - s
        for j in range(j0, j1):
            h = np.int64((np.uint64(jdoc[j]) * _HASH) >> shift)
            while slot_stamp[h] == g:
                h = (h + 1) & mask
            slot_stamp[h] = g
            slot_key[h] = jdoc[j]
            slot_val[h] = j
        for p in range(e - s):
            i = s + p if ordered else perm[p]
            key = d[i]
            h = np.int64((np.uint64(key) * _HASH) >> shift)
            while slot_stamp[h] == g and slot_key[h] != key:
                h = (h + 1) & mask
            if slot_stamp[h] != g:  # a document without judgment, met once
                slot_stamp[h] = g
                slot_key[h] = key
                slot_val[h] = -1
            elif slot_val[h] < 0:
                return TWICE
            else:
                rank[slot_val[h]] = p
                row_of[slot_val[h]] = i
                slot_val[h] = -1
    return OK


@njit(cache=True)
def _sort_small(values, n):
    """values[:n] sorted ascending in place: by insertion for a query's few judgments, by numpy's
    sort for many (deep pools judge thousands)."""
    if n > 32:
        values[:n] = np.sort(values[:n])
        return
    for i in range(1, n):
        v = values[i]
        j = i - 1
        while j >= 0 and values[j] > v:
            values[j + 1] = values[j]
            j -= 1
        values[j + 1] = v


@njit(cache=True, parallel=True)
def _metrics(chosen, starts, grades, rank, returned, kinds, cutoffs, exponential, policy, level):
    """out[m, i]: metric m of query chosen[i], from its judgments' grades and ranks; blocks of
    queries on all cores."""
    out = np.empty((kinds.size, chosen.size))
    widest = 1
    deepest = 1
    for i in range(chosen.size):
        widest = max(widest, starts[chosen[i] + 1] - starts[chosen[i]])
        deepest = max(deepest, returned[chosen[i]])
    log2 = np.log2(np.arange(widest) + 2.0)  # the ideal ranking's discounts, by position
    discount = 1.0 / np.log2(np.arange(deepest) + 2.0)  # the run's, by rank
    blocks = max(1, min(chosen.size // 256, 64))
    for b in prange(blocks):
        _metrics_block(b * chosen.size // blocks, (b + 1) * chosen.size // blocks, chosen, starts,
                       grades, rank, returned, kinds, cutoffs, exponential, policy, level, log2,
                       discount, out)
    return out


@njit(cache=True)
def _metrics_block(i0, i1, chosen, starts, grades, rank, returned, kinds, cutoffs, exponential,
                   policy, level, log2, discount, out):
    fill = 1.0 if policy == 0 else (0.0 if policy == 1 else np.nan)
    buf = np.empty(log2.size)
    for i in range(i0, i1):
        c = chosen[i]
        j0, j1 = starts[c], starts[c + 1]
        num_rel = 0
        for j in range(j0, j1):
            if grades[j] >= level:
                num_rel += 1
        for m in range(kinds.size):
            kind = kinds[m]
            k = cutoffs[m]
            cut = np.inf if k < 0 else float(k)
            if kind == 0:  # nDCG@k: gains of the judged in the top k over the ideal's
                dcg = 0.0
                g_n = 0
                for j in range(j0, j1):
                    g = grades[j]
                    if g > 0:
                        # 2^g - 1 as an integer shift (exact, as 2.0 ** g - 1.0 is) below 63
                        gain = (float((1 << g) - 1) if g < 63 else 2.0 ** g - 1.0) \
                            if exponential else float(g)
                        buf[g_n] = -gain
                        g_n += 1
                        if rank[j] < cut:
                            dcg += gain * discount[int(rank[j])]
                _sort_small(buf, g_n)
                idcg = 0.0
                for t in range(min(g_n, k) if k >= 0 else g_n):
                    idcg += -buf[t] / log2[t]
                out[m, i] = fill if idcg == 0.0 else dcg / idcg
            elif kind == 1:  # MRR(@k)
                first = np.inf
                for j in range(j0, j1):
                    if grades[j] >= level and rank[j] < cut and rank[j] < first:
                        first = rank[j]
                out[m, i] = 1.0 / (first + 1.0) if first < np.inf else 0.0
            elif kind == 2 or kind == 3 or kind == 7:  # recall, precision, success
                found = 0
                for j in range(j0, j1):
                    if grades[j] >= level and rank[j] < cut:
                        found += 1
                if kind == 2:
                    out[m, i] = fill if num_rel == 0 else found / num_rel
                elif kind == 3:
                    out[m, i] = found / float(k)
                else:
                    out[m, i] = 1.0 if found > 0 else 0.0
            elif kind == 4:  # MAP(@k): precision at each relevant retrieved, over all relevant
                r_n = 0
                for j in range(j0, j1):
                    if grades[j] >= level and rank[j] < cut:
                        buf[r_n] = rank[j]
                        r_n += 1
                _sort_small(buf, r_n)
                total = 0.0
                for t in range(r_n):
                    total += (t + 1.0) / (buf[t] + 1.0)
                out[m, i] = 0.0 if num_rel == 0 else total / num_rel
            elif kind == 5:  # judged@k: judged share of the top min(k, returned)
                shown = min(returned[c], k)
                top = 0
                for j in range(j0, j1):
                    if rank[j] < cut:
                        top += 1
                out[m, i] = 1.0 if shown <= 0 else top / float(shown)
            else:  # kind 6, R-precision: relevant in the top R, over R
                found = 0
                for j in range(j0, j1):
                    if grades[j] >= level and rank[j] < num_rel:
                        found += 1
                out[m, i] = 0.0 if num_rel == 0 else found / num_rel

"""The columnar path (pyarrow readers, integer codes, chunks of whole queries) gives exactly the
dict engine's numbers on randomized TREC files: ties, unsorted and sorted files, chunk boundaries
inside the file, queries on one side only; and files it does not take (tabs and spaces mixed,
carriage returns, lines of a query apart, a BOM) go through the exact loaders with the same result."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searcheval.io.trec import iter_run_chunks, load_qrels, load_trec_run, read_qrels_columns
from searcheval.metrics.columnar import evaluate_files
from searcheval.metrics.engine import Settings, evaluate

METRICS = ["ndcg@10", "ndcg@3", "mrr", "recall@20", "precision@5", "map", "map@5", "judged@10",
           "rprec", "success@3", "bpref", "err@10", "rbp", "rbp_residual", "abstention"]
doc_ids = st.sampled_from([f"d{i}" for i in range(30)] + ["D1", "é2"])
judgments = st.dictionaries(doc_ids, st.integers(0, 3), min_size=1, max_size=10)
rankings = st.dictionaries(doc_ids, st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 4.25, 9.0]),
                           max_size=20)
qids = st.sampled_from([f"q{i}" for i in range(10)])
collections = st.tuples(st.dictionaries(qids, judgments, min_size=1, max_size=8),
                        st.dictionaries(qids, rankings, min_size=1, max_size=8))


def write(path, qrels, run, *, sort_run: bool, sep: str = " ", bom: bool = False):
    path.mkdir(parents=True, exist_ok=True)
    (path / "qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items()
                                        for d, g in docs.items()), encoding="utf-8")
    lines = []
    for q, docs in run.items():
        items = sorted(docs.items(), key=lambda kv: -kv[1]) if sort_run else list(docs.items())
        lines += [sep.join([q, "Q0", d, str(i), repr(s), "t"]) + "\n"
                  for i, (d, s) in enumerate(items, 1)]
    (path / "run").write_text(("\ufeff" if bom else "") + "".join(lines), encoding="utf-8")


def same(a, b, *, compiled: bool = False):
    """The same queries, counts and numbers: equal to the last bit on the numpy paths; within
    1e-12 from the compiled path of integer ids (`metrics.kernel`), which adds its sums in
    another order than numpy's pairwise summation (NaN in the same places either way)."""
    assert a.query_ids == b.query_ids
    assert a.counts == b.counts
    for name in a.values:
        if compiled:
            np.testing.assert_allclose(a.values[name], b.values[name], rtol=0, atol=1e-12,
                                       err_msg=name)
        else:
            np.testing.assert_array_equal(a.values[name], b.values[name], err_msg=name)


@settings(max_examples=120, deadline=None)
@given(collections, st.booleans(), st.booleans(), st.sampled_from([None, 1, 7]),
       st.sampled_from(["one", "zero", "skip"]))
def test_columnar_equals_the_dict_engine(tmp_path_factory, coll, sort_run, complete, rows, policy):
    qrels, run = coll
    run = {q: r for q, r in run.items() if r}
    if not any(q in qrels for q in run):
        return  # refused: tested in tests/unit/test_cli_score.py
    path = tmp_path_factory.mktemp("c")
    write(path, qrels, run, sort_run=sort_run)
    conventions = Settings(no_relevant=policy)
    # plain files: the columnar readers take them (no fallback to the exact loaders)
    assert len(read_qrels_columns(path / "qrels").q) == sum(map(len, qrels.values()))
    assert sum(c.q.size for c in iter_run_chunks(path / "run", rows=rows or 10**6)) == \
        sum(map(len, run.values()))
    ours = evaluate_files(path / "qrels", path / "run", METRICS, conventions, complete=complete,
                          chunk_rows=rows)
    exact = evaluate(load_qrels(path / "qrels"), load_trec_run(path / "run"), METRICS,
                     conventions, complete=complete)
    same(ours, exact)


@pytest.mark.parametrize("shape", ["tabs", "bom", "apart", "cr"])
def test_files_the_columnar_reader_does_not_take_give_the_same_numbers(tmp_path, shape):
    qrels = {"q1": {"a": 1, "b": 2}, "q2": {"c": 1}}
    run = {"q1": {"a": 1.0, "b": 2.0, "x": 2.0}, "q2": {"c": 0.5}}
    write(tmp_path, qrels, run, sort_run=True, sep="\t" if shape == "tabs" else " ",
          bom=shape == "bom")
    text = (tmp_path / "run").read_text(encoding="utf-8")
    if shape == "apart":  # q1, q2, then q1 again: the lines of q1 are not together
        lines = text.splitlines(keepends=True)
        text = "".join([lines[0], lines[3], *lines[1:3]])
    if shape == "cr":
        text = text.replace("\n", "\r\n")
    (tmp_path / "run").write_text(text, encoding="utf-8", newline="")
    ours = evaluate_files(tmp_path / "qrels", tmp_path / "run", METRICS, complete=False)
    reference = evaluate(qrels, run, METRICS, complete=False)
    same(ours, reference)


def frame(data, value):
    import pandas as pd

    rows = [(q, d, v) for q, docs in data.items() for d, v in docs.items()]
    return pd.DataFrame(rows, columns=["query_id", "doc_id", value])


int_collections = st.tuples(
    st.dictionaries(st.integers(0, 12), st.dictionaries(st.integers(0, 30), st.integers(0, 3),
                                                        min_size=1, max_size=10),
                    min_size=1, max_size=8),
    st.dictionaries(st.integers(0, 12), st.dictionaries(st.integers(0, 30),
                                                        st.sampled_from([0.5, 1.0, 2.0, 9.0]),
                                                        max_size=20), min_size=1, max_size=8))


@settings(max_examples=50, deadline=None)
@given(st.one_of(collections, int_collections), st.sampled_from([None, False, True]),
       st.booleans(), st.booleans())
def test_dataframes_take_the_columnar_path_with_the_dict_engines_numbers(coll, complete, compat,
                                                                        shuffle):
    import searcheval
    from searcheval.metrics import columnar

    qrels, run = coll
    run = {q: r for q, r in run.items() if r}
    if not run:
        return  # an empty DataFrame has no numeric dtype: refused by either path
    qrels_frame, run_frame = frame(qrels, "grade"), frame(run, "score")
    if shuffle:  # by document: the rows of a query apart, which the columnar path groups
        run_frame = run_frame.sort_values("doc_id", kind="stable")
    # integer ids are strings on both sides of the dict path ("10" < "9" in a tie-break)
    qrels = {str(q): {str(d): g for d, g in docs.items()} for q, docs in qrels.items()}
    run = {str(q): {str(d): v for d, v in docs.items()} for q, docs in run.items()}
    conventions = Settings(trec_compat=compat)
    expected = evaluate(qrels, run, METRICS, conventions, complete=complete)
    got = searcheval.evaluate(qrels_frame, run_frame, METRICS, trec_compat=compat,
                              complete=complete)
    same(got, expected, compiled=True)
    # and it was the columnar path, not the dict fallback
    direct = columnar.evaluate_columns(
        columnar.qrels_from_frame(qrels_frame, ("query_id", "doc_id", "grade")),
        columnar.run_from_frame(run_frame, ("query_id", "doc_id", "score")), METRICS,
        conventions, complete=(False if compat else None) if complete is None else complete)
    same(direct, expected)


def long_run(path, queries: int, depth: int = 20):
    """A plain run of `queries` x `depth` lines, many parser batches long."""
    lines = [f"q{q} Q0 d{d} {d + 1} {depth - d} t\n" for q in range(queries) for d in range(depth)]
    (path / "run").write_text("".join(lines), encoding="utf-8")
    (path / "qrels").write_text("".join(f"q{q} 0 d{q % depth} 1\n" for q in range(queries)),
                                encoding="utf-8")
    return lines


@pytest.mark.parametrize("fault", ["duplicate", "bad score", "six columns short"])
def test_a_fault_deep_in_a_long_file_is_the_exact_loaders_refusal(tmp_path, fault):
    """The run is parsed a block of lines at a time (io/trec.py `_run_batches`) and a duplicate is
    found where a chunk is scored: a fault thousands of lines in still ends in the exact loader's
    refusal naming that line, whichever chunk it falls in."""
    from searcheval.errors import InputError

    lines = long_run(tmp_path, 3000)  # 60,000 lines: more than one chunk of 50,000 rows
    at = 55_321  # 0-based: line 55,322, in the second chunk
    q = at // 20
    lines[at] = {"duplicate": f"q{q} Q0 d0 99 0.5 t\n",
                 "bad score": f"q{q} Q0 d1 2 high t\n",
                 "six columns short": f"q{q} Q0 d1 2\n"}[fault]
    (tmp_path / "run").write_text("".join(lines), encoding="utf-8")
    with pytest.raises(InputError) as refused:
        evaluate_files(tmp_path / "qrels", tmp_path / "run", METRICS)
    assert refused.value.line == at + 1


def test_the_run_is_parsed_in_this_thread_and_stopping_early_closes_it(tmp_path):
    """No reader thread (a hand-over per block between two threads waits for a core on a busy
    machine); a caller that stops early (as `score` does on a refusal) leaves no file open."""
    import os
    import threading

    long_run(tmp_path, 10_000)  # 4.4 MB: several blocks of the reader
    before = threading.active_count()
    chunks = iter_run_chunks(tmp_path / "run", rows=1000)
    first = next(chunks)
    assert first.q.size >= 1000
    assert threading.active_count() == before
    opened = {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
              if os.path.exists(f"/proc/self/fd/{fd}")} if os.path.isdir("/proc/self/fd") else set()
    chunks.close()
    if opened:
        assert str(tmp_path / "run") in opened
        still = {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                 if os.path.exists(f"/proc/self/fd/{fd}")}
        assert str(tmp_path / "run") not in still


def table_shapes(frame_, shape: str):
    """The same rows as each table shape the public API takes."""
    import pyarrow as pa

    if shape == "dataframe":
        return frame_
    if shape == "categorical":
        return frame_.astype({"query_id": "category", "doc_id": "category"})
    if shape == "arrow":
        return pa.Table.from_pandas(frame_, preserve_index=False)
    return {c: frame_[c].to_numpy() for c in frame_.columns}  # "arrays"


@settings(max_examples=60, deadline=None)
@given(st.one_of(collections, int_collections), st.sampled_from([None, False, True]),
       st.booleans(), st.sampled_from(["dataframe", "categorical", "arrow", "arrays"]),
       st.sampled_from([1, 3, 50_000]))
def test_an_evaluator_scores_every_table_shape_as_the_dict_engine(coll, complete, compat, shape,
                                                                  rows):
    """Judgments prepared once (`searcheval.Evaluator`) score runs given as DataFrames (plain or
    categorical), pyarrow Tables or dicts of numpy arrays, split into chunks of whole queries of
    `rows` rows, with the dict engine's numbers; the same evaluator scores a second run too."""
    import searcheval
    from searcheval.metrics import columnar

    qrels, run = coll
    run = {q: r for q, r in run.items() if r}
    if not run:
        return
    string_qrels = {str(q): {str(d): g for d, g in docs.items()} for q, docs in qrels.items()}
    string_run = {str(q): {str(d): v for d, v in docs.items()} for q, docs in run.items()}
    conventions = Settings(trec_compat=compat)
    evaluator = searcheval.Evaluator(table_shapes(frame(qrels, "grade"), shape), METRICS,
                                     trec_compat=compat)
    assert evaluator._columnar is not None  # the judgments took the columnar path
    # integer ids (not categorical) are also prepared for the compiled path
    assert (evaluator._integer is not None) == (
        isinstance(next(iter(qrels)), int) and shape != "categorical")
    chunks = columnar.run_from_frame(table_shapes(frame(run, "score"), shape),
                                     ("query_id", "doc_id", "score"), rows=rows)
    assert sum(c.q.size for c in chunks) == sum(map(len, run.values()))
    queries = [set(c.q.tolist()) for c in chunks]  # whole queries: none in two chunks
    assert sum(map(len, queries)) == len(set().union(*queries)) == len(run)
    if rows == 1:  # a chunk a query
        assert len(chunks) == len(run)
    got = columnar.evaluate_columns(evaluator._columnar, chunks, METRICS, conventions,
                                    complete=(False if compat else None)
                                    if complete is None else complete)
    same(got, evaluate(string_qrels, string_run, METRICS, conventions, complete=complete))
    # the public call, and a second run through the same evaluator (its reverse: another order)
    same(evaluator.evaluate(table_shapes(frame(run, "score"), shape), complete=complete),
         evaluate(string_qrels, string_run, METRICS, conventions, complete=complete),
         compiled=True)
    reverse = {q: {d: -v for d, v in docs.items()} for q, docs in string_run.items()}
    reversed_frame = frame({q: {d: -v for d, v in docs.items()} for q, docs in run.items()},
                           "score")
    same(evaluator.evaluate(table_shapes(reversed_frame, shape), complete=complete),
         evaluate(string_qrels, reverse, METRICS, conventions, complete=complete),
         compiled=True)


@pytest.mark.parametrize("n_docs", [7, 2**50])
def test_sorted_pairs_finds_every_row_and_a_document_listed_twice(n_docs):
    """Both ways of sorting (query, document) pairs: the row number packed below the pair when
    it fits in 62 bits, argsort when it does not (2**50 documents)."""
    from searcheval.io.trec import Fallback
    from searcheval.metrics.columnar import _sorted_pairs

    group = np.array([0, 0, 0, 1, 1, 2], dtype=np.int64)
    d = np.array([5, 1, 3, 1, 6, 0], dtype=np.int64)
    pairs, rows = _sorted_pairs(group, d, n_docs)
    assert pairs.tolist() == sorted((group * n_docs + d).tolist())
    assert (group[rows] * n_docs + d[rows]).tolist() == pairs.tolist()
    with pytest.raises(Fallback):
        _sorted_pairs(group, np.array([5, 1, 5, 1, 6, 0]), n_docs)  # d5 twice in query 0


def test_a_dict_of_arrays_with_a_bad_score_is_refused_by_the_exact_path():
    import searcheval
    from searcheval.errors import InputError

    qrels = {"query_id": np.array([1, 1]), "doc_id": np.array([10, 11]), "grade": np.array([1, 0])}
    run = {"query_id": np.array([1, 1]), "doc_id": np.array([10, 11]),
           "score": np.array([0.5, np.nan])}
    with pytest.raises(InputError, match="finite scores in column 'score'"):
        searcheval.Evaluator(qrels).evaluate(run)
    with pytest.raises(InputError, match="missing column"):
        searcheval.evaluate(qrels, {"qid": np.array([1]), "doc_id": np.array([10]),
                                    "score": np.array([1.0])})


@pytest.mark.parametrize("parser", ["c", "pyarrow"])
def test_work_per_chunk_is_in_proportion_to_the_chunk_not_the_judgments(tmp_path, monkeypatch,
                                                                       parser):
    """Streaming a run against many judged queries, no chunk hashes more ids than its own (a
    million judged queries made scoring quadratic once; a hash table of every id of the run was
    most of the work with an id per row): each chunk's ids are hashed once, the judgments' once
    for the whole run. 40,000 judged queries, 200,000 lines; chunks of about 100 rows asked for
    (the C parser reads 100 x 40 bytes at a time, pyarrow's batches are 256 KiB, about 11,000
    rows). The C parser hashes each id as it reads it: then the scorer hashes nothing."""
    from searcheval.io import trec
    from searcheval.metrics import columnar

    if parser == "pyarrow":
        monkeypatch.setattr(trec, "_native", None)
    else:
        assert trec._native is not None  # built by make install (setup.py)
    long_run(tmp_path, 40_000, depth=5)
    chunks = list(iter_run_chunks(tmp_path / "run", rows=100))
    assert len(chunks) >= 8 and sum(c.q.size for c in chunks) == 200_000
    hashed: list[int] = []
    real = columnar.string_hashes

    def spy(strings):
        hashed.append(len(strings))
        return real(strings)

    monkeypatch.setattr(columnar, "string_hashes", spy)
    ours = evaluate_files(tmp_path / "qrels", tmp_path / "run", ["ndcg@10"], chunk_rows=100)
    assert len(ours.query_ids) == 40_000
    if parser == "c":
        assert hashed == []  # each id hashed once, by the parser
        assert all(c.hashes is not None and c.hashes.size == c.q.size for c in chunks)
        assert all(np.array_equal(c.hashes, real(c.docs)) for c in chunks[:3])
    else:
        assert sorted(hashed) == sorted(c.q.size for c in chunks)  # each chunk's ids once


long_ids = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF,
                                 blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")),
                   min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(st.lists(long_ids, min_size=2, max_size=25, unique=True), st.data())
def test_ids_of_any_length_give_the_dict_engines_numbers(tmp_path_factory, ids, data):
    """Document ids of 1 to 40 characters, UTF-8 of 1 to 3 bytes each (the file path hashes them
    eight bytes at a time: a word, two, five), ties among them, chunk boundaries anywhere."""
    qrels = data.draw(st.dictionaries(qids, st.dictionaries(st.sampled_from(ids),
                                                            st.integers(0, 3), min_size=1,
                                                            max_size=8), min_size=1, max_size=5))
    run = data.draw(st.dictionaries(qids, st.dictionaries(st.sampled_from(ids),
                                                          st.sampled_from([0.5, 1.0, 2.0]),
                                                          min_size=1, max_size=12),
                                    min_size=1, max_size=5))
    if not any(q in qrels for q in run):
        return
    path = tmp_path_factory.mktemp("ids")
    write(path, qrels, run, sort_run=data.draw(st.booleans()))
    rows = data.draw(st.sampled_from([1, 5, 10**6]))
    ours = evaluate_files(path / "qrels", path / "run", METRICS, complete=False, chunk_rows=rows)
    same(ours, evaluate(qrels, run, METRICS, complete=False))


@settings(deadline=None)
@given(st.lists(long_ids, min_size=1, max_size=60, unique=True), st.integers(0, 5))
def test_string_hashes_are_the_strings(ids, skip):
    """Equal ids hash equal wherever they sit in an array (a slice too); these distinct ones
    hash apart."""
    import pyarrow as pa

    from searcheval.io.trec import string_hashes

    whole = pa.array(["x" * skip, *ids, *ids])
    hashes = string_hashes(whole.slice(1))
    assert hashes[:len(ids)].tolist() == hashes[len(ids):].tolist()
    assert len(set(hashes[:len(ids)].tolist())) == len(ids)


def test_ids_with_one_hash_are_scored_by_the_exact_path(tmp_path, monkeypatch):
    """Two different ids of one query with the same hash (forced here: every id hashes to its
    length) are sent to the exact path: the numbers stay the dict engine's."""
    import searcheval.io.trec as trec
    from searcheval.metrics import columnar

    def by_length(strings):
        offsets = np.asarray(strings.value_lengths() if hasattr(strings, "value_lengths")
                             else [len(s.as_py().encode()) for s in strings])
        return offsets.astype(np.uint64)

    monkeypatch.setattr(columnar, "string_hashes", by_length)
    monkeypatch.setattr(trec, "string_hashes", by_length)
    qrels = {"q1": {"ab": 2, "cd": 0, "x": 1}, "q2": {"ef": 1}}
    run = {"q1": {"ab": 1.0, "zz": 3.0, "cd": 2.0}, "q2": {"gh": 1.0, "ef": 0.5}}
    write(tmp_path, qrels, run, sort_run=True)
    same(evaluate_files(tmp_path / "qrels", tmp_path / "run", METRICS, complete=False),
         evaluate(qrels, run, METRICS, complete=False))


def test_string_hashes_of_a_long_array_are_those_of_its_parts():
    """Past HASH_BLOCK strings the hashes are computed a block at a time: the same values."""
    import pyarrow as pa

    from searcheval.io import trec

    strings = pa.array([f"D{i * 7919 % 100003}x" * (1 + i % 3) for i in range(trec.HASH_BLOCK + 999)])
    whole = trec.string_hashes(strings)
    for at in (0, 1, trec.HASH_BLOCK - 1, trec.HASH_BLOCK, len(strings) - 1):
        assert whole[at] == trec.string_hashes(strings.slice(at, 1))[0]
    assert len(set(whole.tolist())) == len(set(strings.to_pylist()))


@settings(deadline=None, max_examples=200)
@given(st.lists(st.text(max_size=40), max_size=60), st.integers(0, 5),
       st.sampled_from(["string", "large_string"]))
def test_the_c_hashes_are_numpys(ids, skip, kind):
    """The C loop (`searcheval/_native.c`) and numpy's (`numpy_string_hashes`, for an install
    without a compiler) give every string the same hash: any text (empty, multi-byte, past a
    word), in a slice of an array, with 32- or 64-bit offsets."""
    import pyarrow as pa

    from searcheval.io import trec

    assert trec._native is not None  # built by make install (setup.py)
    whole = pa.array(["x" * skip, *ids], type=getattr(pa, kind)()).slice(1)
    c = trec.string_hashes(whole)
    assert c.dtype == np.uint64 and c.size == len(ids)
    numpy_hashes = trec.numpy_string_hashes(whole if kind == "string"
                                            else whole.cast(pa.string()))
    assert c.tolist() == numpy_hashes.tolist()


def test_the_c_hashes_refuse_offsets_past_the_data():
    """Buffers that do not match are an error, never a read past the end."""
    from searcheval import _native

    offsets = np.array([0, 3, 99], dtype=np.int32).tobytes()
    with pytest.raises(ValueError, match="past the data"):
        _native.string_hashes(offsets, b"abc", 0, 2, 4)
    with pytest.raises(ValueError, match="rows asked for"):
        _native.string_hashes(offsets, b"abc", 1, 2, 4)

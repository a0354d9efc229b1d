"""The compiled path of `searcheval.Evaluator` for integer ids (`searcheval.metrics.kernel`):
the dict engine's numbers (within 1e-12: its sums are added in another order) on randomized
runs with ties, unsorted rows, negative and 19-digit ids, unjudged queries and every convention;
ids tie-broken as the decimal strings the dict path sees; and what it does not take (a query's
rows apart, a document twice, a score that is not finite) handed to the paths that group or
refuse, with their results."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searcheval.io.trec import Fallback
from searcheval.metrics import kernel
from searcheval.metrics.engine import Settings, evaluate, parse_metrics

METRICS = ["ndcg@10", "ndcg@3", "mrr", "mrr@2", "recall@20", "precision@5", "map", "map@5",
           "judged@10", "rprec", "success@3", "bpref", "err@10", "rbp", "rbp_residual",
           "abstention"]
INT64 = st.integers(-2**63 + 1, 2**63 - 1)
# ids that tie-break differently as numbers and as strings (9 < 10 but "10" < "9"), negatives
doc_ids = st.one_of(st.sampled_from([0, 1, 2, 9, 10, 11, 19, 100, 101, -1, -10, -9]),
                    st.integers(-2**62, 2**62))
query_ids = st.sampled_from([0, 1, 7, 12, 10**18, -3])
scores = st.sampled_from([0.5, 1.0, 1.5, 2.0, 9.0, -3.0])
collections = st.tuples(
    st.dictionaries(query_ids, st.dictionaries(doc_ids, st.integers(0, 3), min_size=1,
                                               max_size=10), min_size=1, max_size=6),
    st.dictionaries(query_ids, st.dictionaries(doc_ids, scores, min_size=1, max_size=25),
                    min_size=1, max_size=6))


def rows(data: dict, order: str, rng) -> list[tuple]:
    """(query, document, value) rows, each query's rows together: best first ("sorted", ties
    by id as a string, descending), as given ("given") or shuffled within the query."""
    out = []
    for query, docs in data.items():
        items = list(docs.items())
        if order == "sorted":
            items.sort(key=lambda kv: (kv[1], str(kv[0])), reverse=True)
        elif order == "shuffled":
            items = [items[i] for i in rng.permutation(len(items))]
        out += [(query, doc, val) for doc, val in items]
    return out


def arrays(data: dict, value: str, order: str, rng) -> dict:
    """`rows` as parallel int64 arrays (float64 scores)."""
    q, d, v = zip(*rows(data, order, rng)) if data else ((), (), ())
    return {"query_id": np.array(q, dtype=np.int64), "doc_id": np.array(d, dtype=np.int64),
            value: np.array(v, dtype=np.float64 if value == "score" else np.int64)}


def strings(data: dict) -> dict:
    return {str(q): {str(d): v for d, v in docs.items()} for q, docs in data.items()}


def close(got, expected):
    assert got.query_ids == expected.query_ids
    assert got.counts == expected.counts
    for name in expected.values:
        np.testing.assert_allclose(got.values[name], expected.values[name], rtol=0, atol=1e-12,
                                   err_msg=name)


@settings(max_examples=40, deadline=None)
@given(INT64, INT64)
def test_integers_compare_as_their_decimal_strings(a, b):
    assert kernel._string_less(a, b) == (str(a) < str(b))


@settings(max_examples=150, deadline=None)
@given(collections, st.sampled_from(["sorted", "given", "shuffled"]),
       st.sampled_from([None, False, True]), st.booleans(),
       st.sampled_from(["one", "zero", "skip"]), st.sampled_from(["exponential", "linear"]),
       st.sampled_from([1, 2]), st.integers(0, 2**16))
def test_the_compiled_path_gives_the_dict_engines_numbers(coll, order, complete, compat, policy,
                                                          gain, level, seed):
    import searcheval

    qrels, run = coll
    conventions = dict(trec_compat=compat, no_relevant=policy, gain=gain, relevance_level=level)
    run_arrays = arrays(run, "score", order, np.random.default_rng(seed))
    evaluator = searcheval.Evaluator(arrays(qrels, "grade", "given", None), METRICS,
                                     **conventions)
    assert evaluator._integer is not None
    chosen = (False if compat else None) if complete is None else complete
    expected = evaluate(strings(qrels), strings(run), METRICS, Settings(**conventions),
                        complete=complete)
    # the compiled path itself (it raises Fallback rather than return anything else)
    got = kernel.evaluate(evaluator._integer, run_arrays["query_id"], run_arrays["doc_id"],
                          run_arrays["score"], parse_metrics(METRICS),
                          Settings(**conventions), complete=chosen)
    close(got, expected)
    close(evaluator.evaluate(run_arrays, complete=complete), expected)  # the public call


def test_ties_are_broken_by_the_ids_as_strings_a_known_answer():
    """Documents 9 and 10 share a score: as strings "9" > "10", so 9 ranks first (descending).
    The only relevant document is 10, at rank 2: MRR = 1/2 (by number, 10 would rank first and
    MRR would be 1). nDCG@10 (linear gain, grade 1) = (1 / log2(3)) / (1 / log2(2)) = 0.6309."""
    import searcheval

    qrels = {"query_id": np.array([5]), "doc_id": np.array([10]), "grade": np.array([1])}
    run = {"query_id": np.array([5, 5]), "doc_id": np.array([10, 9]),
           "score": np.array([1.0, 1.0])}
    ev = searcheval.Evaluator(qrels, ["mrr", "ndcg@10"], trec_compat=True)
    assert ev._integer is not None
    means = ev.evaluate(run).means
    assert means["mrr"] == 0.5
    assert means["ndcg@10"] == pytest.approx(1 / np.log2(3), abs=1e-15)


def _judged(qrels):
    import searcheval

    return searcheval.Evaluator(qrels, ["mrr", "recall@20"], trec_compat=True)


QRELS = {"query_id": np.array([1, 1, 2]), "doc_id": np.array([10, 11, 20]),
         "grade": np.array([1, 1, 1])}


def test_rows_of_a_query_apart_go_the_numpy_path_which_groups_them():
    """Query 1's rows are split by query 2's: the compiled path declines; the numpy path groups
    them: query 1 finds 11 (rank 1) and 10 (rank 2), query 2 finds 20 at rank 1."""
    run = {"query_id": np.array([1, 2, 1]), "doc_id": np.array([11, 20, 10]),
           "score": np.array([3.0, 1.0, 2.0])}
    ev = _judged(QRELS)
    with pytest.raises(Fallback, match="apart"):
        kernel.evaluate(ev._integer, run["query_id"], run["doc_id"], run["score"],
                        parse_metrics(["mrr"]), Settings(trec_compat=True), complete=False)
    assert ev.evaluate(run).means == {"mrr": 1.0, "recall@20": 1.0}


@pytest.mark.parametrize("bad, message", [
    ({"doc_id": np.array([10, 10, 20])}, "twice"),
    ({"score": np.array([1.0, np.inf, 1.0])}, "finite"),
])
def test_a_document_twice_or_a_bad_score_is_the_exact_paths_refusal(bad, message):
    from searcheval.errors import InputError

    run = {"query_id": np.array([1, 1, 2]), "doc_id": np.array([10, 11, 20]),
           "score": np.array([1.0, 0.5, 1.0])} | bad
    ev = _judged(QRELS)
    with pytest.raises(Fallback, match=message):
        kernel.evaluate(ev._integer, run["query_id"], run["doc_id"], run["score"],
                        parse_metrics(["mrr"]), Settings(), complete=False)
    with pytest.raises(InputError):
        ev.evaluate(run)


def test_long_queries_grow_the_hash_table_and_unsorted_ones_are_sorted():
    """One query of 5,000 rows (beyond the smallest table) in reverse order: relevant document
    4999 has the highest score, so it is rank 1 (MRR 1); document 0, the lowest, is rank 5000:
    recall@20 = 1/2, map = (1/1 + 2/5000) / 2 = 0.5002."""
    import searcheval

    docs = np.arange(5000)
    qrels = {"query_id": np.array([3, 3]), "doc_id": np.array([4999, 0]),
             "grade": np.array([1, 1])}
    run = {"query_id": np.full(5000, 3), "doc_id": docs, "score": docs / 10.0}
    means = searcheval.Evaluator(qrels, ["mrr", "recall@20", "map"]).evaluate(run).means
    assert means["mrr"] == 1.0
    assert means["recall@20"] == 0.5
    assert means["map"] == pytest.approx((1 + 2 / 5000) / 2, abs=1e-15)


def test_dicts_and_files_never_import_numba_and_threads_share_the_compiled_path_safely(tmp_path):
    """numba (0.3 s to import) is loaded only for tables (dicts, and `searcheval score` on files,
    never pay for it); and eight threads scoring at once get the single-threaded numbers (numba's
    workqueue threading layer aborts the process when two threads enter it at once: the compiled
    path holds a lock)."""
    (tmp_path / "qrels").write_text("a 0 x 1\na 0 y 0\n")
    (tmp_path / "run").write_text("a Q0 y 1 2.0 t\na Q0 x 2 1.0 t\n")
    code = f"""
import sys, numpy as np
from concurrent.futures import ThreadPoolExecutor
import searcheval
from searcheval.metrics.columnar import evaluate_files
from searcheval.metrics.engine import parse_metrics
q, r = {{"a": {{"x": 1, "y": 0}}}}, {{"a": {{"y": 2.0, "x": 1.0}}}}
assert searcheval.evaluate(q, r, ["mrr"]).means == {{"mrr": 0.5}}
files = evaluate_files({str(tmp_path / "qrels")!r}, {str(tmp_path / "run")!r},
                       parse_metrics(["mrr"]))
assert files.means == {{"mrr": 0.5}}
assert "numba" not in sys.modules, "numba imported for dicts or files"
rng = np.random.default_rng(1)
qrels = {{"query_id": np.repeat(np.arange(2000), 5), "doc_id": rng.integers(0, 50, 10000) * 7919
         + np.tile(np.arange(5), 2000), "grade": rng.integers(0, 4, 10000)}}
run = {{"query_id": np.repeat(np.arange(2000), 30), "doc_id": np.tile(np.arange(30), 2000) * 7919
       + np.tile(np.arange(30) % 5, 2000), "score": rng.random(60000)}}
ev = searcheval.Evaluator(qrels, ["ndcg@10", "map"])
assert "numba" in sys.modules
alone = ev.evaluate(run).means
with ThreadPoolExecutor(8) as pool:
    together = list(pool.map(lambda _: ev.evaluate(run).means, range(16)))
assert all(m == alone for m in together), together
import numba
assert numba.threading_layer() == "workqueue"
print("ok", alone)
"""
    import os

    # workqueue: the layer every numba has (omp or tbb only where their libraries are)
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok")


string_docs = st.sampled_from(["d1", "d2", "d9", "d10", "d11", "D1", "é2", "e2", "d", "", "x" * 40])
string_collections = st.tuples(
    st.dictionaries(st.sampled_from(["q1", "q2", "q10", "Q", "ü"]),
                    st.dictionaries(string_docs, st.integers(0, 3), min_size=1, max_size=8),
                    min_size=1, max_size=5),
    st.dictionaries(st.sampled_from(["q1", "q2", "q10", "Q", "ü", "q3"]),
                    st.dictionaries(string_docs, scores, min_size=1, max_size=11),
                    min_size=1, max_size=6))


@settings(max_examples=120, deadline=None)
@given(string_collections, st.sampled_from(["sorted", "given", "shuffled"]),
       st.sampled_from(["strings", "categorical", "arrow"]), st.sampled_from([None, False, True]),
       st.booleans(), st.integers(0, 2**16))
def test_string_and_categorical_ids_take_the_compiled_path_as_codes(coll, order, shape, complete,
                                                                   compat, seed):
    """Ids as strings (pandas' own string columns), categoricals or a pyarrow Table are coded,
    and their ties broken by the UTF-8 bytes of the ids: "d10" < "d9", "D1" < "d1" < "é2", the
    empty id first."""
    import pandas as pd
    import pyarrow as pa

    import searcheval

    qrels, run = coll
    q_rows = rows(qrels, "given", None)
    r_rows = rows(run, order, np.random.default_rng(seed))
    run_frame = pd.DataFrame(r_rows, columns=["query_id", "doc_id", "score"])
    qrels_frame = pd.DataFrame(q_rows, columns=["query_id", "doc_id", "grade"])
    if shape == "categorical":
        run_frame = run_frame.astype({"query_id": "category", "doc_id": "category"})
    table = pa.Table.from_pandas(run_frame, preserve_index=False) if shape == "arrow" \
        else run_frame
    evaluator = searcheval.Evaluator(qrels_frame, METRICS, trec_compat=compat)
    assert evaluator._integer is None and evaluator._columnar is not None
    expected = evaluate(qrels, run, METRICS, Settings(trec_compat=compat), complete=complete)
    qids = pa.array(evaluator._columnar.qids, type=pa.string())
    got = kernel.evaluate_coded(evaluator._columnar, qids, table["query_id"], table["doc_id"],
                                np.asarray(table["score"]), parse_metrics(METRICS),
                                Settings(trec_compat=compat),
                                complete=(False if compat else None) if complete is None
                                else complete)
    close(got, expected)
    close(evaluator.evaluate(table, complete=complete), expected)


def test_string_ties_a_known_answer():
    """"d10" and "d9" share a score; as strings "d9" > "d10", so d9 ranks first: the relevant
    d10 is at rank 2 and MRR = 1/2."""
    import pandas as pd

    import searcheval

    qrels = pd.DataFrame({"query_id": ["q"], "doc_id": ["d10"], "grade": [1]})
    run = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["d10", "d9"], "score": [1.0, 1.0]})
    assert searcheval.Evaluator(qrels, ["mrr"]).evaluate(run).means == {"mrr": 0.5}


def test_a_deep_pool_of_judgments_a_known_answer():
    """2,000 judged documents for one query (beyond the small sorts), all relevant (grade 1),
    returned in reverse id order so document 1999 is rank 1 ... 0 is rank 2000: every one is
    found at its place, so MAP = 1 and nDCG@10 = 1 (linear gain: the top 10 all gain 1, as the
    ideal's)."""
    import searcheval

    ids = np.arange(2000)
    qrels = {"query_id": np.zeros(2000, dtype=np.int64), "doc_id": ids,
             "grade": np.ones(2000, dtype=np.int64)}
    run = {"query_id": np.zeros(2000, dtype=np.int64), "doc_id": ids, "score": ids * 1.0}
    means = searcheval.Evaluator(qrels, ["map", "ndcg@10"], gain="linear").evaluate(run).means
    assert means["map"] == pytest.approx(1.0, abs=1e-12)
    assert means["ndcg@10"] == pytest.approx(1.0, abs=1e-12)


def test_an_unjudged_querys_rows_apart_with_a_document_twice_is_refused():
    """Query 9 (unjudged) lists document 5 in two separate runs of rows: one query, one document
    twice, which the exact path refuses. The compiled path sees each run of rows alone, so it
    must decline a query met twice (found by review: it had returned numbers)."""
    import searcheval
    from searcheval.errors import InputError

    run = {"query_id": np.array([9, 1, 9]), "doc_id": np.array([5, 10, 5]),
           "score": np.array([1.0, 1.0, 2.0])}
    ev = _judged(QRELS)
    with pytest.raises(Fallback, match="apart"):
        kernel.evaluate(ev._integer, run["query_id"], run["doc_id"], run["score"],
                        parse_metrics(["mrr"]), Settings(), complete=False)
    with pytest.raises(InputError, match="given twice"):
        ev.evaluate(run)
    frame_run = {"query_id": np.array(["z", "a", "z"]), "doc_id": np.array(["x", "x", "x"]),
                 "score": np.array([1.0, 2.0, 3.0])}
    with pytest.raises(InputError, match="given twice"):
        searcheval.Evaluator({"query_id": np.array(["a"]), "doc_id": np.array(["x"]),
                              "grade": np.array([1])}, ["mrr"]).evaluate(frame_run)


def test_ids_the_numpy_readers_once_mangled_give_the_dict_engines_numbers():
    """uint64 ids past int64's range keep their decimal strings (they had wrapped negative: the
    tie of 2**63+5 and 10 broke the wrong way); ids mixing ints and strings, and columns of
    different lengths, go to the exact path (they had raised pyarrow's and numpy's errors)."""
    import searcheval
    from searcheval.errors import InputError

    big = 2**63 + 5
    qrels = {"query_id": np.array([big], dtype=np.uint64), "doc_id": np.array([10], np.uint64),
             "grade": np.array([1])}
    run = {"query_id": np.array([big, big], dtype=np.uint64),
           "doc_id": np.array([big, 10], dtype=np.uint64), "score": np.array([1.0, 1.0])}
    ev = searcheval.Evaluator(qrels, ["mrr"]).evaluate(run)
    # "9223372036854775813" > "10" as strings: it ranks first, the relevant 10 second: MRR 1/2
    assert ev.query_ids == [str(big)] and ev.values["mrr"].tolist() == [0.5]
    mixed = {"query_id": np.array([1, "1"], dtype=object), "doc_id": np.array(["a", "b"]),
             "score": np.array([1.0, 2.0])}
    mixed_qrels = {"query_id": np.array([1, "1"], dtype=object), "doc_id": np.array(["a", "b"]),
                   "grade": np.array([1, 0])}
    # the dict path reads both as query "1": b (score 2, grade 0) first, a second: MRR 1/2
    assert searcheval.Evaluator(mixed_qrels, ["mrr"]).evaluate(mixed).means == {"mrr": 0.5}
    for short in ({"doc_id": np.array([10])}, {"score": np.array([1.0])}):
        uneven = {"query_id": np.array([1, 1]), "doc_id": np.array([10, 11]),
                  "score": np.array([1.0, 2.0])} | short
        with pytest.raises(InputError, match="one length"):
            _judged(QRELS).evaluate(uneven)


string_ids = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF,
                                   blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")),
                     min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(st.lists(string_ids, min_size=2, max_size=20, unique=True), st.data(),
       st.sampled_from([None, False, True]), st.booleans())
def test_string_ids_hashed_in_place_give_the_dict_engines_numbers(ids, data, complete, compat):
    """A DataFrame of string ids takes the hashed join (`kernel.evaluate_hashed`): each row's id
    hashed where it lies, ties broken by the ids' bytes. Ids of 1 to 30 characters (1 to 3 bytes
    each), ties, unsorted rows, unjudged queries: the dict engine's numbers."""
    import pandas as pd

    import searcheval

    qids = st.sampled_from(["q1", "q2", "q10", "é"])
    qrels = data.draw(st.dictionaries(qids, st.dictionaries(st.sampled_from(ids),
                                                            st.integers(0, 3), min_size=1,
                                                            max_size=8), min_size=1, max_size=4))
    run = data.draw(st.dictionaries(qids, st.dictionaries(st.sampled_from(ids), scores,
                                                          min_size=1, max_size=15),
                                    min_size=1, max_size=4))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    order = data.draw(st.sampled_from(["sorted", "given", "shuffled"]))
    run_frame = pd.DataFrame(rows(run, order, rng), columns=["query_id", "doc_id", "score"])
    qrels_frame = pd.DataFrame(rows(qrels, "given", rng), columns=["query_id", "doc_id", "grade"])
    conventions = Settings(trec_compat=compat)
    got = searcheval.Evaluator(qrels_frame, METRICS, trec_compat=compat).evaluate(
        run_frame, complete=complete)
    expected = evaluate(qrels, run, METRICS, conventions, complete=complete)
    assert got.query_ids == expected.query_ids and got.counts == expected.counts
    for name in METRICS:
        np.testing.assert_allclose(got.values[name], expected.values[name], rtol=0, atol=1e-12,
                                   err_msg=name)


@pytest.mark.parametrize("run", [
    {"q1": {"ab": 1.0, "cd": 2.0}},  # two ids of one query with one hash: a document "twice"
    {"q1": {"cd": 1.0, "x": 0.5}},  # a judged id's hash met on another id: the check refuses
])
def test_string_ids_with_one_hash_are_scored_by_the_exact_numbers(monkeypatch, run):
    """Collisions forced (every id hashes to its length): the hashed join hands them on
    (`Fallback`), and the numbers stay the dict engine's."""
    import pandas as pd

    import searcheval

    def by_length(offsets, data):
        return np.diff(offsets).astype(np.int64)

    from searcheval.metrics import hashing

    # the run's ids (kernel) and the judgments' (hashing, when the Evaluator is built) alike
    monkeypatch.setattr(kernel, "_hash_rows", by_length)
    monkeypatch.setattr(hashing, "_hash_rows", by_length)
    qrels = {"q1": {"ab": 2, "y": 1}}
    frame = pd.DataFrame(rows(run, "given", None), columns=["query_id", "doc_id", "score"])
    qrels_frame = pd.DataFrame(rows(qrels, "given", None), columns=["query_id", "doc_id", "grade"])
    import pyarrow as pa

    from searcheval.metrics.columnar import _as_arrow

    evaluator = searcheval.Evaluator(qrels_frame, METRICS)
    columns = evaluator._columnar
    with pytest.raises(Fallback):
        kernel.evaluate_hashed(columns, pa.array(columns.qids, type=pa.string()),
                               frame["query_id"], _as_arrow(frame["doc_id"]),
                               frame["score"].to_numpy(), parse_metrics(METRICS), Settings(),
                               complete=None)
    got = evaluator.evaluate(frame)
    expected = evaluate(qrels, run, METRICS)
    for name in METRICS:
        np.testing.assert_allclose(got.values[name], expected.values[name], rtol=0, atol=1e-12)

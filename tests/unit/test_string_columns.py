"""String id columns on the compiled path (`searcheval.metrics.kernel`): pandas' pyarrow strings
(large_string, in chunks) are read as they lie, a query's rows apart are grouped, and every number
is the dict engine's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import searcheval
from searcheval.metrics import kernel
from searcheval.metrics.columnar import _grouped
from searcheval.metrics.engine import Settings, parse_metrics
from searcheval.metrics.engine import evaluate as engine_evaluate

METRICS = ["ndcg@10", "mrr", "recall@20", "precision@5", "map", "bpref"]


def _frames(seed: int):
    rng = np.random.default_rng(seed)
    rows, judged = [], []
    for i in range(40):
        docs = rng.choice(60, size=25, replace=False)
        scores = np.round(rng.random(25), 1)  # ties
        rows += [(f"q{i}", f"d{d}", float(s)) for d, s in zip(docs, scores)]
        judged += [(f"q{i}", f"d{d}", int(g)) for d, g in
                   zip(rng.choice(60, size=8, replace=False), rng.integers(0, 4, 8))]
    run = pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])
    qrels = pd.DataFrame(judged, columns=["query_id", "doc_id", "grade"])
    as_dict = {}
    for q, d, s in rows:
        as_dict.setdefault(q, {})[d] = s
    qrels_dict = {}
    for q, d, g in judged:
        qrels_dict.setdefault(q, {})[d] = g
    return qrels, run, qrels_dict, as_dict


def _large_chunked(column: pd.Series) -> pd.Series:
    values = column.tolist()
    chunked = pa.chunked_array([values[:len(values) // 3], values[len(values) // 3:]],
                               type=pa.large_string())
    return pd.Series(pd.arrays.ArrowExtensionArray(chunked), name=column.name)


@pytest.mark.parametrize("shuffle", [False, True])
def test_large_string_chunks_and_rows_apart_give_the_dict_engines_numbers(shuffle):
    qrels, run, qrels_dict, run_dict = _frames(seed=int(shuffle))
    if shuffle:  # the rows of a query apart
        run = run.sample(frac=1.0, random_state=0).reset_index(drop=True)
    run = run.assign(query_id=_large_chunked(run["query_id"]),
                     doc_id=_large_chunked(run["doc_id"]))
    assert pa.types.is_large_string(pa.array(run["doc_id"]).type)
    expected = engine_evaluate(qrels_dict, run_dict, parse_metrics(METRICS), Settings())
    result = searcheval.Evaluator(qrels, METRICS).evaluate(run)
    assert result.query_ids == expected.query_ids
    for name in METRICS:
        np.testing.assert_allclose(result.values[name], expected.values[name], rtol=0,
                                   atol=1e-12, err_msg=name)


def test_query_codes_and_equality_known_answers():
    # grouped: runs start at rows 0, 2 ("q10" is not "q1"), 4 ("" after "q10"), 6
    grouped = pa.array(["q1", "q1", "q10", "q10", "", "", "q2"], type=pa.large_string())
    codes, first = kernel._query_codes(grouped)
    assert codes.tolist() == [0, 0, 1, 1, 2, 2, 3]
    assert first.to_pylist() == ["q1", "q10", "", "q2"]
    # "q1" again after "q10": its rows are apart, so the ids are grouped by columnar._grouped
    ids = pa.array(["q1", "q1", "q10", "q10", "q1", "", ""], type=pa.large_string())
    codes, first = kernel._query_codes(ids)
    expected_codes, expected_first = _grouped(ids)
    assert codes.tolist() == expected_codes.tolist() == [0, 0, 1, 1, 0, 2, 2]
    assert first.to_pylist() == expected_first.to_pylist() == ["q1", "q10", ""]
    offsets, data = kernel._strings(ids)
    other = pa.array(["q10", "q1", "x"])
    o2, d2 = kernel._strings(other)
    assert kernel._all_equal(np.array([2, 0]), offsets, data, np.array([0, 1]), o2, d2)
    assert not kernel._all_equal(np.array([2]), offsets, data, np.array([2]), o2, d2)


def test_query_codes_read_across_chunks():
    """A pandas column of pyarrow strings comes in chunks: a query whose rows cross a chunk's
    end is one query, and one that comes back in a later chunk is grouped."""
    chunked = pa.chunked_array([["q1", "q1", "q10"], ["q10", "q2"], ["q2"]])
    codes, first = kernel._query_codes(chunked)
    assert codes.tolist() == [0, 0, 1, 1, 2, 2]
    assert isinstance(first, pa.Array) and first.to_pylist() == ["q1", "q10", "q2"]
    apart = pa.chunked_array([["q1", "q2"], ["q1"]])
    codes, first = kernel._query_codes(apart)
    assert codes.tolist() == [0, 1, 0] and first.to_pylist() == ["q1", "q2"]


def test_the_judgments_ids_are_hashed_once_for_their_check_and_every_join(monkeypatch):
    """An Evaluator of string judgments hashes their ids when it is built, as the join hashes a
    run's ids (`kernel.string_row_hashes`), and each run's join reuses those hashes; a document
    judged twice for one query is still found by them (and refused by the dict way)."""
    from searcheval.io.trec import Fallback
    from searcheval.metrics.columnar import qrels_from_frame

    qrels, run, qrels_dict, as_dict = _frames(3)
    evaluator = searcheval.Evaluator(qrels, METRICS)
    columns = evaluator._columnar
    assert columns._hashes is not None
    assert np.array_equal(columns._hashes, kernel._hash_rows(*kernel._strings(columns.docs)))
    calls = []
    real = kernel._hash_rows
    monkeypatch.setattr(kernel, "_hash_rows", lambda *a: calls.append(len(a[0]) - 1) or real(*a))
    result = evaluator.evaluate(run)
    assert calls == [len(run)]  # the run's ids only: the judgments' were hashed before
    expected = engine_evaluate(qrels_dict, as_dict, parse_metrics(METRICS), Settings())
    assert result.query_ids == expected.query_ids
    for name in METRICS:
        np.testing.assert_allclose(result.values[name], expected.values[name], rtol=0,
                                   atol=1e-12, err_msg=name)
    twice = pd.concat([qrels, qrels.iloc[[5]]], ignore_index=True)
    with pytest.raises(Fallback):
        qrels_from_frame(twice, ("query_id", "doc_id", "grade"))

"""The public Python API: `searcheval.evaluate` and `compare` on dicts, DataFrames and paths, the
refusals of every other shape, and the Python example of docs/metrics.md, executed."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import searcheval
from searcheval.errors import InputError
from searcheval.metrics.stats import sign_flip_pvalues

ROOT = Path(__file__).resolve().parents[2]
QRELS = {"q1": {"a": 3, "b": 1, "c": 0}, "q2": {"d": 2}}
RUN = {"q1": {"a": 0.9, "c": 0.8, "b": 0.1}, "q2": {"x": 0.7, "d": 0.3}}
# q1 ranks a, c, b: DCG = (2^3 - 1)/log2(2) + 0/log2(3) + (2^1 - 1)/log2(4); ideal a, b, c
NDCG_Q1 = ((2**3 - 1) / math.log2(2) + (2**1 - 1) / math.log2(4)) / \
    ((2**3 - 1) / math.log2(2) + (2**1 - 1) / math.log2(3))
NDCG_Q2 = ((2**2 - 1) / math.log2(3)) / ((2**2 - 1) / math.log2(2))  # d at rank 2


def frame(mapping, value="score", names=("query_id", "doc_id")):
    return pd.DataFrame([(q, d, v) for q, docs in mapping.items() for d, v in docs.items()],
                        columns=[*names, value])


def test_evaluate_dicts_known_answer():
    result = searcheval.evaluate(QRELS, RUN, ["ndcg@10", "mrr"])
    assert result.means["ndcg@10"] == pytest.approx((NDCG_Q1 + NDCG_Q2) / 2, abs=1e-12)
    assert result.means["mrr"] == (1 / 1 + 1 / 2) / 2
    assert result.per_query()["q2"] == {"ndcg@10": pytest.approx(NDCG_Q2), "mrr": 1 / 2}
    df = result.to_dataframe()
    assert list(df.index) == ["q1", "q2"] and list(df.columns) == ["ndcg@10", "mrr"]
    assert df.loc["q1", "ndcg@10"] == pytest.approx(NDCG_Q1)


def test_dataframes_and_paths_give_the_same_numbers(tmp_path):
    expected = searcheval.evaluate(QRELS, RUN, "ndcg@10,mrr").per_query()
    from_frames = searcheval.evaluate(frame(QRELS, "grade"), frame(RUN), "ndcg@10,mrr")
    assert from_frames.per_query() == expected
    renamed = searcheval.evaluate(
        frame(QRELS, "rel", ("qid", "docno")), frame(RUN, "sim", ("qid", "docno")),
        "ndcg@10,mrr", run_columns={"query_id": "qid", "doc_id": "docno", "score": "sim"},
        qrels_columns={"query_id": "qid", "doc_id": "docno", "grade": "rel"})
    assert renamed.per_query() == expected
    searcheval.write_run(RUN, tmp_path / "run.trec", tag="t")
    (tmp_path / "qrels.txt").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in QRELS.items() for d, g in docs.items()))
    from_paths = searcheval.evaluate(tmp_path / "qrels.txt", str(tmp_path / "run.trec"),
                                     "ndcg@10,mrr")
    assert from_paths.per_query() == expected
    assert searcheval.load_run(tmp_path / "run.trec") == RUN


def test_integer_ids_become_strings_on_both_sides():
    result = searcheval.evaluate({1: {10: 1}}, {1: {10: 0.5, 11: 0.4}}, "mrr")
    assert result.query_ids == ["1"] and result.means["mrr"] == 1.0


@pytest.mark.parametrize("run, message", [
    (frame(RUN).rename(columns={"doc_id": "docno"}),
     "missing column(s) doc_id (the DataFrame has: query_id, docno, score)"),
    (frame(RUN).drop(columns=["score"]), "missing column(s) score"),
    (frame(RUN).astype({"score": str}), "expected numeric values in column 'score'"),
    (frame(RUN).assign(score=[0.9, np.nan, 0.1, 0.7, 0.3]), "expected finite scores"),
    (pd.concat([frame(RUN), frame(RUN).head(1)]), "the pair ('q1', 'a') is given twice"),
    (frame(RUN).assign(score=[True, False, True, False, True]), "expected numeric values"),
    ([("q1", "a", 1.0)], "expected a dict {query_id: {doc_id: score}}, a pandas DataFrame with "
                         "columns query_id, doc_id, score, or a path to a file; got list"),
    (None, "got NoneType"),
    ({"q1": [("a", 1.0)]}, "expected a dict {doc_id: score} for query 'q1', got list"),
    ({"q1": {"a": "high"}}, "expected a finite numeric score, got 'high'"),
    ({"q1": {"a": float("inf")}}, "expected a finite numeric score, got inf"),
])
def test_a_bad_run_is_refused_never_read_as_empty(run, message):
    with pytest.raises(InputError) as err:
        searcheval.evaluate(QRELS, run)
    assert message in str(err.value)


@pytest.mark.parametrize("qrels, message", [
    (frame(QRELS, "grade").assign(grade=[3.0, 1.5, 0.0, 2.0]), "expected whole, finite grades"),
    (frame(QRELS, "relevance"), "missing column(s) grade"),
    ({"q1": {"a": 2.5}}, "expected a whole grade, got 2.5"),
    (42, "got int"),
])
def test_bad_qrels_are_refused(qrels, message):
    with pytest.raises(InputError) as err:
        searcheval.evaluate(qrels, RUN)
    assert message in str(err.value)


def test_unknown_conventions_and_column_roles_are_refused():
    with pytest.raises(InputError, match="unknown convention"):
        searcheval.evaluate(QRELS, RUN, gian="linear")
    with pytest.raises(InputError, match="unknown column role"):
        searcheval.evaluate(QRELS, RUN, run_columns={"qid": "query"})


def test_compare_tests_each_run_against_the_first():
    better = {"q1": {"a": 0.9, "b": 0.8}, "q2": {"d": 0.9}}
    worse = {"q1": {"c": 1.0}, "q2": {"x": 1.0}}
    comparison = searcheval.compare(QRELS, {"base": RUN, "better": better, "worse": worse},
                                    ["ndcg@10", "mrr"])
    assert comparison.names == ["base", "better", "worse"]
    assert comparison.means["better"]["ndcg@10"] == 1.0 and comparison.means["worse"]["mrr"] == 0
    # better improves both queries' nDCG: with 2 pairs, the exact two-sided p is 2 / 2^2
    assert comparison.p_values["better"]["ndcg@10"] == 2 / 2**2
    base = comparison.evaluations["base"].values["mrr"]
    diffs = comparison.evaluations["worse"].values["mrr"] - base
    assert comparison.p_values["worse"]["mrr"] == sign_flip_pvalues(diffs[:, None])[0]
    assert comparison.p_values["base"] == {"ndcg@10": None, "mrr": None}
    table = comparison.to_dataframe()
    assert list(table.index) == ["base", "better", "worse"]
    assert table.loc["better", "ndcg@10 p"] == 0.5
    with pytest.raises(InputError, match="at least two runs"):
        searcheval.compare(QRELS, [RUN])


def test_the_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    block = re.search(r"## Python\n.*?```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/metrics.md (Python)", "exec"), {})
    out = capsys.readouterr().out
    assert f"'ndcg@10': {str((NDCG_Q1 + NDCG_Q2) / 2)[:6]}" in out
    assert (tmp_path / "after.trec").exists()

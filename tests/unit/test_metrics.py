"""Known answers for the metric engine; expected values are the arithmetic that gives them."""

from math import log2

import numpy as np
import pytest

from searcheval.errors import InputError
from searcheval.metrics.engine import Settings, evaluate, parse_metric, ranking

SEED = {"a": 3, "b": 1, "c": 0}  # the seed methodology's example
LADDER = {"x": 3, "y": 1, "z": 1, "w": 0}  # judged grades [3, 1, 1, 0]


def ranked(*docs: str) -> dict[str, float]:
    """A run for one query: the first doc gets the highest score."""
    return {d: float(len(docs) - i) for i, d in enumerate(docs)}


def score(judgments, docs, metric, **settings):
    ev = evaluate({"q": judgments}, {"q": ranked(*docs)}, [metric], Settings(**settings))
    return ev.per_query()["q"][metric]


def test_ndcg_ideal_order_is_one():
    assert score(SEED, ["a", "b", "c"], "ndcg@10") == pytest.approx(1.0)


def test_ndcg_swapped_top_two():
    dcg = (2**1 - 1) / log2(2) + (2**3 - 1) / log2(3)  # 5.416
    idcg = (2**3 - 1) / log2(2) + (2**1 - 1) / log2(3)  # 7.631
    assert score(SEED, ["b", "a", "c"], "ndcg@10") == pytest.approx(dcg / idcg)
    assert dcg / idcg == pytest.approx(0.710, abs=5e-4)


def test_ndcg_without_the_best_document_never_passes_one_gain_unit():
    # without a, the DCG is at most (2^1 - 1) / log2(2) = 1 out of an ideal 7.631
    idcg = (2**3 - 1) / log2(2) + (2**1 - 1) / log2(3)
    assert score(SEED, ["b", "c"], "ndcg@10") == pytest.approx(1 / idcg)
    assert score(SEED, ["c", "b"], "ndcg@10") == pytest.approx((1 / log2(3)) / idcg)


def test_ladder_article_examples():
    idcg = 7 / log2(2) + 1 / log2(3) + 1 / log2(4)
    first = (0 + 7 / log2(3) + 1 / log2(4) + 1 / log2(5)) / idcg
    assert score(LADDER, ["w", "x", "y", "z"], "ndcg@10") == pytest.approx(first)
    assert round(first, 2) == 0.66
    second = (1 / log2(2) + 1 / log2(3) + 0) / idcg
    assert score(LADDER, ["y", "z", "w"], "ndcg@10") == pytest.approx(second)
    assert round(second, 2) == 0.20


def test_ndcg_linear_gain_and_trec_compat():
    dcg = 1 / log2(2) + 3 / log2(3)
    idcg = 3 / log2(2) + 1 / log2(3)
    assert score(SEED, ["b", "a", "c"], "ndcg@10", gain="linear") == pytest.approx(dcg / idcg)
    assert score(SEED, ["b", "a", "c"], "ndcg@10", trec_compat=True) == pytest.approx(dcg / idcg)


def test_ndcg_cut_at_k():
    # a at rank 3 is outside the top 2: only b counts
    idcg = 7 / log2(2) + 1 / log2(3)
    assert score(SEED, ["c", "b", "a"], "ndcg@2") == pytest.approx((1 / log2(3)) / idcg)


@pytest.mark.parametrize("policy, expected", [("one", 1.0), ("zero", 0.0), ("skip", None)])
def test_no_relevant_judgment_policy(policy, expected):
    nothing_relevant = {"a": 0, "b": 0}
    assert score(nothing_relevant, ["a"], "ndcg@10", no_relevant=policy) == expected
    assert score(nothing_relevant, ["a"], "recall@20", no_relevant=policy) == expected


def test_skip_policy_leaves_the_query_out_of_the_mean():
    qrels = {"q1": {"a": 3}, "q2": {"b": 0}}
    run = {"q1": ranked("x", "a"), "q2": ranked("b")}
    ev = evaluate(qrels, run, ["ndcg@10"], Settings(no_relevant="skip"))
    assert ev.means["ndcg@10"] == pytest.approx((7 / log2(3)) / 7)  # q1 alone


def test_mrr_positions():
    assert score(SEED, ["a", "b"], "mrr") == 1.0
    assert score(SEED, ["c", "a"], "mrr") == 1 / 2
    assert score(SEED, ["c", "x"], "mrr") == 0.0
    assert score({"a": 0}, ["a"], "mrr") == 0.0


def test_mrr_at_k_and_relevance_level():
    assert score(SEED, ["c", "x", "b"], "mrr@2") == 0.0
    assert score(SEED, ["c", "x", "b"], "mrr@3") == 1 / 3
    # with level 2, b (grade 1) is not relevant: the first relevant is a at rank 3
    assert score(SEED, ["b", "c", "a"], "mrr", relevance_level=2) == 1 / 3


def test_recall():
    assert score(SEED, ["a", "b"], "recall@20") == 2 / 2
    assert score(SEED, ["c", "b"], "recall@20") == 1 / 2
    assert score(SEED, ["c", "b"], "recall@1") == 0 / 2
    assert score({"a": 0}, ["a"], "recall@20") == 1.0  # nothing relevant: policy one


def test_precision_divides_by_k():
    assert score(SEED, ["a", "c", "b"], "precision@10") == 2 / 10
    assert score(SEED, ["a", "c", "b"], "precision@2") == 1 / 2


def test_average_precision():
    # relevant a at rank 1 and b at rank 3; 2 relevant judged
    assert score(SEED, ["a", "c", "b"], "map") == pytest.approx((1 / 1 + 2 / 3) / 2)
    # a third relevant document never retrieved still counts in the denominator
    three = {"a": 3, "b": 1, "d": 2, "c": 0}
    assert score(three, ["a", "c", "b"], "map") == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert score(three, ["a", "c", "b"], "map@2") == pytest.approx((1 / 1) / 3)


def test_judged_share_of_what_was_shown():
    assert score(SEED, ["a", "x", "c", "y"], "judged@10") == 2 / 4
    assert score(SEED, ["a", "x", "c", "y"], "judged@2") == 1 / 2
    assert score(SEED, [], "judged@10") == 1.0


def test_abstention_only_for_queries_without_relevant_judgments():
    qrels = {"answerable": {"a": 3}, "silent": {"a": 0}, "chatty": {"a": 0}}
    run = {"answerable": ranked("a"), "chatty": ranked("b")}  # silent returns nothing
    ev = evaluate(qrels, run, ["abstention"])
    assert ev.per_query() == {"answerable": {"abstention": None}, "silent": {"abstention": 1.0},
                              "chatty": {"abstention": 0.0}}
    assert ev.means["abstention"] == (1.0 + 0.0) / 2


def test_ties_are_broken_by_document_id_descending():
    # a and b share a score: b (larger id) ranks first
    run = {"q": {"a": 1.0, "b": 1.0, "c": 0.5}}
    assert ranking(run["q"]) == ["b", "a", "c"]
    ev = evaluate({"q": {"a": 1}}, run, ["mrr"])
    assert ev.per_query()["q"]["mrr"] == 1 / 2


def test_query_missing_from_the_run_is_an_empty_ranking_unless_trec_compat():
    qrels = {"q1": {"a": 1}, "q2": {"a": 1}}
    run = {"q1": ranked("a")}
    assert evaluate(qrels, run, ["mrr"]).means["mrr"] == (1.0 + 0.0) / 2
    assert evaluate(qrels, run, ["mrr"], Settings(trec_compat=True)).means["mrr"] == 1.0


def test_means_and_json_shape():
    qrels = {"q1": SEED, "q2": {"b": 2}}
    run = {"q1": ranked("b", "a"), "q2": ranked("b")}
    out = evaluate(qrels, run, ["mrr", "recall@20"]).to_dict()
    assert out["queries"] == 2
    assert out["means"] == {"mrr": (1 + 1) / 2, "recall@20": (1 + 1) / 2}
    assert set(out["per_query"]) == {"q1", "q2"}


@pytest.mark.parametrize("bad", ["ndcg", "ndcg@0", "abstention@3", "ndgc@10", "recall", "p",
                                 "bpref@10", "ndcg(p=1)@10", "rbp(p=1.5)", "rbp(q=0.5)", "P_0"])
def test_unknown_or_malformed_metric_names_are_refused(bad):
    with pytest.raises(InputError, match="metric"):
        parse_metric(bad)


def test_settings_refuse_unknown_values():
    with pytest.raises(InputError, match="gain"):
        Settings(gain="quadratic")
    with pytest.raises(InputError, match="policy"):
        Settings(no_relevant="maybe")


def test_per_query_values_are_numpy_arrays_in_query_order():
    ev = evaluate({"q2": {"a": 1}, "q1": {"a": 1}}, {"q1": ranked("a"), "q2": ranked("x", "a")},
                  ["mrr"])
    assert ev.query_ids == ["q2", "q1"]
    np.testing.assert_array_equal(ev.values["mrr"], [1 / 2, 1.0])


def test_new_metrics_known_answers():
    # ranking: a (grade 3), x (unjudged), b (grade 0), c (grade 1); d (grade 2) not retrieved
    qrels = {"q": {"a": 3, "b": 0, "c": 1, "d": 2}}
    run = {"q": {"a": 4.0, "x": 3.0, "b": 2.0, "c": 1.0}}
    names = ["rprec", "success@1", "bpref", "err@10", "rbp(p=0.5)", "rbp_residual(p=0.5)"]
    got = evaluate(qrels, run, names).per_query()["q"]
    assert got["rprec"] == 1 / 3  # R = 3 relevant; top 3 hold a only
    assert got["success@1"] == 1.0
    # a: no nonrelevant above -> 1; c: b above -> 1 - min(1, 3) / min(1, 3) = 0
    assert got["bpref"] == (1 + 0) / 3
    r_a, r_c = (2**3 - 1) / 2**4, (2**1 - 1) / 2**4
    assert got["err@10"] == pytest.approx(r_a / 1 + (1 - r_a) * r_c / 4)
    assert got["rbp(p=0.5)"] == (1 - 0.5) * (0.5**0 + 0.5**3)
    # unjudged x at rank 2, and everything after rank 4
    assert got["rbp_residual(p=0.5)"] == pytest.approx((1 - 0.5) * 0.5**1 + 0.5**4)

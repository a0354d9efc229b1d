"""Properties of the metric engine that hold for every input hypothesis can think of."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searcheval.metrics.engine import Settings, evaluate

METRICS = ["ndcg@10", "ndcg@3", "mrr", "mrr@5", "recall@20", "recall@2", "precision@10", "map",
           "map@5", "judged@10", "abstention"]
doc_ids = st.sampled_from([f"d{i}" for i in range(12)])
judgments = st.dictionaries(doc_ids, st.integers(0, 3), max_size=8)
rankings = st.dictionaries(doc_ids, st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]), max_size=12)
queries = st.dictionaries(st.sampled_from([f"q{i}" for i in range(6)]),
                          st.tuples(judgments, rankings), min_size=1, max_size=6)
policies = st.sampled_from(["one", "zero", "skip"])
gains = st.sampled_from(["exponential", "linear"])


def split(qs):
    return {q: j for q, (j, _) in qs.items()}, {q: r for q, (_, r) in qs.items()}


@settings(max_examples=150, deadline=None)
@given(queries, policies, gains, st.integers(1, 3))
def test_every_metric_is_within_zero_and_one(qs, policy, gain, level):
    qrels, run = split(qs)
    ev = evaluate(qrels, run, METRICS, Settings(gain=gain, no_relevant=policy, relevance_level=level))
    for per_query in ev.per_query().values():
        for value in per_query.values():
            assert value is None or 0.0 <= value <= 1.0 + 1e-12


@settings(max_examples=100, deadline=None)
@given(judgments.filter(lambda j: any(g > 0 for g in j.values())), gains)
def test_the_ideal_ordering_scores_ndcg_one(judged, gain):
    ideal = sorted(judged, key=lambda d: judged[d], reverse=True)
    run = {"q": {d: float(len(ideal) - i) for i, d in enumerate(ideal)}}
    ev = evaluate({"q": judged}, run, ["ndcg@10", "ndcg@3"], Settings(gain=gain))
    assert abs(ev.means["ndcg@10"] - 1.0) < 1e-12
    assert abs(ev.means["ndcg@3"] - 1.0) < 1e-12


@settings(max_examples=100, deadline=None)
@given(queries, st.integers(1, 5))
def test_unjudged_documents_below_rank_k_change_nothing_at_k(qs, extra):
    qrels, run = split(qs)
    k_metrics = ["ndcg@10", "mrr@10", "recall@10", "precision@10", "map@10"]
    before = evaluate(qrels, run, k_metrics).per_query()
    # below every existing score, so they rank after every document already there
    padded = {}
    for q, docs in run.items():
        low = min(docs.values(), default=0.0) - 1.0
        padded[q] = {**docs, **{f"unjudged-{q}-{i}": low - i for i in range(extra)}}
    after = evaluate(qrels, padded, k_metrics).per_query()
    assert before == after


@settings(max_examples=60, deadline=None)
@given(queries, st.randoms(use_true_random=False))
def test_permuting_query_order_changes_nothing(qs, rnd: random.Random):
    qrels, run = split(qs)
    order = list(qrels)
    rnd.shuffle(order)
    shuffled_qrels = {q: qrels[q] for q in order}
    shuffled_run = {q: run[q] for q in reversed(order)}
    a = evaluate(qrels, run, METRICS)
    b = evaluate(shuffled_qrels, shuffled_run, METRICS)
    assert a.per_query() == b.per_query()
    for name, mean in a.means.items():  # the same values, summed in another order
        assert mean == pytest.approx(b.means[name], abs=1e-12) if mean is not None else b.means[name] is None

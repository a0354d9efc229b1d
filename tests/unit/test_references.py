"""Cross-checks on randomized inputs: trec-compat equals pytrec_eval per query to 1e-9, and the
exponential nDCG equals ranx's ndcg_burges.

The inputs have what breaks naive engines: tied scores, short and empty rankings, queries whose
judgments are all 0, and documents in the run that were never judged.
"""

import random

import numpy as np
import pytest
import pytrec_eval

from searcheval.metrics.engine import Settings, evaluate

PYTREC = {"ndcg@10": "ndcg_cut_10", "mrr": "recip_rank", "recall@20": "recall_20",
          "precision@10": "P_10", "map": "map"}


def random_inputs(seed: int, queries: int = 300, tie_scores: bool = True):
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(queries):
        qid = f"q{q:03d}"
        docs = [f"d{i:02d}" for i in range(50)]
        n_judged = rng.choice([1, 2, 5, 12, 30])
        grades = [0, 0, 0, 0] if rng.random() < 0.1 else [0, 1, 2, 3]  # some queries all-zero
        qrels[qid] = {d: rng.choice(grades) for d in rng.sample(docs, n_judged)}
        depth = rng.choice([0, 1, 3, 10, 25, 45])
        if tie_scores:
            score = lambda: float(rng.choice([0.5, 1.0, 2.0, round(rng.random(), 2)]))  # noqa: E731
        else:
            score = rng.random
        run[qid] = {d: score() for d in rng.sample(docs, depth)}  # unjudged docs included
    return qrels, run


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_trec_compat_equals_pytrec_eval_per_query(seed):
    qrels, run = random_inputs(seed)
    reference = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "recip_rank", "recall.20", "P.10", "map"}).evaluate(run)
    ours = evaluate(qrels, run, list(PYTREC), Settings(trec_compat=True)).per_query()
    assert set(ours) == set(reference)
    assert any(len(run[q]) == 0 for q in ours), "the inputs should include empty rankings"
    for qid, values in reference.items():
        for ours_name, ref_name in PYTREC.items():
            assert ours[qid][ours_name] == pytest.approx(values[ref_name], abs=1e-9), (qid, ours_name)


@pytest.mark.parametrize("level", [2, 3])
def test_relevance_level_equals_pytrec_eval(level):
    qrels, run = random_inputs(7, queries=200)
    reference = pytrec_eval.RelevanceEvaluator(
        qrels, {"recip_rank", "recall.20", "P.10", "map"}, relevance_level=level).evaluate(run)
    ours = evaluate(qrels, run, ["mrr", "recall@20", "precision@10", "map"],
                    Settings(trec_compat=True, relevance_level=level)).per_query()
    for qid, values in reference.items():
        for ours_name in ("mrr", "recall@20", "precision@10", "map"):
            assert ours[qid][ours_name] == pytest.approx(values[PYTREC[ours_name]], abs=1e-9)


@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaTypeSafetyWarning")
def test_exponential_ndcg_equals_ranx_ndcg_burges():
    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    qrels, run = random_inputs(11, queries=300, tie_scores=False)
    run = {q: docs for q, docs in run.items() if docs}  # ranx needs a ranking for every query
    qrels = {q: qrels[q] for q in run}
    ranx_run = Run(run)
    ranx_evaluate(Qrels(qrels), ranx_run, ["ndcg_burges@10"])
    reference = ranx_run.scores["ndcg_burges@10"]
    # ranx gives a query with nothing relevant 0: compare under the same policy
    ours = evaluate(qrels, run, ["ndcg@10"], Settings(no_relevant="zero")).per_query()
    assert len(reference) == len(ours) > 200
    for qid, value in reference.items():
        assert ours[qid]["ndcg@10"] == pytest.approx(float(value), abs=1e-9), qid


def test_many_queries_at_once_equal_one_at_a_time():
    qrels, run = random_inputs(5, queries=120)
    together = evaluate(qrels, run, list(PYTREC)).values
    for i, qid in enumerate(qrels):
        alone = evaluate({qid: qrels[qid]}, {qid: run[qid]}, list(PYTREC)).values
        for name in PYTREC:
            np.testing.assert_allclose(alone[name][0], together[name][i], atol=1e-12)

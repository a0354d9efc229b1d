"""The gate and its statistics, on hand-made scores whose arithmetic is written out."""

import json
from itertools import product

import numpy as np
import pytest

from searcheval.errors import InputError
from searcheval.evaluation.baseline import (
    Baseline,
    baseline_from_scores,
    diff_baselines,
    load_baseline,
    write_baseline,
)
from searcheval.evaluation.gate import check_gate
from searcheval.metrics.scoring import score_run
from searcheval.metrics.stats import bootstrap_ci, paired_randomization_test
from searcheval.types import Query, RankedRun

QUERIES = [Query("q1", "a", "exact-name"), Query("q2", "b", "exact-name"),
           Query("q3", "c", "paraphrase"), Query("q4", "d", "paraphrase")]
QRELS = {"q1": {"a": 3}, "q2": {"b": 3}, "q3": {"c": 3}, "q4": {"d": 3}}


def scores_with_mrr(ranks: dict[str, int]):
    """Each query's relevant doc placed at the given rank (0 = not returned)."""
    results = {}
    for qid, rank in ranks.items():
        rel = next(iter(QRELS[qid]))
        docs = [f"junk{i}" for i in range(max(rank - 1, 0))] + ([rel] if rank else [])
        results[qid] = [(d, float(10 - i)) for i, d in enumerate(docs)]
    return score_run(RankedRun("fused", results, {q: 1.0 for q in ranks}), QRELS, QUERIES,
                     ("mrr", "ndcg@10", "recall@20"))


def baseline_of(scores, **kw):
    b = baseline_from_scores(scores, run_id="r0", model="m")
    for key, value in kw.items():
        setattr(b, key, value)
    return b


def test_unchanged_scores_pass():
    s = scores_with_mrr({"q1": 1, "q2": 1, "q3": 2, "q4": 1})
    result = check_gate(baseline_of(s), s)
    assert result.passed and result.tripped == [] and result.improved == []


def test_a_drop_beyond_the_tolerance_trips_and_names_the_worse_queries():
    before = scores_with_mrr({"q1": 1, "q2": 1, "q3": 1, "q4": 1})  # MRR 1
    after = scores_with_mrr({"q1": 1, "q2": 1, "q3": 2, "q4": 4})  # MRR (1 + 1 + 1/2 + 1/4) / 4
    result = check_gate(baseline_of(before), after)
    assert not result.passed
    mrr = next(t for t in result.tripped if t.metric == "mrr")
    assert mrr.baseline == 1.0
    assert mrr.value == pytest.approx((1 + 1 + 1 / 2 + 1 / 4) / 4)
    assert mrr.delta == pytest.approx((1 + 1 + 1 / 2 + 1 / 4) / 4 - 1)
    # exact test over 2^4 sign patterns of the differences (0, 0, -1/2, -3/4): only the patterns
    # that flip neither or both non-zero signs are as extreme: 2 * 2^2 of 16
    assert mrr.p_value == pytest.approx(8 / 16)
    worst = [w["query_id"] for w in result.worse_queries if w["metric"] == "mrr"]
    assert worst == ["q4", "q3"]


def test_a_drop_within_the_tolerance_passes():
    before = scores_with_mrr({"q1": 1, "q2": 1, "q3": 1, "q4": 1})
    after = scores_with_mrr({"q1": 1, "q2": 1, "q3": 1, "q4": 2})  # MRR drops by 0.5 / 4 = 0.125
    assert check_gate(baseline_of(before, tolerance=0.2), after).passed
    assert not check_gate(baseline_of(before, tolerance=0.1), after).passed


def test_an_improvement_beyond_the_tolerance_passes_and_marks_the_baseline_stale():
    before = scores_with_mrr({"q1": 2, "q2": 2, "q3": 2, "q4": 2})
    after = scores_with_mrr({"q1": 1, "q2": 1, "q3": 1, "q4": 1})
    result = check_gate(baseline_of(before), after)
    assert result.passed and result.stale_baseline
    assert {t.metric for t in result.improved} >= {"mrr"}


def test_metric_and_category_floors():
    s = scores_with_mrr({"q1": 1, "q2": 1, "q3": 2, "q4": 2})  # paraphrase MRR = 1/2
    result = check_gate(baseline_of(s, floors={"mrr": 0.8},
                                    category_floors={"paraphrase": {"mrr": 0.6}}), s)
    kinds = {(t.kind, t.category, t.metric) for t in result.tripped}
    assert kinds == {("floor", None, "mrr"), ("category-floor", "paraphrase", "mrr")}
    floor_trip = next(t for t in result.tripped if t.kind == "floor")
    assert floor_trip.value == pytest.approx((1 + 1 + 1 / 2 + 1 / 2) / 4)


def test_baseline_round_trip_and_diff(tmp_path):
    s = scores_with_mrr({"q1": 1, "q2": 1, "q3": 2, "q4": 1})
    b = baseline_of(s, floors={"ndcg@10": 0.5})
    path = tmp_path / "baseline.json"
    write_baseline(path, b)
    loaded = load_baseline(path)
    assert loaded.metrics == b.metrics and loaded.floors == {"ndcg@10": 0.5}
    assert loaded.per_query["q3"]["mrr"] == 0.5
    new = baseline_from_scores(scores_with_mrr({"q1": 1, "q2": 1, "q3": 1, "q4": 1}),
                               run_id="r1", model="m", previous=loaded)
    assert new.floors == {"ndcg@10": 0.5}  # carried over
    lines = diff_baselines(loaded, new)
    assert f"~ mrr: {(1 + 1 + 0.5 + 1) / 4:.4f} -> 1.0000 (+{1 - (3.5 / 4):.4f})" in lines
    assert "~ from_run: r0 -> r1" in lines


@pytest.mark.parametrize("content, message", [
    ("{", "baseline.json:1: invalid JSON"),
    ('{"metrics": {}}', "field 'configuration': missing"),
    ('{"configuration": "fused", "metrics": {"ndcg@10": "high"}}', "field 'metrics.ndcg@10': expected a number"),
    ('{"configuration": "fused", "metrics": {"bogus": 1}}', "field 'metrics.bogus': unknown metric"),
    ('{"configuration": "fused", "metrics": {"mrr": 1, "RR": 1}}', "field 'metrics.RR': names the metric mrr twice"),
    ('{"configuration": "fused", "metrics": {}, "tolerance": -1}', "field 'tolerance': expected a tolerance >= 0"),
    # provenance of the wrong type: refused by name (a number as conventions crashed the gate)
    ('{"configuration": "fused", "metrics": {}, "conventions": 7}', "field 'conventions': expected an object, got int"),
    ('{"configuration": "fused", "metrics": {}, "dataset": ["x"]}', "field 'dataset': expected a string, got list"),
    ('{"configuration": "fused", "metrics": {}, "dataset_fingerprint": "x"}', "field 'dataset_fingerprint': expected an object"),
])
def test_bad_baseline_files(tmp_path, content, message):
    path = tmp_path / "baseline.json"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        load_baseline(path)


def test_baseline_metric_names_in_any_spelling_are_kept_under_searchevals(tmp_path):
    path = tmp_path / "baseline.json"
    path.write_text('{"configuration": "fused", "metrics": {"nDCG@10": 0.5, "recip_rank": 0.25}}')
    assert load_baseline(path).metrics == {"ndcg@10": 0.5, "mrr": 0.25}


def test_gate_refuses_a_baseline_of_another_configuration():
    s = scores_with_mrr({"q1": 1, "q2": 1, "q3": 1, "q4": 1})
    with pytest.raises(InputError, match="gates 'bm25'"):
        check_gate(Baseline(configuration="bm25", metrics={"mrr": 1.0}), s)


def test_paired_randomization_exact_and_sampled():
    # all four differences equal: only the all-plus and all-minus patterns are as extreme
    assert paired_randomization_test(np.zeros(4), np.full(4, 0.1)) == pytest.approx(2 / 2**4)
    assert paired_randomization_test(np.zeros(3), np.zeros(3)) == 1.0
    # 20 queries: sampled; a consistent drop is clearly significant
    p = paired_randomization_test(np.ones(20), np.full(20, 0.5))
    assert p < 0.001
    # brute force on 5 differences agrees with the exact enumeration
    d = np.array([0.3, -0.1, 0.2, 0.0, 0.4])
    extreme = sum(abs(np.mean(np.array(s) * d)) >= abs(d.mean()) - 1e-12
                  for s in product((1, -1), repeat=5))
    assert paired_randomization_test(np.zeros(5), d) == pytest.approx(extreme / 32)


def test_bootstrap_interval_contains_the_mean_and_ignores_nan():
    values = np.array([0.0, 1.0, 1.0, 1.0, np.nan])
    lo, hi = bootstrap_ci(values)
    assert lo <= 3 / 4 <= hi and 0.0 <= lo and hi <= 1.0
    assert bootstrap_ci(np.array([np.nan])) is None
    assert bootstrap_ci(np.array([0.5, 0.5])) == (0.5, 0.5)


def test_scoring_by_category_and_latency():
    s = scores_with_mrr({"q1": 1, "q2": 2, "q3": 1, "q4": 0})
    assert s.by_category["exact-name"]["mrr"] == pytest.approx((1 + 1 / 2) / 2)
    assert s.by_category["paraphrase"]["mrr"] == pytest.approx((1 + 0) / 2)
    assert s.latency_ms == {"p50": 1.0, "p95": 1.0, "p99": 1.0}
    assert json.dumps(s.to_dict())  # JSON-able

"""Per-query rules of the gate and its honest statistics for small query sets, on hand-made
scores whose arithmetic is written out."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from searcheval.errors import InputError
from searcheval.evaluation.baseline import baseline_from_scores, load_baseline
from searcheval.evaluation.gate import check_gate
from searcheval.metrics.scoring import score_run
from searcheval.metrics.stats import min_detectable_effect, queries_needed, smallest_p
from searcheval.types import Query, RankedRun

CATEGORIES = ["exact-name"] * 8 + ["paraphrase"] * 7
QUERIES = [Query(f"q{i:02d}", f"text {i}", CATEGORIES[i]) for i in range(15)]
QRELS = {q.id: {f"rel{i}": 3} for i, q in enumerate(QUERIES)}
Z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)


def scores(ranks: dict[str, int]):
    """Each query's relevant document at its rank (1 unless given; 0 = not returned)."""
    results = {}
    for i, q in enumerate(QUERIES):
        rank = ranks.get(q.id, 1)
        docs = [f"junk{j}" for j in range(max(rank - 1, 0))] + ([f"rel{i}"] if rank else [])
        results[q.id] = [(d, float(100 - j)) for j, d in enumerate(docs)]
    return score_run(RankedRun("fused", results), QRELS, QUERIES, ("mrr", "ndcg@10", "recall@20"))


def test_counts_come_first_and_a_4_of_15_collapse_is_too_small_to_test_never_noise():
    before = scores({})
    after = scores({"q11": 0, "q12": 0, "q13": 0, "q14": 0})  # four queries from 1.0 to 0.0
    result = check_gate(baseline_from_scores(before, run_id="r0", model="m"), after)
    st = result.statistics["mrr"]
    assert (st["queries"], st["worse"], st["better"], st["changed"]) == (15, 4, 0, 4)
    assert st["smallest_p"] == 2 / 2**4 and st["testable"] is False
    assert st["p_value"] == pytest.approx(2 / 2**4)  # only all-minus and all-plus are as extreme
    assert st["lines"][0] == "4 of 15 queries worse, 0 better (mrr)"
    assert st["lines"][1].startswith("with 4 changed queries the smallest p a paired "
                                     "randomization test can reach is 2/2^4 = 0.125, above the "
                                     "level 0.05: the query set is too small to test this change")
    assert not any("noise" in line for line in st["lines"])
    # the spread from this run against the baseline: differences (-1 x 4, 0 x 11)
    d = np.array([-1.0] * 4 + [0.0] * 11)
    sd = math.sqrt(((d - d.mean()) ** 2).sum() / 14)
    assert st["sd"] == pytest.approx(sd) and st["sd_source"] == "this run against the baseline"
    assert st["min_detectable_effect"] == pytest.approx(Z * sd / math.sqrt(15))
    assert st["queries_needed"] == math.ceil((Z * sd / 0.02) ** 2)


def test_a_spread_from_the_history_is_used_and_named():
    before, after = scores({}), scores({"q01": 2})
    result = check_gate(baseline_from_scores(before, run_id="r0", model="m"), after,
                        spread={"mrr": (0.25, "the history of toy: 3 pairs")})
    st = result.statistics["mrr"]
    assert st["sd"] == 0.25 and st["sd_source"] == "the history of toy: 3 pairs"
    assert st["min_detectable_effect"] == pytest.approx(Z * 0.25 / math.sqrt(15))
    assert "estimated from the history of toy: 3 pairs" in st["lines"][2]
    assert f"{math.ceil((Z * 0.25 / 0.02) ** 2)} queries would be needed to detect a drop of 0.02" \
        in st["lines"][3]


def test_the_test_becomes_possible_with_six_changed_queries():
    assert smallest_p(5) == 2 / 32 > 0.05 >= smallest_p(6) == 2 / 64
    assert queries_needed(0.0001, 0.5) == math.ceil(math.log2(2 / 0.05))  # never fewer than 6
    assert min_detectable_effect(0.3, 0) is None


def rules_baseline(tmp_path, rules, before):
    import json

    from searcheval.evaluation.baseline import write_baseline

    path = tmp_path / "baseline.json"
    write_baseline(path, baseline_from_scores(before, run_id="r0", model="m"))
    doc = json.loads(path.read_text())
    doc["tolerance"] = 1.0  # the means alone never trip here
    doc["query_rules"] = rules
    path.write_text(json.dumps(doc))
    return load_baseline(path)


def test_no_query_may_fall_by_more_than_x(tmp_path):
    before = scores({})
    after = scores({"q01": 2, "q09": 4})  # MRR drops of 1/2 and 3/4
    baseline = rules_baseline(tmp_path, [{"metric": "mrr", "max_drop": 0.6}], before)
    result = check_gate(baseline, after)
    assert not result.passed
    (trip,) = result.tripped
    assert (trip.kind, trip.queries, trip.delta) == ("query-drop", ["q09"], 1 / 4 - 1)
    assert trip.describe() == "mrr: 1 query fell by more than 0.6 (worst -0.750: q09)"
    assert check_gate(rules_baseline(tmp_path, [{"metric": "mrr", "max_drop": 0.75}], before),
                      after).passed


def test_at_most_n_queries_worse_per_metric_and_per_category(tmp_path):
    before = scores({})
    after = scores({"q01": 2, "q09": 4, "q10": 2})  # q01 exact-name; q09, q10 paraphrase
    rules = [{"metric": "mrr", "max_worse": 3},
             {"metric": "mrr", "category": "paraphrase", "max_worse": 1},
             {"metric": "mrr", "category": "exact-name", "max_worse": 1}]
    result = check_gate(rules_baseline(tmp_path, rules, before), after)
    assert [(t.kind, t.category, t.value, t.queries) for t in result.tripped] == \
        [("worse-queries", "paraphrase", 2.0, ["q09", "q10"])]
    assert result.tripped[0].describe() == \
        "mrr [paraphrase]: 2 queries worse, at most 1 allowed (q09, q10)"


def test_an_improvement_of_the_mean_with_many_queries_worse_trips_the_count_rule(tmp_path):
    # before: q00 misses (0), q01..q03 at rank 2; after: q00 first (+1), q01..q03 at rank 3
    # (-(1/2 - 1/3) each): the mean rises by (1 - 3 * (1/2 - 1/3)) / 15
    before = scores({"q00": 0, "q01": 2, "q02": 2, "q03": 2})
    after = scores({"q01": 3, "q02": 3, "q03": 3})
    baseline = rules_baseline(tmp_path, [{"metric": "mrr", "max_worse": 2}], before)
    baseline.tolerance = 0.05
    result = check_gate(baseline, after)
    assert result.compared["mrr"]["delta"] == pytest.approx((1 - 3 * (1 / 2 - 1 / 3)) / 15)
    assert result.compared["mrr"]["delta"] > 0
    assert [(t.kind, t.queries) for t in result.tripped] == [("worse-queries",
                                                              ["q01", "q02", "q03"])]


@pytest.mark.parametrize(("rule", "field"), [
    ({"metric": "mrr"}, "query_rules[0]"),
    ({"metric": "nope", "max_drop": 0.1}, "query_rules[0].metric"),
    ({"metric": "mrr", "max_worse": -1}, "query_rules[0].max_worse"),
    ({"metric": "mrr", "max_drop": 0.1, "extra": 1}, "query_rules[0]"),
])
def test_a_bad_query_rule_is_refused_naming_its_field(tmp_path, rule, field):
    with pytest.raises(InputError) as info:
        rules_baseline(tmp_path, [rule], scores({}))
    assert info.value.field == field

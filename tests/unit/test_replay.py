"""Replay: labels, coverage, metrics per trace and segment, thresholds, A/B. Known answers."""

from math import log2

import numpy as np
import pytest

from searcheval.errors import InputError
from searcheval.io.traces import FROM_IDS, FROM_SCORES, NO_LABELS, TraceTable, parse_trace
from searcheval.metrics.engine import Settings
from searcheval.metrics.stats import paired_randomization_test, sign_flip_pvalues
from searcheval.replay.scoring import (
    ALL,
    FROM_JUDGMENTS,
    Coverage,
    Failure,
    check_thresholds,
    compare_configurations,
    measure_coverage,
    parse_thresholds,
    query_index,
    replay,
    resolve_labels,
    score_traces,
    split_configurations,
    summarize_segments,
)
from searcheval.types import Query

METRICS = ["ndcg@10", "mrr", "precision@2", "recall@20", "map"]


def trace(tid, retrieved, *, segment="web", query=None, **fields):
    rec = {"trace_id": tid, "ts": "2026-12-01T10:00:00Z", "query": query or f"query of {tid}",
           "segment": segment, "retrieved_ids": retrieved, **fields}
    return parse_trace(rec)


def table(*traces):
    return TraceTable.from_traces(traces, source="mem")


def scored(tab, metrics=METRICS, settings=Settings(), **label_args):
    labels = resolve_labels(tab, **label_args)
    return labels, score_traces(tab, labels, metrics, settings)


# --------------------------------------------------------------------------- metrics


def test_per_trace_metrics_follow_the_retrieved_order():
    # b is shown before a although 'b' > 'a' would not change a score tie: scores come from order
    tab = table(trace("t1", ["b", "a", "z"], relevance_scores={"a": 3, "b": 1}),
                trace("t2", ["x", "a", "y", "b"], relevant_ids=["a", "b", "c"]))
    _, scores = scored(tab)
    per = scores.per_trace()
    ndcg_1 = ((2**1 - 1) / log2(2) + (2**3 - 1) / log2(3)) / ((2**3 - 1) / log2(2)
                                                              + (2**1 - 1) / log2(3))
    assert per["t1"]["ndcg@10"] == pytest.approx(ndcg_1, abs=1e-12)
    assert per["t1"]["mrr"] == 1.0
    assert per["t1"]["precision@2"] == 2 / 2
    assert per["t2"]["ndcg@10"] == pytest.approx((1 / log2(3) + 1 / log2(5))
                                                 / (1 / log2(2) + 1 / log2(3) + 1 / log2(4)),
                                                 abs=1e-12)
    assert per["t2"]["mrr"] == 1 / 2
    assert per["t2"]["precision@2"] == 1 / 2
    assert per["t2"]["recall@20"] == 2 / 3
    assert per["t2"]["map"] == pytest.approx((1 / 2 + 2 / 4) / 3, abs=1e-12)


def test_relevance_level_makes_low_grades_irrelevant():
    tab = table(trace("t1", ["b", "a"], relevance_scores={"a": 3, "b": 1}))
    _, scores = scored(tab, ["mrr"], Settings(relevance_level=2))
    assert scores.values["mrr"].tolist() == [1 / 2]


def test_segment_mean_of_two_traces():
    tab = table(trace("t1", ["a", "b"], relevant_ids=["a"], segment="web"),
                trace("t2", ["a", "b"], relevant_ids=["b"], segment="web"),
                trace("t3", ["a", "b"], relevant_ids=["b"], segment="app"),
                trace("t4", ["a", "b"], segment="app"))  # unlabelled: left out, not zero
    _, scores = scored(tab, ["mrr"])
    segments, overall = summarize_segments(tab, scores)
    assert segments == {"app": {"mrr": 1 / 2}, "web": {"mrr": (1 + 1 / 2) / 2}}
    assert overall == {"mrr": (1 + 1 / 2 + 1 / 2) / 3}
    assert np.isnan(scores.values["mrr"][3])
    assert scores.per_trace()["t4"] == {"mrr": None}


def test_batches_give_the_same_numbers_as_one_batch():
    rng = np.random.default_rng(3)
    traces = []
    for i in range(60):
        depth = int(rng.integers(0, 12))
        ret = [f"d{j}" for j in rng.choice(30, size=depth, replace=False)]
        scores = {f"d{j}": int(g) for j, g in zip(rng.choice(30, size=4, replace=False),
                                                  rng.integers(0, 4, size=4))}
        traces.append(trace(f"t{i}", ret, relevance_scores=scores))
    tab = table(*traces)
    labels = resolve_labels(tab)
    one = score_traces(tab, labels, METRICS, cell_budget=10**9)
    many = score_traces(tab, labels, METRICS, cell_budget=7)  # one trace per batch
    for name in METRICS:
        assert np.array_equal(one.values[name], many.values[name], equal_nan=True)


# --------------------------------------------------------------------------- labels & coverage


def test_coverage_overall_and_per_segment():
    tab = table(trace("t1", ["a"], relevant_ids=["a"], segment="web"),
                trace("t2", ["a"], relevant_ids=["a"], segment="web"),
                trace("t3", ["a"], segment="web"),
                trace("t4", ["a"], relevance_scores={"a": 0}, segment="app"),
                trace("t5", ["a"], relevant_ids=[], segment="app"))
    labels = resolve_labels(tab)
    cov = measure_coverage(tab, labels, min_coverage=0.8)
    assert (cov.labelled, cov.traces, cov.share) == (3, 5, 3 / 5)
    assert cov.segments == {"app": (2, 1), "web": (3, 2)}
    assert cov.segment_share("web") == 2 / 3 and cov.segment_share("app") == 1 / 2
    assert not cov.passed
    assert cov.to_dict()["segments"]["web"] == {"share": 2 / 3, "labelled": 2, "unlabelled": 1,
                                                "traces": 3}
    assert labels.sources() == {"relevance_scores": 1, "relevant_ids": 2, "judgments": 0,
                                "none": 2}


def test_judgments_join_by_query_id_or_by_text_only_when_the_trace_has_none():
    judgments = {"q1": {"a": 3, "b": 0}, "q2": {"c": 2}}
    index = query_index([Query(id="q1", text="Email Validation"), Query(id="q2", text="OCR")])
    tab = table(trace("t1", ["b", "a"], query_id="q1"),  # joined by id
                trace("t2", ["b", "a"], query="  email   VALIDATION"),  # joined by text
                trace("t3", ["b", "a"], query_id="q1", relevant_ids=["b"]),  # own labels win
                trace("t4", ["b", "a"], query_id="q7"),  # nothing to join
                trace("t5", ["c"], query="ocr", query_id="q2"))
    labels, scores = scored(tab, ["mrr"], judgments=judgments, queries=index)
    assert labels.source.tolist() == [FROM_JUDGMENTS, FROM_JUDGMENTS, FROM_IDS, NO_LABELS,
                                      FROM_JUDGMENTS]
    assert np.allclose(scores.values["mrr"], [1 / 2, 1 / 2, 1.0, np.nan, 1.0], equal_nan=True)
    # without the text index, t2 is unlabelled
    labels = resolve_labels(tab, judgments=judgments)
    assert labels.labelled.tolist() == [True, False, True, False, True]


def test_stale_labels_are_dropped_and_counted():
    catalog = {"a", "b", "c"}
    tab = table(trace("t1", ["gone", "a"], relevance_scores={"a": 3, "gone": 3}),
                trace("t2", ["b"], relevant_ids=["gone2"]),
                trace("t3", ["b"], relevant_ids=["b"]),
                trace("t4", ["c"], query_id="q1"))
    labels, scores = scored(tab, ["mrr", "recall@20"], catalog=catalog,
                            judgments={"q1": {"c": 1, "retired": 2}})
    assert labels.stale.to_dict() == {"dropped": 3, "traces": 3, "left_unlabelled": 1}
    assert labels.labelled.tolist() == [True, False, True, True]
    assert labels.source.tolist() == [FROM_SCORES, NO_LABELS, FROM_IDS, FROM_JUDGMENTS]
    # t1 is scored on 'a' alone: first relevant at rank 2, recall 1/1
    assert scores.values["mrr"][0] == 1 / 2 and scores.values["recall@20"][0] == 1.0
    assert scores.values["recall@20"][3] == 1.0  # t4: 'retired' no longer counts against it
    assert measure_coverage(tab, labels).share == 3 / 4


# --------------------------------------------------------------------------- thresholds


def test_thresholds_merge_default_and_segment_floors():
    t = parse_thresholds({"default": {"NDCG@10": 0.7, "recall@20": 0.85},
                          "segments": {"app": {"ndcg@10": 0.5, "mrr": 0.9,
                                               "min_coverage": 0.5}},
                          "min_coverage": 0.8})
    assert t.for_segment("web") == {"ndcg@10": 0.7, "recall@20": 0.85}
    assert t.for_segment("app") == {"ndcg@10": 0.5, "recall@20": 0.85, "mrr": 0.9}
    assert t.metrics == ["ndcg@10", "recall@20", "mrr"]
    assert (t.min_coverage, t.segment_min_coverage) == (0.8, {"app": 0.5})


@pytest.mark.parametrize("data, message", [
    ({"default": {"ndcg": 0.7}}, "field 'default.ndcg': metric 'ndcg' needs a cutoff"),
    ({"default": {"ndcg@10": 1.5}},
     "field 'default.ndcg@10': expected a number in [0, 1], got 1.5"),
    ({"min_coverage": "high"}, "field 'min_coverage': expected a number in [0, 1], got 'high'"),
    ({"floors": {}}, "thresholds.json: unknown key(s) ['floors']"),
    ({"segments": {"app": 0.5}}, "field 'segments.app': expected an object {metric: floor}"),
])
def test_thresholds_refusals(data, message):
    with pytest.raises(InputError) as err:
        parse_thresholds(data, file="thresholds.json")
    assert message in str(err.value)


def test_failure_formatting():
    f = Failure("web", "ndcg@10", 0.612, 0.7)
    assert f.describe() == "segment=web ndcg@10=0.612 < 0.700 (-0.088)"
    assert f.to_dict() == {"segment": "web", "metric": "ndcg@10", "value": 0.612,
                           "threshold": 0.7, "delta": 0.612 - 0.7,
                           "message": "segment=web ndcg@10=0.612 < 0.700 (-0.088)"}
    assert Failure("app", "mrr", None, 0.5).describe() == \
        "segment=app mrr=- < 0.500 (no labelled trace)"


def test_check_thresholds_lists_every_miss():
    t = parse_thresholds({"default": {"mrr": 0.7}, "segments": {"app": {"mrr": 0.4,
                                                                        "min_coverage": 0.9}},
                          "min_coverage": 0.8})
    segments = {"web": {"mrr": (1 + 1 / 2) / 2}, "app": {"mrr": 1 / 2}, "new": {"mrr": None},
                "ok": {"mrr": 0.7}}
    cov = Coverage(traces=10, labelled=7, segments={"web": (4, 4), "app": (2, 1), "new": (3, 0),
                                                    "ok": (1, 1)})
    failures = check_thresholds(segments, cov, t)
    assert [f.describe() for f in failures] == [
        "segment=(all) coverage=0.700 < 0.800 (-0.100)",
        "segment=app coverage=0.500 < 0.900 (-0.400)",
        "segment=new mrr=- < 0.700 (no labelled trace)",
    ]
    assert check_thresholds(segments, cov, None) == []


# --------------------------------------------------------------------------- A/B


def p_of(differences, **kw):
    """The shared paired test (searcheval.stats) on one list of differences."""
    d = np.asarray(differences, dtype=np.float64)
    return paired_randomization_test(np.zeros(d.size), d, **kw)


def test_paired_test_exact_when_every_sign_flip_fits():
    assert p_of([1, 1, 1]) == 2 / 2**3
    assert p_of([2, 1, 1]) == 2 / 2**3  # |±2±1±1| >= 4 only for ++ and --
    assert p_of([1, -1]) == 4 / 4
    assert p_of([0.0, 0.0]) == 1.0
    assert p_of([]) is None
    # 16 pairs are still enumerated: 13 ones and 3 ties, only all-plus and all-minus on the
    # ones reach |13|, times the 2**3 free signs of the ties
    assert p_of([1.0] * 13 + [0.0] * 3) == 2 * 2**3 / 2**16


def test_paired_test_random_flips_fixed_seed():
    d = [1.0] * 20  # 20 > 16 pairs: sampled; only ++..+ and --..- reach |20|
    p = p_of(d, seed=0)
    assert p == (0 + 1) / (10_000 + 1)
    assert p_of(d, seed=0) == p
    # 17 ones: exact p = 2 / 2**17; the estimate of 10,000 flips is (hits + 1) / 10,001
    assert abs(p_of([1.0] * 17) - 2 / 2**17) < 1e-3
    both = sign_flip_pvalues(np.array([[1.0, 1.0], [1.0, -1.0], [1.0, 1.0]]))
    assert both.tolist() == [2 / 8, 8 / 8]
    # a NaN difference is a left-out pair: same p as without it
    assert sign_flip_pvalues(np.array([[1.0], [np.nan], [1.0]])).tolist() == [2 / 4]


def test_the_gate_and_the_ab_share_one_statistic():
    import searcheval.replay.scoring as replay_module

    assert replay_module.sign_flip_pvalues is sign_flip_pvalues
    assert not hasattr(replay_module, "paired_randomization_test")


def ab_tables():
    a = table(trace("a1", ["x", "r1"], query_id="q1", relevant_ids=["r1"]),  # mrr 1/2
              trace("a2", ["r2", "x"], query_id="q2", relevant_ids=["r2"]),  # 1
              trace("a3", ["r3", "x"], query_id="q3", relevant_ids=["r3"]),  # 1
              trace("a4", ["x", "y"], query_id="q4", relevant_ids=["r4"]),  # 0
              trace("a5", ["x", "r4"], query_id="q4", relevant_ids=["r4"]),  # 1/2 -> q4: 1/4
              trace("a6", ["r5"], query="only in a", relevant_ids=["r5"]))
    b = table(trace("b1", ["r1", "x"], query_id="q1", relevant_ids=["r1"]),  # 1: win
              trace("b2", ["r2"], query_id="q2", relevant_ids=["r2"]),  # 1: tie
              trace("b3", ["x", "r3"], query_id="q3", relevant_ids=["r3"]),  # 1/2: loss
              trace("b4", ["r4"], query_id="q4", relevant_ids=["r4"]),  # 1: win
              trace("b5", ["r6"], query="only in b", relevant_ids=["r6"]),
              trace("b6", ["r1"], query_id="q1"))  # unlabelled: no value
    return a, b


def test_ab_wins_losses_ties_on_queries_both_saw():
    a, b = ab_tables()
    ab = compare_configurations((a, scored(a, ["mrr"])[1]), (b, scored(b, ["mrr"])[1]),
                                names=("control", "treatment"))
    c = ab.segments["web"]["mrr"]
    assert (c.pairs, c.wins, c.losses, c.ties) == (4, 2, 1, 1)
    assert c.mean_a == pytest.approx((1 / 2 + 1 + 1 + 1 / 4) / 4, abs=1e-15)
    assert c.mean_b == pytest.approx((1 + 1 + 1 / 2 + 1) / 4, abs=1e-15)
    # differences 1/2, 0, -1/2, 3/4 (observed |sum| 3/4); the zero's sign changes nothing, and
    # |±1/2 ±1/2 ±3/4| >= 3/4 for (+,+,+), (-,-,-), (+,-,±), (-,+,±): 6 of the 8 sign patterns
    assert c.p_value == 6 / 8
    assert ab.segments[ALL]["mrr"] == c
    assert ab.to_dict()["wins_are"] == "b better than a"


def test_ab_matches_by_query_text_when_there_is_no_query_id():
    a = table(trace("a1", ["x", "r"], query="Weather  API", relevant_ids=["r"]))
    b = table(trace("b1", ["r"], query="weather api", relevant_ids=["r"]),
              trace("b2", ["r"], query="weather api", segment="app", relevant_ids=["r"]))
    ab = compare_configurations((a, scored(a, ["mrr"])[1]), (b, scored(b, ["mrr"])[1]))
    assert list(ab.segments) == ["web", ALL]  # 'app' has no pair: A never saw it there
    assert (ab.segments["web"]["mrr"].pairs, ab.segments["web"]["mrr"].wins) == (1, 1)


def test_split_configurations():
    t = table(trace("t1", ["a"], configuration="treatment"),
              trace("t2", ["a"], configuration="control"),
              trace("t3", ["a"], configuration="treatment"))
    sides, excluded = split_configurations(t)
    assert [(n, [x.trace_id for x in s]) for n, s in sides] == [("control", ["t2"]),
                                                                ("treatment", ["t1", "t3"])]
    assert excluded == 0
    sides, excluded = split_configurations(t, ["treatment"])
    assert [n for n, _ in sides] == ["treatment"] and excluded == 1
    with pytest.raises(InputError, match="no trace of configuration 'other'"):
        split_configurations(t, ["other"])
    three = table(trace("t1", ["a"], configuration="x"), trace("t2", ["a"], configuration="y"),
                  trace("t3", ["a"]))
    with pytest.raises(InputError, match=r"several configurations \(x, y, none \(1 traces\)\)"):
        split_configurations(three)
    plain = table(trace("t1", ["a"]))
    assert split_configurations(plain)[0][0][0] is None


def test_replay_gates_a_and_compares_b():
    a, b = ab_tables()
    thresholds = parse_thresholds({"default": {"mrr": 0.8}, "min_coverage": 0.9})
    report = replay([("control", a), ("treatment", b)], metrics=["mrr"], thresholds=thresholds)
    assert report.main.segments == {"web": {"mrr": (1 / 2 + 1 + 1 + 0 + 1 / 2 + 1) / 6}}
    assert [f.describe() for f in report.failures] == [
        f"segment=web mrr={4 / 6:.3f} < 0.800 ({4 / 6 - 0.8:+.3f})"]
    assert not report.passed
    assert report.other.coverage.share == 5 / 6
    out = report.to_dict()
    assert out["ab"]["segments"]["web"]["mrr"]["wins"] == 2
    assert out["ab"]["b_report"]["coverage"]["labelled"] == 5
    assert set(report.timings) == {"labels", "metrics", "segments", "labels_b", "metrics_b",
                                   "segments_b", "ab"}

"""Conventions: a run parameter over the dataset's setting over the default, each printed with
where it came from in metrics.json and report.md; the judged-share floor's alert names its
source; the gate's per-category floors accept automatic segments."""

from __future__ import annotations

from datetime import datetime, timezone
from math import log2

import pytest

from searcheval.errors import InputError
from searcheval.evaluation.alerts import coverage_reasons
from searcheval.evaluation.baseline import Baseline
from searcheval.evaluation.conventions import resolve_conventions
from searcheval.evaluation.gate import check_gate
from searcheval.evaluation.report import EvaluationResult, markdown_report, query_notes
from searcheval.metrics.coverage import results_coverage
from searcheval.metrics.scoring import score_run
from searcheval.types import Collection, DatasetSettings, Judgment, Query, RankedRun, Resource

SETTINGS = DatasetSettings(gain="linear", relevance_level=2, coverage_floor=0.5,
                           source="/data/dl/searcheval.yaml")


def collection(settings=DatasetSettings(), scale=(0, 3)) -> Collection:
    queries = [Query("q1", "what is a cat", intent="a definition", persona="a pupil"),
               Query("q2", "cat")]
    judgments = [Judgment("q1", "a", 3), Judgment("q1", "b", 1), Judgment("q2", "b", 2)]
    return Collection("c", [Resource("a", "A", ""), Resource("b", "B", "")], queries, judgments,
                      grade_scale=scale, settings=settings,
                      provenance={"grade_scale": "inferred: 0..the largest grade in the qrels"})


def test_parameter_over_dataset_setting_over_default():
    c = resolve_conventions(collection(SETTINGS), relevance_level=3)
    assert (c.gain, c.relevance_level, c.no_relevant, c.coverage_floor) == ("linear", 3, "one", 0.5)
    assert c.sources == {"gain": "dataset setting in /data/dl/searcheval.yaml",
                         "relevance_level": "run parameter relevance_level",
                         "no_relevant": "default",
                         "coverage_floor": "dataset setting in /data/dl/searcheval.yaml",
                         "grade_scale": "inferred: 0..the largest grade in the qrels"}
    plain = resolve_conventions(collection())
    assert (plain.gain, plain.relevance_level, plain.coverage_floor) == ("exponential", 1, 0.9)
    assert set(plain.sources.values()) - {"default"} == {"inferred: 0..the largest grade in the qrels"}


def test_bad_parameters_and_an_unreachable_relevance_level_are_refused():
    with pytest.raises(InputError, match="expected a share between 0 and 1") as err:
        resolve_conventions(collection(), coverage_floor=1.5)
    assert err.value.field == "coverage_floor"
    with pytest.raises(InputError, match=r"the relevance level 4 \(run parameter relevance_level\) "
                                         r"is above the top of the grade scale 0..3") as err:
        resolve_conventions(collection(), relevance_level=4)
    assert err.value.field == "relevance_level"


def test_the_conventions_change_the_numbers_as_stated():
    c = collection(SETTINGS)
    run = RankedRun("bm25", {"q1": [("b", 2.0), ("a", 1.0)], "q2": [("b", 1.0)]})
    conventions = resolve_conventions(c)
    s = score_run(run, c.qrels(), c.queries, ("ndcg@10", "mrr"), conventions.settings())
    # linear gain: q1 has b (1) at rank 1, a (3) at rank 2; ideal a then b
    q1 = (1 / log2(2) + 3 / log2(3)) / (3 / log2(2) + 1 / log2(3))
    assert s.values("ndcg@10")["q1"] == pytest.approx(q1, abs=1e-12)
    # relevance level 2: b (grade 1) is not relevant for q1, a at rank 2 is
    assert s.values("mrr") == {"q1": 1 / 2, "q2": 1.0}
    default = score_run(run, c.qrels(), c.queries, ("mrr",),
                        resolve_conventions(collection()).settings())
    assert default.values("mrr")["q1"] == 1.0


def test_metrics_json_and_report_print_the_conventions_and_their_sources():
    c = collection(SETTINGS)
    conventions = resolve_conventions(c, no_relevant="zero")
    run = RankedRun("bm25", {"q1": [("a", 1.0)], "q2": [("x", 1.0)]})
    scores = {"bm25": score_run(run, c.qrels(), c.queries, ("ndcg@10",), conventions.settings())}
    coverage = results_coverage({"bm25": run}, c.qrels(), 10, conventions.coverage_floor,
                                conventions.source("coverage_floor"))
    segments = {q: s for q, s in scores["bm25"].segments.items()}
    result = EvaluationResult(run_id="r", started_at=datetime(2026, 12, 1, tzinfo=timezone.utc),
                              finished_at=None, source="dl", input_hashes={}, model="m",
                              scores=scores, gate=None, coverage=coverage,
                              validation={"findings": [], "notes": ["test.tsv has no header"]},
                              conventions=conventions.to_dict(),
                              queries=query_notes(c.queries, segments))
    doc = result.metrics_document()
    assert doc["conventions"]["gain"] == "linear"
    assert doc["conventions"]["no_relevant"] == "zero"
    assert doc["conventions"]["grade_scale"] == [0, 3]
    assert doc["conventions"]["sources"]["no_relevant"] == "run parameter no_relevant"
    assert doc["conventions"]["sources"]["grade_map"] == "none: the grades are whole numbers"
    assert doc["segments"] == {"words:1": 1, "words:4+": 1, "digits:no": 2, "quoted:no": 2}
    assert doc["configurations"]["bm25"]["by_segment"]["words:1"] == {"ndcg@10": 0.0}
    assert doc["queries"]["q1"] == {"text": "what is a cat", "category": "all",
                                    "segments": ["words:4+", "digits:no", "quoted:no"],
                                    "intent": "a definition", "persona": "a pupil"}
    assert "intent" not in doc["queries"]["q2"]
    report = markdown_report(result)
    assert "- gain of a grade g in nDCG: g (linear, trec_eval's) (dataset setting in " \
           "/data/dl/searcheval.yaml)" in report
    assert "- relevant for MRR, Precision, Recall, MAP: grade >= 2 (dataset setting in " in report
    assert "- judged-share floor of the top 10: 0.5 (dataset setting in " in report
    # q1 (4 words) has a (3) at rank 1 but not b (1): linear gain, ideal a then b
    q1 = 3 / log2(2) / (3 / log2(2) + 1 / log2(3))
    assert doc["configurations"]["bm25"]["by_segment"]["words:4+"] == {"ndcg@10": pytest.approx(q1)}
    assert f"| words:4+ | 1 | {q1:.3f} |" in report
    assert "| q1 | what is a cat | all | words:4+ digits:no quoted:no | a definition | a pupil |" \
        in report
    assert "- note: test.tsv has no header" in report
    # the judged share is 1 of 2 (x is unjudged): under the dataset's floor 0.5? no: equal
    assert coverage["bm25"]["judged_share"] == 1 / 2 and not coverage["bm25"]["below_floor"]


def test_the_coverage_alert_says_what_the_floor_was_and_where_it_came_from():
    run = RankedRun("dense", {"q1": [("x", 1.0), ("a", 0.5)]})
    coverage = results_coverage({"dense": run}, {"q1": {"a": 1}}, 10, 0.6,
                                "dataset setting in /data/dl/searcheval.yaml")
    (reason,) = coverage_reasons(coverage)
    assert reason["summary"] == ("judged@10 of dense is 0.500, under the floor 0.600 (dataset "
                                 "setting in /data/dl/searcheval.yaml)")
    assert reason["floor_source"] == "dataset setting in /data/dl/searcheval.yaml"


def test_a_segment_floor_trips_the_gate():
    queries = [Query("a", "lamp"), Query("b", "red oak writing desk"), Query("c", "big desk")]
    qrels = {"a": {"x": 1}, "b": {"x": 1}, "c": {"x": 1}}
    run = RankedRun("fused", {"a": [("x", 1.0)], "b": [("y", 2.0), ("x", 1.0)],
                              "c": [("x", 1.0)]})
    scores = score_run(run, qrels, queries, ("mrr",))
    baseline = Baseline("fused", {"mrr": scores.means["mrr"]},
                        category_floors={"words:4+": {"mrr": 0.6}, "words:1": {"mrr": 0.9}})
    gate = check_gate(baseline, scores)
    assert not gate.passed
    (trip,) = gate.tripped
    assert (trip.kind, trip.category, trip.value, trip.baseline) == ("category-floor", "words:4+",
                                                                      1 / 2, 0.6)

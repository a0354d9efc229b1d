"""Baselines that say what they are of: unrounded values, provenance, comparability refusals and
one baseline per dataset."""

from __future__ import annotations

import json

import pytest

from searcheval.errors import InputError
from searcheval.evaluation.baseline import (
    Provenance,
    baseline_from_scores,
    check_comparable,
    load_baseline,
    resolve_baseline,
    write_baseline,
)
from searcheval.evaluation.gate import check_gate
from searcheval.metrics.engine import Settings
from searcheval.metrics.scoring import score_run
from searcheval.types import Query, RankedRun

QUERIES = [Query("q1", "a", "exact-name"), Query("q2", "b", "paraphrase"),
           Query("q3", "c", "paraphrase")]
QRELS = {"q1": {"a": 3}, "q2": {"b": 3}, "q3": {"c": 3}}
CONVENTIONS = {"gain": "exponential", "no_relevant": "one", "relevance_level": 1}


def scores():
    """Relevant documents at ranks 1, 3 and 7: MRR (1 + 1/3 + 1/7) / 3, which 6 decimals round."""
    def at(rank, rel):
        return [(f"j{i}", 10.0 - i) for i in range(rank - 1)] + [(rel, 1.0)]

    run = RankedRun("fused", {"q1": at(1, "a"), "q2": at(3, "b"), "q3": at(7, "c")})
    return score_run(run, QRELS, QUERIES, ("ndcg@10", "mrr", "recall@20"))


def test_a_baseline_keeps_its_values_unrounded_so_unchanged_code_passes_at_tolerance_0(tmp_path):
    s = scores()
    mrr = (1 + 1 / 3 + 1 / 7) / 3
    assert round(mrr, 6) != mrr  # the old 6-decimal baseline would trip at tolerance 0
    path = tmp_path / "baseline.json"
    write_baseline(path, baseline_from_scores(s, run_id="r1", model="m",
                                              provenance=Provenance(dataset="toy")))
    baseline = load_baseline(path)
    assert baseline.metrics["mrr"] == mrr
    assert baseline.per_query["q3"]["mrr"] == 1 / 7
    assert baseline.query_ids == ["q1", "q2", "q3"]
    assert baseline.conventions == {**CONVENTIONS, "metrics": ["mrr", "ndcg@10", "recall@20"]}
    result = check_gate(baseline, scores(), tolerance=0)
    assert result.passed and result.tripped == []
    assert all(c["delta"] == 0 for c in result.compared.values())


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"dataset": "scifact"}, "dataset", "the baseline is of dataset 'toy', this run of 'scifact'"),
    ({"query_ids": ["q1", "q2"]}, "query_ids",
     "the baseline's query set (3 queries) differs from this run's (2): 1 of its queries are "
     "not in this run (first: 'q3')"),
    ({"conventions": {**CONVENTIONS, "gain": "linear"}}, "conventions.gain",
     "the baseline was scored with gain 'exponential', this run with 'linear'"),
    ({"conventions": {**CONVENTIONS, "no_relevant": "zero"}}, "conventions.no_relevant",
     "the baseline was scored with no_relevant 'one', this run with 'zero'"),
])
def test_a_run_that_differs_from_the_baseline_is_refused_naming_the_difference(tmp_path, change,
                                                                               field, words):
    path = tmp_path / "baseline.json"
    write_baseline(path, baseline_from_scores(scores(), run_id="r1", model="m",
                                              provenance=Provenance(dataset="toy")))
    run = {"dataset": "toy", "query_ids": ["q1", "q2", "q3"], "conventions": CONVENTIONS}
    run.update(change)
    with pytest.raises(InputError) as info:
        check_comparable(load_baseline(path), **run)
    assert info.value.field == field and info.value.message.startswith(words)
    assert info.value.file is not None


def test_a_baseline_from_before_provenance_is_not_checked(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"configuration": "fused", "metrics": {"mrr": 0.5}}))
    check_comparable(load_baseline(path), dataset="anything", query_ids=["x"],
                     conventions={"gain": "linear"})


def test_one_baseline_per_dataset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_baseline(tmp_path / "baseline.json", baseline_from_scores(
        scores(), run_id="r1", model="m", provenance=Provenance(dataset="fixtures")))
    ids = ["q1", "q2", "q3"]
    # the default path, another dataset, no file of its own: published as "no baseline"
    baseline, reason = resolve_baseline("baseline.json", "scifact", query_ids=ids,
                                        conventions=CONVENTIONS)
    assert baseline is None
    assert reason.startswith("no baseline for dataset 'scifact' (create baselines/scifact.json")
    # named on purpose: refused, never gated against another dataset's baseline
    with pytest.raises(InputError, match="the baseline is of dataset 'fixtures', this run of "
                                         "'scifact'"):
        resolve_baseline(tmp_path / "baseline.json", "scifact", query_ids=ids,
                         conventions=CONVENTIONS)
    # its own file beside baseline.json is found
    (tmp_path / "baselines").mkdir()
    write_baseline(tmp_path / "baselines" / "scifact.json", baseline_from_scores(
        scores(), run_id="r2", model="m", provenance=Provenance(dataset="scifact")))
    baseline, reason = resolve_baseline("baseline.json", "scifact", query_ids=ids,
                                        conventions=CONVENTIONS)
    assert reason is None and baseline.from_run == "r2"
    baseline, _ = resolve_baseline("baseline.json", "fixtures", query_ids=ids,
                                   conventions=CONVENTIONS)
    assert baseline.from_run == "r1"
    assert resolve_baseline(None, "fixtures", query_ids=ids, conventions=CONVENTIONS)[0] is None


def test_conventions_are_the_effective_ones():
    from searcheval.evaluation.baseline import run_conventions

    assert run_conventions(Settings(trec_compat=True), ("mrr",)) == {
        "gain": "linear", "no_relevant": "zero", "relevance_level": 1, "metrics": ["mrr"]}

"""Input validation against the Great Expectations suites in expectations/ (real GX, no mocks)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from searcheval.errors import InputError
from searcheval.evaluation import validation
from searcheval.evaluation.validation import (
    StaleJudgment,
    fresh_judgments,
    load_suite_file,
    validate_collection,
)
from searcheval.io.fixtures import CATEGORIES, load_fixtures
from searcheval.metrics.coverage import results_coverage
from searcheval.types import Collection, Judgment, Query, RankedRun, Resource

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 2, tzinfo=timezone.utc)
UPDATED = NOW - timedelta(days=60)  # every resource's last change
JUDGED = NOW - timedelta(days=30)  # every judgment: after the last change, well within a year
PER_CATEGORY = 3
RESOURCES = ("r1", "r2", "r3")


def build(**changes) -> Collection:
    """A clean collection: 3 resources, 3 queries in each of the 5 categories, every pair judged."""
    resources = [Resource(id=r, name=f"name {r}", description=f"about {r}", price_usd=0.01,
                          settled_30d=10, success_rate=0.9, updated_at=UPDATED)
                 for r in RESOURCES]
    queries = [Query(id=f"{c}-{i}", text=f"query {c} {i}", category=c)
               for c in CATEGORIES for i in range(PER_CATEGORY)]
    judgments = [Judgment(q.id, r, 1, judged_at=JUDGED) for q in queries for r in RESOURCES]
    fields = {"name": "built", "resources": resources, "queries": queries, "judgments": judgments}
    fields.update(changes)
    return Collection(**fields)


CLEAN = build()
N_QUERIES = len(CATEGORIES) * PER_CATEGORY  # 5 * 3 = 15
N_JUDGMENTS = N_QUERIES * len(RESOURCES)  # 15 * 3 = 45


def errors_of(report):
    return [(f.suite, f.field, f.expectation, f.count) for f in report.findings
            if f.severity == "error"]


# --------------------------------------------------------------------------- clean inputs


def test_fixtures_validate_without_error_or_stale_judgment():
    collection = load_fixtures(ROOT / "fixtures")
    report = validate_collection(collection, now=NOW)
    assert report.findings == []
    assert report.stale == []
    assert report.ok
    assert (report.queries, report.judged_queries) == (15, 15)
    assert len(fresh_judgments(collection, report)) == 270  # 15 queries * 18 resources
    report.raise_for_errors()  # nothing to raise


def test_clean_built_collection_passes():
    report = validate_collection(CLEAN, now=NOW)
    assert report.findings == [] and report.stale == [] and report.ok
    assert (report.queries, report.judged_queries) == (N_QUERIES, N_QUERIES)


def test_suites_are_built_once_per_process():
    validate_collection(CLEAN, now=NOW)
    definitions = validation._state["definitions"]
    context = validation._state["context"]
    validate_collection(CLEAN, now=NOW)
    assert validation._state["definitions"] is definitions
    assert validation._state["context"] is context
    assert context.validation_results_store.list_keys() == []  # results are not kept


def test_module_import_does_not_import_gx():
    code = "import sys, searcheval.evaluation.validation; print('great_expectations' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- broken inputs


def _with_resource(index: int, **fields) -> list[Resource]:
    resources = list(CLEAN.resources)
    resources[index] = replace(resources[index], **fields)
    return resources


def _without_queries(*ids: str) -> dict:
    return {"queries": [q for q in CLEAN.queries if q.id not in ids],
            "judgments": [j for j in CLEAN.judgments if j.query_id not in ids]}


BROKEN = {
    "duplicate resource id": (
        {"resources": CLEAN.resources + [replace(CLEAN.resources[0], name="copy")]},
        # both rows carrying the id fail
        [("catalog", "id", "expect_column_values_to_be_unique", 2)], "r1"),
    "negative price": (
        {"resources": _with_resource(1, price_usd=-0.5)},
        [("catalog", "price_usd", "expect_column_values_to_be_between", 1)], "-0.5"),
    "success rate above 1": (
        {"resources": _with_resource(2, success_rate=1.5)},
        [("catalog", "settlement.success_rate", "expect_column_values_to_be_between", 1)],
        "1.5"),
    "negative settled count": (
        {"resources": _with_resource(0, settled_30d=-1)},
        [("catalog", "settlement.settled_30d", "expect_column_values_to_be_between", 1)], "r1 (settled_30d=-1)"),
    "missing name": (
        {"resources": _with_resource(0, name=None)},
        [("catalog", "name", "expect_column_values_to_not_be_null", 1)], "r1"),
    "unknown category": (
        {"queries": CLEAN.queries + [Query(id="odd", text="odd one", category="weird")],
         "judgments": CLEAN.judgments + [Judgment("odd", "r1", 0, judged_at=JUDGED)]},
        [("queries", "category", "expect_column_values_to_be_in_set", 1)], "odd (category='weird')"),
    "duplicate query id": (
        {"queries": CLEAN.queries + [CLEAN.queries[0]]},
        [("queries", "id", "expect_column_values_to_be_unique", 2)], "exact-name-0"),
    "too few queries in a category": (
        _without_queries("adversarial-2"),
        [("query_categories", "category", "expect_column_values_to_be_between", 1)],
        "adversarial (queries=2)"),
    "grade outside the scale": (
        {"judgments": [replace(CLEAN.judgments[0], grade=5)] + CLEAN.judgments[1:]},
        [("judgments", "grade", "expect_column_values_to_be_in_set", 1)],
        "(exact-name-0, r1) (grade=5)"),
    "duplicate judgment": (
        {"judgments": CLEAN.judgments + [replace(CLEAN.judgments[4], grade=3, line=47)]},
        # the original and the copy
        [("judgments", "query_id,resource_id", "expect_compound_columns_to_be_unique", 2)],
        "line 47 (exact-name-1, r2)"),
    "judgment of an unknown query": (
        {"judgments": CLEAN.judgments + [Judgment("ghost", "r1", 1, judged_at=JUDGED)]},
        [("judgments", "query_id", "expect_column_values_to_be_in_set", 1)], "ghost"),
    "golden query without judgment": (
        {"judgments": [j for j in CLEAN.judgments if j.query_id != "filtered-1"]},
        [("judgments", "query_id", "expect_column_distinct_values_to_contain_set", 1)],
        "filtered-1"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_input_is_an_error_naming_the_field(case):
    changes, expected, offending = BROKEN[case]
    report = validate_collection(build(**changes), now=NOW)
    assert errors_of(report) == expected
    assert not report.ok
    (finding,) = report.errors
    assert any(offending in e for e in finding.examples)
    assert offending in finding.message
    with pytest.raises(InputError) as err:
        report.raise_for_errors()
    assert err.value.field == finding.field
    assert finding.expectation in str(err.value)
    assert offending in str(err.value)


def test_error_names_the_input_file():
    sources = {"catalog": Path("fixtures/catalog.json"), "queries": Path("q.json"),
               "judgments": Path("fixtures/judgments.csv")}
    report = validate_collection(build(resources=_with_resource(1, price_usd=-0.5),
                                       sources=sources), now=NOW)
    with pytest.raises(InputError) as err:
        report.raise_for_errors()
    assert err.value.file == str(Path("fixtures/catalog.json"))
    assert str(err.value).startswith(
        f"{Path('fixtures/catalog.json')} field 'price_usd': "
        "check expect_column_values_to_be_between failed: expected a price >= 0 (or no price); "
        "1 of 3 rows failed, e.g. r2 (price_usd=-0.5)")


def test_several_errors_are_all_reported_and_counted_in_the_message():
    report = validate_collection(build(
        resources=_with_resource(1, price_usd=-0.5),
        judgments=CLEAN.judgments + [Judgment("ghost", "r1", 1)],
    ), now=NOW)
    assert [(s, f) for s, f, _, _ in errors_of(report)] == [("catalog", "price_usd"),
                                                             ("judgments", "query_id")]
    with pytest.raises(InputError, match=r"1 other error\(s\): <built>:judgments field 'query_id'"):
        report.raise_for_errors()


def test_a_value_of_the_wrong_type_is_an_error_not_a_crash():
    report = validate_collection(build(resources=_with_resource(0, price_usd="cheap")), now=NOW)
    (finding,) = report.errors
    assert (finding.field, finding.expectation) == ("price_usd",
                                                    "expect_column_values_to_be_between")
    assert "could not be evaluated" in finding.message


def test_a_judged_at_that_is_not_a_datetime_is_refused():
    judgments = [replace(CLEAN.judgments[0], judged_at="2026-11-01")] + CLEAN.judgments[1:]
    with pytest.raises(InputError, match="expected datetimes, got '2026-11-01'") as err:
        validate_collection(build(judgments=judgments), now=NOW)
    assert err.value.field == "judged_at"


def test_an_empty_catalog_is_an_error():
    report = validate_collection(build(resources=[]), now=NOW)
    # the table check, and all 45 judgments name a resource that is not there (warnings)
    assert errors_of(report) == [("catalog", None, "expect_table_row_count_to_be_between", 1)]
    assert len(report.stale) == N_JUDGMENTS


def test_beir_collection_uses_the_all_category():
    queries = [replace(q, category="all") for q in CLEAN.queries]
    report = validate_collection(build(queries=queries), now=NOW)
    assert report.findings == []
    report = validate_collection(build(queries=queries), now=NOW, categories=CATEGORIES)
    # 15 queries outside the known set, and each of the 5 known categories is empty
    assert errors_of(report) == [
        ("queries", "category", "expect_column_values_to_be_in_set", N_QUERIES),
        ("query_categories", "category", "expect_column_values_to_be_between", len(CATEGORIES)),
    ]


def test_min_per_category_is_a_parameter():
    collection = build(**_without_queries("adversarial-2"))
    assert validate_collection(collection, now=NOW, min_per_category=2).ok
    assert not validate_collection(collection, now=NOW, min_per_category=3).ok


def test_grade_scale_comes_from_the_collection():
    judgments = [replace(CLEAN.judgments[0], grade=5)] + CLEAN.judgments[1:]
    assert validate_collection(build(judgments=judgments, grade_scale=(0, 5)), now=NOW).ok


# --------------------------------------------------------------------------- staleness


def stale_collection() -> Collection:
    """2 judgments of a removed resource, r3 changed after every judgment of it (15), and 4
    judgments of r2 (which has no updated_at) judged 400 days ago."""
    resources = _with_resource(2, updated_at=JUDGED + timedelta(days=1))
    resources[1] = replace(resources[1], updated_at=None)
    old = {q.id for q in CLEAN.queries[:4]}
    judgments = [replace(j, judged_at=NOW - timedelta(days=400))
                 if j.doc_id == "r2" and j.query_id in old else j for j in CLEAN.judgments]
    judgments += [Judgment("exact-name-0", "gone", 2, judged_at=JUDGED),
                  Judgment("paraphrase-0", "gone", 0, judged_at=JUDGED)]
    return build(resources=resources, judgments=judgments)


def test_each_stale_reason_is_detected_with_exact_counts():
    collection = stale_collection()
    report = validate_collection(collection, now=NOW)
    assert report.ok  # stale judgments are warnings
    warnings = {f.field + "/" + f.expectation: f.count for f in report.findings}
    assert warnings == {
        "resource_id/expect_column_values_to_be_in_set": 2,
        "judged_at/expect_column_pair_values_a_to_be_greater_than_b": N_QUERIES,
        "judged_at/expect_column_values_to_be_between": 4,
    }
    assert all(f.severity == "warning" for f in report.findings)
    by_reason = report.to_dict()["stale"]["by_reason"]
    assert by_reason == {"resource-removed": 2, "changed-after-judged": N_QUERIES, "too-old": 4}
    assert StaleJudgment("exact-name-0", "gone", "resource-removed") in report.stale
    assert StaleJudgment("adversarial-2", "r3", "changed-after-judged") in report.stale
    assert StaleJudgment("exact-name-2", "r2", "too-old") in report.stale
    fresh = fresh_judgments(collection, report)
    assert len(fresh) == (N_JUDGMENTS + 2) - (2 + N_QUERIES + 4)
    assert not {(j.query_id, j.doc_id) for j in fresh} & {(s.query_id, s.doc_id)
                                                          for s in report.stale}


def test_max_age_none_disables_the_age_check():
    report = validate_collection(stale_collection(), now=NOW, max_age_days=None)
    assert report.to_dict()["stale"]["by_reason"]["too-old"] == 0


def test_max_age_is_relative_to_now():
    report = validate_collection(CLEAN, now=NOW, max_age_days=29)  # judged 30 days ago
    assert len(report.stale) == N_JUDGMENTS
    assert {s.reason for s in report.stale} == {"too-old"}
    assert validate_collection(CLEAN, now=NOW, max_age_days=30).stale == []


def test_a_judgment_stale_for_two_reasons_is_listed_once_under_the_first():
    judgments = CLEAN.judgments + [
        Judgment("exact-name-0", "gone", 1, judged_at=NOW - timedelta(days=400))]
    report = validate_collection(build(judgments=judgments), now=NOW)
    counts = sorted(f.count for f in report.findings)
    assert counts == [1, 1]  # both checks fail on it
    assert report.stale == [StaleJudgment("exact-name-0", "gone", "resource-removed")]


def test_judgments_without_judged_at_are_never_too_old_nor_changed():
    resources = [replace(r, updated_at=NOW) for r in CLEAN.resources]
    judgments = [replace(j, judged_at=None) for j in CLEAN.judgments]
    report = validate_collection(build(resources=resources, judgments=judgments), now=NOW,
                                 max_age_days=1)
    assert report.findings == [] and report.stale == []


def test_report_to_dict_is_json():
    report = validate_collection(stale_collection(), now=NOW)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is True
    assert (data["errors"], data["warnings"]) == (0, 3)
    assert data["stale"]["count"] == 2 + N_QUERIES + 4
    assert data["queries"] == data["judged_queries"] == N_QUERIES


# --------------------------------------------------------------------------- in a process apart

APART = """
import json, sys
from datetime import datetime, timezone
sys.path.insert(0, "tests/integration")
from searcheval.evaluation.validation import validate_collection
from test_validation import NOW, stale_collection
report = validate_collection(stale_collection(), now=NOW, apart=True)
print(json.dumps({"report": report.to_dict(), "gx": "great_expectations" in sys.modules}))
"""


def test_apart_gives_the_same_report_and_leaves_gx_out_of_the_process():
    # the stale collection: a finding of each stale reason, with its rows (2 + 15 + 4)
    expected = validate_collection(stale_collection(), now=NOW).to_dict()
    assert expected["stale"]["count"] == 2 + N_QUERIES + 4
    out = subprocess.run([sys.executable, "-c", APART], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["report"] == json.loads(json.dumps(expected))
    assert got["gx"] is False  # imported and run in the process apart only


def test_apart_refuses_a_broken_suite_file_naming_it(tmp_path, monkeypatch):
    for name in validation.SUITES:
        (tmp_path / f"{name}.json").write_text(
            (ROOT / "expectations" / f"{name}.json").read_text())
    bad = tmp_path / "judgments.json"
    bad.write_text(json.dumps({"name": "judgments", "expectations": [
        {"type": "expect_column_values_to_be_frobbed", "kwargs": {"column": "query_id"}}]}))
    monkeypatch.setenv("SEARCHEVAL_EXPECTATIONS_DIR", str(tmp_path))
    with pytest.raises(InputError, match="only 0 of 1 expectations") as err:
        validate_collection(CLEAN, now=NOW, apart=True)
    assert err.value.file == str(bad)


def test_apart_that_dies_is_an_error_not_an_empty_report(monkeypatch):
    # the process apart killed before it answers (out of memory, say): no findings is not "ok"
    built = []
    original = validation.Apart.__init__

    def started(self):
        original(self)
        self._process.kill()
        built.append(self)

    monkeypatch.setattr(validation.Apart, "__init__", started)
    with pytest.raises(RuntimeError, match="the validation process ended"):
        validate_collection(CLEAN, now=NOW, apart=True)
    assert built and built[0]._process.poll() is not None


# --------------------------------------------------------------------------- suite files


def test_suite_files_load_into_expectation_suites():
    counts = {name: len(load_suite_file(ROOT / "expectations" / f"{name}.json").expectations)
              for name in validation.SUITES}
    assert counts == {"catalog": 9, "queries": 5, "query_categories": 1, "judgments": 11}


def test_a_suite_file_with_an_unknown_expectation_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "expectations": [
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "id"}},
        {"type": "expect_column_values_to_be_frobbed", "kwargs": {"column": "id"}},
    ]}))
    with pytest.raises(InputError, match="only 1 of 2 expectations are valid"):
        load_suite_file(path)


# --------------------------------------------------------------------------- results coverage


def _run(name: str, results: dict[str, list[str]]) -> RankedRun:
    return RankedRun(name, {q: [(d, 1.0 / (i + 1)) for i, d in enumerate(docs)]
                            for q, docs in results.items()})


def test_results_coverage_arithmetic():
    qrels = {"q1": {f"d{i}": i % 2 for i in range(7)},  # d0..d6 judged (grade 0 counts)
             "q2": {"a": 1, "b": 0, "c": 2, "d": 0, "e": 1}}
    runs = {
        "partial": _run("partial", {
            "q1": [f"d{i}" for i in range(12)],  # top 10: d0..d9, 7 judged
            "q2": ["a", "b", "c", "d", "e"],  # 5 of 5 judged
            "q3": [],  # abstained: no pair
        }),
        "full": _run("full", {"q2": ["e", "d", "c"]}),
        "silent": _run("silent", {"q1": [], "q2": []}),
    }
    cov = results_coverage(runs, qrels, k=10, floor=0.9)
    partial = cov["partial"]
    assert (partial["pairs"], partial["judged_pairs"], partial["queries"]) == (10 + 5, 7 + 5, 2)
    assert partial["judged_share"] == pytest.approx((7 + 5) / (10 + 5))
    assert partial["mean_per_query"] == pytest.approx((7 / 10 + 5 / 5) / 2)
    assert partial["below_floor"] is True
    assert partial["unjudged_examples"] == ["q1:d7", "q1:d8", "q1:d9"]
    assert cov["full"]["judged_share"] == 3 / 3 and cov["full"]["below_floor"] is False
    assert cov["silent"]["judged_share"] is None and cov["silent"]["below_floor"] is False
    only_q1 = _run("only_q1", {"q1": runs["partial"].top_ids("q1", 12)})
    assert results_coverage({"p": only_q1}, qrels, k=10)["p"]["judged_share"] == 7 / 10


def test_results_coverage_respects_k_and_floor():
    qrels = {"q1": {"d0": 1, "d1": 0}}
    run = {"c": _run("c", {"q1": ["d0", "d1", "x", "y"]})}
    assert results_coverage(run, qrels, k=2)["c"]["judged_share"] == 2 / 2
    assert results_coverage(run, qrels, k=4, floor=0.5)["c"]["below_floor"] is False
    assert results_coverage(run, qrels, k=4, floor=0.51)["c"]["below_floor"] is True
    with pytest.raises(InputError, match="k >= 1"):
        results_coverage(run, qrels, k=0)

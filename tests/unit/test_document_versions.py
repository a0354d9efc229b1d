"""Versions of an engine's documents as its lookup reported them, and the staleness they tell
without a catalog (searcheval.judging.versions): which version a judgment is of, document-changed
and document-gone per judgment row, the effective grade of a pair re-graded after a change, and
the content hash a lookup gives a document (a named field, else the sha256 of the whole
document)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone

from searcheval.judging.judgments import JudgmentRow, effective_judgments, parse_rule
from searcheval.judging.versions import (Observed, applied, judged_hash, lookup_stale_reason,
                                         observe)
from searcheval.rankers.documents import check_lookup, document_hash, look_up

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
DAY = timedelta(days=1)


def history(*answers):
    """Versions after reports (hash or None for gone) one day apart from T0."""
    versions = []
    for i, h in enumerate(answers):
        versions = observe(versions, h, T0 + i * DAY, title=f"t{i}")
    return versions


def test_equal_answers_in_a_row_are_one_version_and_a_hash_that_comes_back_is_a_new_one():
    versions = history("A", "A", "B", None, "A")
    assert [(v.version, v.content_hash) for v in versions] \
        == [(1, "A"), (2, "B"), (3, None), (4, "A")]
    assert (versions[0].first_seen, versions[0].last_seen) == (T0, T0 + DAY)
    assert versions[0].title == "t1"  # the latest answer's title
    assert versions[2].gone and not versions[3].gone


def test_a_judgment_is_of_the_first_version_reported_at_or_after_it():
    versions = history("A", "A", "B", None, "A")  # A: days 0-1, B: day 2, gone: day 3, A: day 4
    assert judged_hash(None, None, versions) == "A"  # no time: the first version ever reported
    assert judged_hash(None, T0 - DAY, versions) == "A"  # before every report
    assert judged_hash(None, T0 + DAY, versions) == "A"  # the day A was last seen
    assert judged_hash(None, T0 + 1.5 * DAY, versions) == "B"  # between A and B: B came next
    assert judged_hash(None, T0 + 2.5 * DAY, versions) == "A"  # gone is no version: A came next
    assert judged_hash(None, T0 + 5 * DAY, versions) is None  # after every report
    assert judged_hash("B", T0, versions) == "B"  # a recorded hash is what was judged


def test_a_judgment_of_another_version_than_the_latest_is_changed_and_gone_is_gone():
    assert lookup_stale_reason(None, T0, history("A", "B")) == "document-changed"
    assert lookup_stale_reason(None, T0 + DAY, history("A", "B")) is None  # judged B
    assert lookup_stale_reason("B", T0, history("A", "B")) is None  # the rating page saw B
    assert lookup_stale_reason("A", T0 + DAY, history("A", "B")) == "document-changed"
    assert lookup_stale_reason(None, T0, history("A", None)) == "document-gone"
    assert lookup_stale_reason(None, T0 + 9 * DAY, history("A", "B")) is None  # after: fresh
    assert lookup_stale_reason(None, T0, []) is None  # never looked up


def test_an_observation_counts_as_the_latest_report_before_it_is_written():
    stored = {"d1": history("A"), "d2": history("A")}
    seen = Observed(at=T0 + 3 * DAY, documents={"d1": {"content_hash": "B", "title": "new"},
                                                 "d2": {"content_hash": "A"}, "d3": None})
    after = applied(seen, stored)
    assert [v.content_hash for v in after["d1"]] == ["A", "B"] and after["d1"][1].title == "new"
    assert [(v.content_hash, v.last_seen) for v in after["d2"]] == [("A", T0 + 3 * DAY)]
    assert after["d3"][0].gone
    assert [v.content_hash for v in stored["d1"]] == ["A"]  # the stored list is not changed


def row(judge, grade, at, content_hash=None, doc="d") -> JudgmentRow:
    return JudgmentRow(query_id="q", doc_id=doc, grade=grade, judge=judge, judged_at=at,
                       content_hash=content_hash)


def test_without_a_catalog_a_changed_document_makes_the_rows_of_the_old_version_stale():
    versions = {"d": history("A", "B"), "e": history("A", None)}
    rows = [row("a", 3, T0),  # imported, no hash: of A (reported on day 0)
            row("b", 1, T0 + 2 * DAY, content_hash="B"),  # the rating page, on B
            row("a", 2, T0, doc="e")]
    eff = effective_judgments(rows, parse_rule("median"), [], now=T0 + 3 * DAY,
                              max_age_days=365, catalog=False, versions=versions)
    # a's grade is of A, which changed: only b's counts; e is gone
    assert eff.grades() == {("q", "d"): 1}
    assert eff.stale_pairs == {("q", "e"): "document-gone"}
    assert eff.stale_by_judge["a"] == {"resource-removed": 0, "changed-after-judged": 0,
                                       "too-old": 0, "document-changed": 1, "document-gone": 1}
    # a's only grade of d is stale: with b's gone too, the pair is stale for the change
    eff = effective_judgments(rows[:1], parse_rule("median"), [], now=T0 + 3 * DAY,
                              max_age_days=365, catalog=False, versions=versions)
    assert eff.stale_pairs == {("q", "d"): "document-changed"} and eff.grades() == {}
    # the same rows without versions: nothing is stale (nothing was looked up)
    eff = effective_judgments(rows, parse_rule("median"), [], now=T0 + 3 * DAY,
                              max_age_days=365, catalog=False)
    assert eff.stale_pairs == {} and eff.grades() == {("q", "d"): 1, ("q", "e"): 2}


def test_a_content_hash_is_the_named_field_else_the_sha256_of_the_whole_document(tmp_path):
    path = tmp_path / "docs.jsonl"
    with_hash = {"id": "a", "title": "A", "text": "x" * 5000, "version": "v7"}
    without = {"text": "plain", "id": "b", "title": "B", "meta": {"z": 1, "y": [1, "é"]}}
    path.write_text(json.dumps(with_hash) + "\n" + json.dumps(without, ensure_ascii=False) + "\n")
    found = look_up(check_lookup({"file": str(path), "content_hash": "version"}, "c", None),
                    ["a", "b", "gone"])
    assert found["gone"] == ["gone"]
    a, b = found["documents"]["a"], found["documents"]["b"]
    assert (a["content_hash"], a["hash_source"]) == ("v7", "field")
    canonical = ('{"id":"b","meta":{"y":[1,"é"],"z":1},"text":"plain","title":"B"}')
    assert (b["content_hash"], b["hash_source"]) \
        == (hashlib.sha256(canonical.encode("utf-8")).hexdigest(), "document")
    assert document_hash(without) == document_hash(dict(reversed(list(without.items()))))
    assert document_hash({**without, "text": "plain."}) != document_hash(without)
    assert len(a["text"]) == 2000  # what is kept of a long text

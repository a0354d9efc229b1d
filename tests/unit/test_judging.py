"""The judgment loop's pure logic: the effective-grade rule, staleness from provenance, pooling
and overlap, agreement (known answers with the arithmetic written out, and a cross-check of the
packages against small implementations of our own on random data), judgment files."""

from __future__ import annotations

import json

import math
import random
from datetime import datetime, timedelta, timezone
from itertools import combinations

import numpy as np
import pytest

from searcheval.errors import InputError
from searcheval.judging.agreement import agreement, check_floor, ordinal_alpha, weighted_kappa
from searcheval.judging.files import export_effective, export_rows, read_judgment_file
from searcheval.judging.judgments import (JudgmentRow, effective_judgments, latest_by_judge,
                                          parse_rule, stale_reason)
from searcheval.judging.pool import assign, build_pool, pool_rows, ranked_ids, write_pool
from searcheval.judging.summary import bounds, unjudged_pairs
from searcheval.metrics.engine import Settings
from searcheval.types import Collection, Query, RankedRun, Resource

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def doc(rid: str, updated: datetime | None = None) -> Resource:
    return Resource(id=rid, name=rid.title(), description=f"about {rid}", updated_at=updated)


def row(q, d, grade, judge, at=T0, **kw) -> JudgmentRow:
    return JudgmentRow(query_id=q, doc_id=d, grade=grade, judge=judge, judged_at=at, **kw)


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize("rule, grades, expected", [
    ("median", {"a": 3, "b": 1, "c": 2}, 2),  # sorted 1, 2, 3: the middle one
    ("median", {"a": 3, "b": 1}, 1),  # sorted 1, 3: the lower middle (never rounded up)
    ("median", {"a": 0, "b": 2, "c": 3, "d": 3}, 2),  # 0, 2, 3, 3: lower middle = 2
    ("majority", {"a": 2, "b": 2, "c": 0}, 2),  # two judges of three said 2
    ("majority", {"a": 3, "b": 1}, 1),  # a tie goes to the lowest tied grade
    ("judge:b", {"a": 3, "b": 1}, 1),
    ("judge:z", {"a": 3, "b": 1}, None),  # z never graded it: no effective grade
])
def test_the_rule_combines_the_judges_latest_grades(rule, grades, expected):
    assert parse_rule(rule).combine(grades) == expected


def test_an_unknown_rule_is_refused_naming_the_choices():
    with pytest.raises(InputError, match="median, majority, judge:NAME") as err:
        parse_rule("mean")
    assert err.value.field == "judgment_rule"
    with pytest.raises(InputError):
        parse_rule("judge:")


def test_each_judges_latest_row_counts_and_a_retracted_one_does_not():
    rows = [row("q", "d", 1, "a", T0, id=1), row("q", "d", 3, "a", T0 + timedelta(days=1), id=2),
            row("q", "d", 0, "a", T0 + timedelta(days=2), id=3, retracted_at=NOW),
            row("q", "d", 2, "b", None, id=4), row("q", "d", 1, "b", T0, id=5)]
    latest = latest_by_judge(rows)
    assert {j: r.grade for j, r in latest[("q", "d")].items()} == {"a": 3, "b": 1}


def test_a_re_judgment_adds_a_row_and_the_effective_grade_follows_the_rule():
    rows = [row("q1", "d1", 0, "a", T0), row("q1", "d1", 3, "a", T0 + timedelta(days=1)),
            row("q1", "d1", 1, "b", T0), row("q1", "d1", 2, "c", T0)]
    docs = [doc("d1")]
    median = effective_judgments(rows, parse_rule("median"), docs, now=NOW)
    assert median.grades() == {("q1", "d1"): 2}  # latest: a=3, b=1, c=2 -> median 2
    assert median.judgments[0].judge == "a,b,c"
    assert median.judgments[0].judged_at == T0 + timedelta(days=1)
    only_b = effective_judgments(rows, parse_rule("judge:b"), docs, now=NOW)
    assert only_b.grades() == {("q1", "d1"): 1}
    assert median.summary()["multiply_judged"] == 1 and median.summary()["rows"] == 4


def test_pairs_one_judge_graded_alike_share_their_latest_grades():
    # read-only {judge: grade} maps, one per (judge, grade): a WANDS-sized set kept 233k of them
    rows = [row("q1", "d1", 2, "a"), row("q1", "d2", 2, "a"), row("q2", "d1", 0, "a"),
            row("q2", "d2", 2, "b"), row("q3", "d1", 1, "a"), row("q3", "d1", 3, "b")]
    eff = effective_judgments(rows, parse_rule("median"), [doc("d1"), doc("d2")], now=NOW)
    latest = eff.latest
    assert latest == {("q1", "d1"): {"a": 2}, ("q1", "d2"): {"a": 2}, ("q2", "d1"): {"a": 0},
                      ("q2", "d2"): {"b": 2}, ("q3", "d1"): {"a": 1, "b": 3}}
    assert latest[("q1", "d1")] is latest[("q1", "d2")]  # a said 2 of both
    assert len({id(g) for g in latest.values()}) == 4  # a=2 shared; a=0, b=2, a+b apart
    # median of 1 and 3: the lower middle, 1
    assert eff.grades() == {("q1", "d1"): 2, ("q1", "d2"): 2, ("q2", "d1"): 0,
                            ("q2", "d2"): 2, ("q3", "d1"): 1}
    assert eff.summary()["multiply_judged"] == 1


# --------------------------------------------------------------------------- staleness


def test_staleness_uses_the_rows_provenance():
    fresh_doc = doc("d", updated=T0 - timedelta(days=1))
    assert stale_reason(row("q", "d", 1, "a"), fresh_doc, now=NOW, max_age_days=365) is None
    assert stale_reason(row("q", "d", 1, "a"), None, now=NOW, max_age_days=365) \
        == "resource-removed"
    changed = doc("d", updated=T0 + timedelta(days=1))  # changed after it was judged
    assert stale_reason(row("q", "d", 1, "a"), changed, now=NOW, max_age_days=365) \
        == "changed-after-judged"
    recorded = row("q", "d", 1, "a", content_hash="0" * 64)  # judged another content
    assert stale_reason(recorded, fresh_doc, now=NOW, max_age_days=365) == "changed-after-judged"
    same = row("q", "d", 1, "a", content_hash=fresh_doc.content_hash)
    assert stale_reason(same, fresh_doc, now=NOW, max_age_days=365) is None
    # 30 days old: stale under a 29-day maximum, fresh under 30
    assert stale_reason(row("q", "d", 1, "a"), fresh_doc, now=NOW, max_age_days=29) == "too-old"
    assert stale_reason(row("q", "d", 1, "a"), fresh_doc, now=NOW, max_age_days=30) is None


def test_stale_rows_do_not_count_and_are_shown_per_judge():
    d = doc("d", updated=T0 + timedelta(days=2))
    rows = [row("q", "d", 3, "a", T0), row("q", "d", 1, "b", T0 + timedelta(days=3)),
            row("q", "e", 2, "a", T0)]  # e is not in the catalog
    eff = effective_judgments(rows, parse_rule("median"), [d], now=NOW, max_age_days=365)
    # a's grade of d predates d's change: only b's counts
    assert eff.grades() == {("q", "d"): 1}
    assert eff.stale_pairs == {("q", "e"): "resource-removed"}
    assert eff.stale_by_judge["a"] == {"resource-removed": 1, "changed-after-judged": 1,
                                       "too-old": 0}
    assert "b" not in eff.stale_by_judge
    # the stale-only pair keeps a grade (validation reports it, scoring leaves it out)
    assert {(j.query_id, j.doc_id) for j in eff.judgments} == {("q", "d"), ("q", "e")}


# --------------------------------------------------------------------------- pooling


def test_ranked_ids_order_by_score_then_doc_id_descending():
    assert ranked_ids({"q": {"a": 1.0, "b": 2.0, "c": 1.0}}) == {"q": ["b", "c", "a"]}


def test_the_pool_is_the_unjudged_union_ordered_by_best_rank_then_configurations():
    runs = {"x": {"q1": ["a", "b", "c"], "q2": ["f", "g"]},
            "y": {"q1": ["c", "d", "a"], "q2": ["h", "f"]}}
    judged = {("q1", "a")}
    items = build_pool(runs, judged, depth=2)
    # rank 1: q1/c (y), q2/f (x), q2/h (y); f was returned by both, so it comes first
    # rank 2: q1/b (x), q1/d (y); q2/f is already in at rank 1; g is below depth 2? no, rank 2
    assert [(i.query_id, i.doc_id, i.best_rank, i.configurations) for i in items] == [
        ("q2", "f", 1, 2), ("q1", "c", 1, 1), ("q2", "h", 1, 1),
        ("q1", "b", 2, 1), ("q1", "d", 2, 1), ("q2", "g", 2, 1)]
    with pytest.raises(InputError):
        build_pool(runs, judged, depth=0)


def test_overlap_assigns_a_share_to_two_judges_in_turn():
    items = build_pool({"x": {f"q{i}": [f"d{j}" for j in range(5)] for i in range(4)}}, set(), 5)
    assert len(items) == 20
    out = assign(items, 0.2, ["ann", "bob", "cy"], seed="p1")
    doubles = [i for i in out if i.judges_needed == 2]
    assert len(doubles) == round(0.2 * 20) == 4
    assert all(len(set(i.assigned)) == 2 for i in doubles)
    assert all(len(i.assigned) == 1 for i in out if i.judges_needed == 1)
    assert [i.assigned[0] for i in out[:3]] == ["ann", "bob", "cy"]
    assert assign(items, 0.2, ["ann", "bob", "cy"], seed="p1") == out  # deterministic
    with pytest.raises(InputError, match="two judges"):
        assign(items, 0.2, ["ann"], seed="p1")
    with pytest.raises(InputError):
        assign(items, 1.5, [], seed="p1")


def test_what_a_pool_file_shows_has_no_rank_score_or_configuration():
    collection = Collection("c", [doc("a")], [Query("q", "find a", "paraphrase", intent="i")], [])
    items = build_pool({"secret-config": {"q": ["a"]}}, set(), 10)
    rows = pool_rows(items, collection)
    assert rows == [{"position": 1, "query_id": "q", "query": "find a", "category": "paraphrase",
                     "intent": "i", "persona": "", "doc_id": "a", "title": "A",
                     "text": "about a", "tags": "", "judges_needed": 1, "assigned": ""}]
    text = write_pool(rows, "csv") + write_pool(rows, "jsonl")
    assert "secret-config" not in text and "best_rank" not in text and "score" not in text


# --------------------------------------------------------------------------- bounds


def test_bounds_are_the_means_with_every_unjudged_top_k_document_relevant_or_not():
    run = RankedRun("x", {"q": [("a", 3.0), ("u", 2.0), ("b", 1.0)]})
    qrels = {"q": {"a": 1, "b": 0}}
    assert unjudged_pairs(run, qrels, 10) == [("q", "u")]
    got = bounds(run, qrels, ["q"], ["precision@10", "judged@10", "ndcg@10"], Settings(),
                 top_grade=3, k=10)
    assert "judged@10" not in got  # it measures the judging itself
    # P@10 now 1/10; u relevant: 2/10
    assert got["precision@10"] == pytest.approx([1 / 10, 2 / 10])
    # nDCG@10 now 1 (a is the only relevant doc, at rank 1); with u at grade 3:
    # DCG = (2^1-1)/log2(2) + (2^3-1)/log2(3), ideal = (2^3-1)/log2(2) + (2^1-1)/log2(3)
    low = (1 / math.log2(2) + 7 / math.log2(3)) / (7 / math.log2(2) + 1 / math.log2(3))
    assert got["ndcg@10"] == pytest.approx([low, 1.0])


def test_agreement_on_a_configurations_top_k_counts_only_the_pairs_it_returned():
    from searcheval.judging.summary import top_agreement

    run = RankedRun("x", {"q": [("a", 3.0), ("b", 2.0), ("c", 1.0), ("z", 0.5)]})
    latest = {("q", "a"): {"x": 1, "y": 1}, ("q", "b"): {"x": 2, "y": 2},
              ("q", "c"): {"x": 1, "y": 2}, ("q", "z"): {"x": 0, "y": 3},  # z: rank 4
              ("q", "d"): {"x": 3}}  # one judge: not counted
    got = top_agreement(run, latest, (0, 3), k=3)
    assert got == {"items": 3, "alpha": pytest.approx(4 / 9)}  # the known answer below


# --------------------------------------------------------------------------- agreement


def test_weighted_kappa_known_answer():
    # judges a = [0,1,2,3], b = [0,1,2,2], labels 0..3, weights w_ij = (i-j)^2 / 9
    # observed disagreement: one item (3,2) of 4: (1/9) * (1/4) = 1/36
    # expected: marginals a = 1/4 each, b = (1/4, 1/4, 1/2, 0); sum_i (i-j)^2 = 14, 6, 6, 14
    #   (1/4) * (1/9) * (14/4 + 6/4 + 6/2 + 0) = (1/36) * 8 = 8/36
    # kappa = 1 - (1/36) / (8/36) = 1 - 1/8
    assert weighted_kappa([0, 1, 2, 3], [0, 1, 2, 2], [0, 1, 2, 3]) == pytest.approx(1 - 1 / 8)
    assert weighted_kappa([1, 1], [1, 1], [0, 1, 2, 3]) is None  # undefined: one label only
    assert weighted_kappa([1], [2], [0, 1, 2, 3]) is None


def test_ordinal_alpha_known_answer():
    # units (1,1), (2,2), (1,2): n_1 = 3, n_2 = 3, n = 6
    # ordinal delta(1,2) = (n_1 + n_2 - (n_1 + n_2)/2)^2 = (6 - 3)^2 = 9
    # coincidences: o_11 = 2, o_22 = 2, o_12 = o_21 = 1
    # D_o = (1/6) * (1*9 + 1*9) = 3; D_e = (1/(6*5)) * (3*3*9 * 2) = 5.4
    # alpha = 1 - 3 / 5.4 = 4/9
    matrix = np.array([[1, 2, 1], [1, 2, 2]], dtype=float)
    assert ordinal_alpha(matrix, [0, 1, 2, 3]) == pytest.approx(4 / 9)
    assert ordinal_alpha(np.array([[1, 1], [1, 1]], dtype=float), [0, 1, 2, 3]) is None


def test_the_agreement_block_overall_per_category_and_the_largest_disagreements():
    latest = {("q1", "d1"): {"a": 1, "b": 1}, ("q1", "d2"): {"a": 2, "b": 2},
              ("q2", "d3"): {"a": 1, "b": 2}, ("q2", "d4"): {"a": 3}}  # d4: one judge only
    out = agreement(latest, {"q1": "exact-name", "q2": "paraphrase"}, (0, 3), floor=0.667)
    assert out["items"] == 3 and out["judges"] == ["a", "b"]
    assert out["alpha"] == pytest.approx(4 / 9)  # the known answer above
    assert out["below_floor"] is True
    assert out["kappa"][0]["judges"] == ["a", "b"] and out["kappa"][0]["items"] == 3
    # exact-name: (1,1), (2,2): no disagreement, D_o = 0, so alpha = 1 - 0 / D_e = 1
    assert out["by_category"]["exact-name"] == {"items": 2, "alpha": 1.0}
    assert out["by_category"]["paraphrase"]["items"] == 1
    assert out["disagreements"] == [{"query_id": "q2", "doc_id": "d3",
                                     "grades": {"a": 1, "b": 2}, "range": 1}]
    assert agreement({}, {}, (0, 3))["below_floor"] is False  # nothing to measure: no alert
    with pytest.raises(InputError):
        check_floor(1.5)


def own_weighted_kappa(a, b, labels):
    k = len(labels)
    index = {v: i for i, v in enumerate(labels)}
    observed = np.zeros((k, k))
    for x, y in zip(a, b):
        observed[index[x], index[y]] += 1
    observed /= len(a)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    w = np.array([[(i - j) ** 2 for j in range(k)] for i in range(k)], dtype=float)
    return 1 - (w * observed).sum() / (w * expected).sum()


def own_ordinal_alpha(matrix, labels):
    units = [[v for v in matrix[:, u] if not math.isnan(v)] for u in range(matrix.shape[1])]
    units = [u for u in units if len(u) >= 2]
    index = {v: i for i, v in enumerate(labels)}
    k = len(labels)
    o = np.zeros((k, k))
    for values in units:
        m = len(values)
        for i, j in ((i, j) for i in range(m) for j in range(m) if i != j):
            o[index[values[i]], index[values[j]]] += 1 / (m - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    delta = np.zeros((k, k))
    for c in range(k):
        for kk in range(k):
            lo, hi = min(c, kk), max(c, kk)
            delta[c, kk] = (n_c[lo:hi + 1].sum() - (n_c[c] + n_c[kk]) / 2) ** 2
    d_o = (o * delta).sum() / n
    d_e = (np.outer(n_c, n_c) * delta).sum() / (n * (n - 1))
    return 1 - d_o / d_e


def test_the_packages_agree_with_our_own_implementations_on_random_data():
    rng = random.Random(13)
    labels = [0, 1, 2, 3]
    for _ in range(40):
        items = rng.randint(4, 30)
        a = [rng.choice(labels) for _ in range(items)]
        b = [min(3, max(0, x + rng.choice([-1, 0, 0, 1]))) for x in a]
        ours = own_weighted_kappa(a, b, labels)
        theirs = weighted_kappa(a, b, labels)
        if theirs is None:
            assert not np.isfinite(ours) or len(set(a) | set(b)) == 1
        else:
            assert theirs == pytest.approx(ours, abs=1e-12)
        judges = rng.randint(2, 5)
        matrix = np.array([[rng.choice(labels) if rng.random() > 0.3 else math.nan
                            for _ in range(items)] for _ in range(judges)], dtype=float)
        theirs = ordinal_alpha(matrix, labels)
        if theirs is not None:
            assert theirs == pytest.approx(own_ordinal_alpha(matrix, labels), abs=1e-9)
    # and per judge pair, the block's kappa is sklearn's over the items both graded
    latest = {(f"q{i}", "d"): {"a": rng.choice(labels), "b": rng.choice(labels),
                               "c": rng.choice(labels)} for i in range(12)}
    block = agreement(latest, {}, (0, 3))
    for entry, (x, y) in zip(block["kappa"], combinations(["a", "b", "c"], 2)):
        keys = sorted(latest)
        assert entry["kappa"] == pytest.approx(own_weighted_kappa(
            [latest[k][x] for k in keys], [latest[k][y] for k in keys], labels))


# --------------------------------------------------------------------------- files


@pytest.fixture
def collection():
    return Collection("c", [doc("d1"), doc("d2")], [Query("q1", "one"), Query("q2", "two")], [],
                      grade_scale=(0, 3))


def test_import_reads_csv_trec_beir_and_jsonl(tmp_path, collection):
    (tmp_path / "j.csv").write_text("query_id,resource_id,grade,judged_at,judge,note\n"
                                    "q1,d1,3,2026-11-02T00:00:00Z,ann,clear\nq2,d2,0,,bob,\n")
    rows = read_judgment_file(tmp_path / "j.csv", collection, now=NOW)
    assert [(r.query_id, r.doc_id, r.grade, r.judge, r.judged_at, r.note) for r in rows] == [
        ("q1", "d1", 3, "ann", T0 + timedelta(days=1), "clear"), ("q2", "d2", 0, "bob", NOW, None)]
    (tmp_path / "j.qrels").write_text("q1 0 d1 2\nq2 0 d2 1\n")
    rows = read_judgment_file(tmp_path / "j.qrels", collection, judge="cy", now=NOW)
    assert [(r.grade, r.judge, r.source) for r in rows] == [(2, "cy", "import"), (1, "cy", "import")]
    (tmp_path / "j.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    assert [(r.query_id, r.doc_id, r.grade) for r in
            read_judgment_file(tmp_path / "j.tsv", collection, judge="cy")] == [("q1", "d2", 1)]
    (tmp_path / "j.jsonl").write_text('{"query_id": "q2", "doc_id": "d1", "grade": 3}\n')
    rows = read_judgment_file(tmp_path / "j.jsonl", collection, judge="m", source="model")
    assert (rows[0].grade, rows[0].source) == (3, "model")


def test_an_import_line_ends_only_at_a_newline(tmp_path, collection):
    """U+2028, U+0085 and \\r inside a note are text, not line breaks (io/files.py's rule): the
    JSONL file's two lines give two rows, the notes whole."""
    notes = ["first\u2028second", "a\u0085b\rc"]
    (tmp_path / "j.jsonl").write_text(
        "".join(json.dumps({"query_id": q, "doc_id": "d1", "grade": 1, "note": n},
                           ensure_ascii=False) + "\n" for q, n in zip(("q1", "q2"), notes)),
        encoding="utf-8", newline="")
    rows = read_judgment_file(tmp_path / "j.jsonl", collection, judge="m")
    assert [(r.query_id, r.note) for r in rows] == [("q1", notes[0]), ("q2", notes[1])]
    (tmp_path / "j.qrels").write_bytes("q1 0 d1 2\nq2 0 d2 1\n".encode())
    assert [r.grade for r in read_judgment_file(tmp_path / "j.qrels", collection,
                                                judge="cy")] == [2, 1]


@pytest.mark.parametrize("body, line, field, words", [
    ("q9 0 d1 1\n", 1, "query_id", "not a golden query"),
    ("q1 0 d1 1\nq1 0 zz 1\n", 2, "doc_id", "not in the catalog"),
    ("q1 0 d1 7\n", 1, "grade", "0..3"),
    ("q1 0 d1 1\nq1 0 d1 2\n", 2, None, "graded twice"),
])
def test_a_bad_import_names_file_line_and_field(tmp_path, collection, body, line, field, words):
    path = tmp_path / "bad.qrels"
    path.write_text(body)
    with pytest.raises(InputError, match=words) as err:
        read_judgment_file(path, collection, judge="ann")
    assert (err.value.file, err.value.line, err.value.field) == (str(path), line, field)


def test_without_a_catalog_any_document_id_may_be_judged(tmp_path, collection):
    from dataclasses import replace

    (tmp_path / "j.qrels").write_text("q1 0 held-by-the-engine 2\n")
    with pytest.raises(InputError, match="not in the catalog"):
        read_judgment_file(tmp_path / "j.qrels", collection, judge="ann")
    engine = replace(collection, resources=[], has_catalog=False)
    rows = read_judgment_file(tmp_path / "j.qrels", engine, judge="ann")
    assert [(r.doc_id, r.grade) for r in rows] == [("held-by-the-engine", 2)]


def test_an_import_without_a_judge_is_refused(tmp_path, collection):
    (tmp_path / "j.qrels").write_text("q1 0 d1 1\n")
    with pytest.raises(InputError, match="--judge"):
        read_judgment_file(tmp_path / "j.qrels", collection)


def test_export_of_effective_grades_and_of_every_row():
    rows = [row("q1", "d1", 1, "a", T0, source="human"), row("q1", "d1", 3, "b", T0)]
    eff = effective_judgments(rows, parse_rule("median"), [doc("d1")], now=NOW)
    assert export_effective(eff, "trec") == "q1 0 d1 1\n"  # median of 1, 3: the lower middle
    assert export_effective(eff, "csv") == ("query_id,resource_id,grade,judged_at,judge\n"
                                            "q1,d1,1,2026-11-01T00:00:00Z,\"a,b\"\n")
    everything = export_rows(rows, "csv").splitlines()
    assert len(everything) == 3 and everything[1].startswith("q1,d1,1,2026-11-01T00:00:00Z,a,human")
    with pytest.raises(InputError, match="one grade per"):
        export_rows(rows, "trec")


def test_the_rating_session_shows_a_judge_only_what_is_assigned_to_them_or_to_anyone():
    from searcheval.judging.app import RatingSession, is_loopback

    collection = Collection("c", [doc("a"), doc("b"), doc("c")], [Query("q", "find")], [])
    items = [{"query_id": "q", "doc_id": "a", "assigned": ["ann"]},
             {"query_id": "q", "doc_id": "b", "assigned": ["bob"]},
             {"query_id": "q", "doc_id": "c", "assigned": []}]
    ann = RatingSession("postgresql://unused", collection, {"pool_id": "p"}, items, "ann")
    assert sorted(ann.pairs) == [("q", "a"), ("q", "c")]
    assert ann.grades == [0, 1, 2, 3]
    with pytest.raises(InputError):
        RatingSession("postgresql://unused", collection, {"pool_id": "p"}, items, " ")
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_run_refuses_an_unknown_rule_and_a_floor_out_of_range_before_any_work(capsys):
    from pathlib import Path

    from searcheval.cli import main

    fixtures = Path(__file__).resolve().parents[2] / "fixtures"
    assert main(["run", "--fixtures", str(fixtures), "--no-baseline", "--judgment-rule", "mean",
                 "--agreement-floor", "2", "--all-errors"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("searcheval: --judgment-rule: expected a judgment rule median, "
                              "majority, judge:NAME; got 'mean'")
    assert any("--agreement-floor" in line and "[-1, 1]" in line for line in err[:-1])


def test_judgments_belong_to_the_declared_name_else_the_folder_never_the_content_fingerprint():
    from searcheval.judging.judgments import judgment_set

    folder = Collection("fixtures", [doc("a")], [Query("q", "x")], [])
    declared = Collection("fixtures", [doc("a")], [Query("q", "x")], [], declared_name="trec-dl")
    assert judgment_set(folder) == "fixtures" and judgment_set(declared) == "trec-dl"
    edited = Resource(id="a", name="A", description="about a, edited")
    changed = Collection("fixtures", [edited], [Query("q", "x")], [])
    assert changed.catalog_id != folder.catalog_id  # the catalog's identity moves with content
    assert judgment_set(changed) == judgment_set(folder)  # the judgments' does not

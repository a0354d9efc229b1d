"""Automatic segments from the query itself, and scores per segment beside the categories."""

from __future__ import annotations

import pytest

from searcheval.metrics.scoring import score_run
from searcheval.metrics.segments import has_quoted_phrase, is_segment, query_segments, segment_order
from searcheval.types import Query, RankedRun


@pytest.mark.parametrize("text, expected", [
    ("lamp", ["words:1", "digits:no", "quoted:no"]),
    ("oak desk", ["words:2", "digits:no", "quoted:no"]),
    ("54 in bench", ["words:3", "digits:yes", "quoted:no"]),
    ('twin over full "bunk beds"', ["words:4+", "digits:no", "quoted:yes"]),
    ("  spaced\tout\u2028words  ", ["words:3", "digits:no", "quoted:no"]),
    ("desk for kids tjat ate 10 year old", ["words:4+", "digits:yes", "quoted:no"]),
    ("“smart” table", ["words:2", "digits:no", "quoted:yes"]),
    ('27.5 " wide', ["words:3", "digits:yes", "quoted:no"]),  # one inch mark is not a phrase
])
def test_segments_of_a_query(text, expected):
    assert query_segments(Query("q", text)) == expected


def test_the_class_segment_comes_from_the_data():
    assert query_segments(Query("q", "sofa", query_class="Sofas"))[-1] == "class:Sofas"


def test_quoted_phrases():
    assert has_quoted_phrase('find "exact words" here')
    assert not has_quoted_phrase("it's a kid's desk")
    assert not has_quoted_phrase('a "" b')


def test_segment_labels_sort_by_kind_then_size():
    labels = ["quoted:no", "words:4+", "class:A", "digits:no", "words:1", "digits:yes", "words:2"]
    assert sorted(labels, key=segment_order) == ["words:1", "words:2", "words:4+", "digits:yes",
                                                 "digits:no", "quoted:no", "class:A"]
    assert is_segment("words:4+") and is_segment("class:Beds")
    assert not is_segment("paraphrase") and not is_segment("words:")


def test_scores_per_segment():
    queries = [Query("a", "lamp", category="c1"), Query("b", "oak desk", category="c1"),
               Query("c", "red oak desk", category="c2"), Query("d", "desk 2", category="c2")]
    qrels = {"a": {"x": 1}, "b": {"x": 1}, "c": {"x": 1}, "d": {"x": 1}}
    # x at rank 1 for a, rank 2 for b, missing for c, rank 1 for d
    run = RankedRun("bm25", {"a": [("x", 1.0)], "b": [("y", 2.0), ("x", 1.0)], "c": [("y", 1.0)],
                             "d": [("x", 1.0)]})
    s = score_run(run, qrels, queries, ("mrr",))
    assert s.by_segment == {
        "words:1": {"mrr": 1.0},
        "words:2": {"mrr": (1 / 2 + 1) / 2},  # b and d
        "words:3": {"mrr": 0.0},
        "digits:yes": {"mrr": 1.0},
        "digits:no": {"mrr": (1 + 1 / 2 + 0) / 3},
        "quoted:no": {"mrr": (1 + 1 / 2 + 0 + 1) / 4},
    }
    assert s.by_category == {"c1": {"mrr": (1 + 1 / 2) / 2}, "c2": {"mrr": (0 + 1) / 2}}
    assert s.segments["d"] == ["words:2", "digits:yes", "quoted:no"]
    assert s.segment_sizes() == {"words:1": 1, "words:2": 2, "words:3": 1, "digits:yes": 1,
                                 "digits:no": 3, "quoted:no": 4}
    assert s.group_means("c2") == {"mrr": 0.5} and s.group_means("words:3") == {"mrr": 0.0}
    assert s.group_means("nowhere") == {}
    assert s.to_dict()["by_segment"]["words:2"] == {"mrr": 0.75}

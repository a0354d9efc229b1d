"""Many candidates against one served configuration: paired differences, bootstrap interval,
randomization p, Holm's correction over the family, which survive."""

from __future__ import annotations

import math

import pytest

from searcheval.errors import InputError
from searcheval.evaluation.candidates import (
    candidate_names,
    candidates_lines,
    candidates_markdown,
    compare_candidates,
    gated_configuration,
    holm,
)
from searcheval.metrics.engine import Settings
from searcheval.metrics.scoring import score_run
from searcheval.types import Query, RankedRun


def test_names_and_what_the_gate_guards():
    assert candidate_names("a, b,a") == ["a", "b"]
    assert candidate_names(None) == []
    assert gated_configuration("a") == "a"
    assert gated_configuration("a,b") is None  # several: the served one is gated
    with pytest.raises(InputError) as e:
        candidate_names("a,,b")
    assert e.value.field == "candidate"


def test_holm_known_answer():
    # sorted 0.01, 0.03, 0.04 times 3, 2, 1: 0.03, 0.06, 0.04 -> step-down maximum 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06], abs=1e-12)
    assert holm([0.2]) == [0.2]  # a family of one is unchanged


QUERIES = [Query(f"q{i:02d}", "text") for i in range(20)]
QRELS = {q.id: {"rel": 1} for q in QUERIES}


def run_with_hits(name, hit_queries):
    """A run that puts `rel` first for the given queries and returns only noise otherwise."""
    return RankedRun(name, {q.id: ([("rel", 2.0), ("x", 1.0)] if q.id in hit_queries
                                   else [("x", 2.0)]) for q in QUERIES})


def scores_of(runs):
    return {r.configuration: score_run(r, QRELS, QUERIES, ("ndcg@10",), Settings()) for r in runs}


def test_family_of_candidates():
    ids = [q.id for q in QUERIES]
    served = run_with_hits("served", set(ids[:5]))
    strong = run_with_hits("strong", set(ids))  # 15 queries better (0 -> 1), none worse
    same = run_with_hits("same", set(ids[:5]))  # no query changed
    block = compare_candidates(scores_of([served, strong, same]), ["strong", "same"], "served")
    s, z = block["candidates"]["strong"], block["candidates"]["same"]
    assert (s["better"], s["worse"], s["queries"]) == (15, 0, 20)
    assert s["delta"] == pytest.approx(15 / 20)
    # 15 equal differences of +1: only the all-positive and all-negative of 2^15 sign patterns
    # of the changed pairs are as extreme -> sampled p = (hits + 1) / (10000 + 1) with hits ~ 0
    assert s["p_value"] < 0.001
    assert z["p_value"] == 1.0 and z["delta"] == 0.0
    # Holm over two: the smaller p doubled, the larger kept (and never below the first)
    assert s["p_holm"] == pytest.approx(min(1.0, 2 * s["p_value"]))
    assert z["p_holm"] == 1.0
    assert block["survivors"] == ["strong"] and s["survives"] and not z["survives"]
    lo, hi = s["ci95"]
    assert lo <= 0.75 <= hi and 0 < lo  # every difference is 0 or 1
    # the spread of the differences: 15 ones and 5 zeros, sample sd
    sd = math.sqrt((15 * 0.25 ** 2 + 5 * 0.75 ** 2) / 19)
    assert s["sd"] == pytest.approx(sd)
    assert s["min_detectable_effect"] == pytest.approx((1.959963984540054 + 0.8416212335729143)
                                                       * sd / math.sqrt(20), rel=1e-9)
    assert "survive the correction: strong" in candidates_lines(block)[-1]
    assert "| strong | 20 |" in candidates_markdown(block)


def test_with_candidate_runs_every_candidate_and_the_served_one():
    from searcheval.evaluation.pipeline import with_candidate
    from searcheval.rankers.configs import configurations_from

    raw = {"configurations": {"bm25": {"kind": "bm25"}, "b2": {"kind": "bm25",
                                                              "params": {"b": 0.5}},
                              "b3": {"kind": "bm25", "params": {"k1": 2.0}, "served": True}}}
    resolved = configurations_from(raw, "c.yaml")
    assert [c.name for c in with_candidate(resolved, ["bm25"], "b2,bm25")] == ["bm25", "b2", "b3"]
    with pytest.raises(InputError) as e:
        with_candidate(resolved, ["bm25"], "b2,b3")
    assert "served configuration" in e.value.message and e.value.field == "candidate"

"""The `fuse` kind: rrf, combsum and combmnz with min-max / z-score normalisation and weights,
by arithmetic and against ranx's fusion on the same lists."""

from __future__ import annotations

import math

import numpy as np
import pytest

from searcheval.errors import InputError
from searcheval.rankers.combine import PreparedLists, fuse_lists, fuse_runs
from searcheval.rankers.configs import configurations_from
from searcheval.types import Query, RankedRun

A = [("d1", 9.0), ("d2", 5.0), ("d3", 4.0)]
B = [("d3", 0.9), ("d1", 0.8), ("d4", 0.2)]


def as_dict(fused):
    return {d: s for d, s in fused}


def test_rrf_weighted_reciprocal_ranks():
    fused = fuse_lists([A, B], weights=[2.0, 1.0], method="rrf", rrf_k=60)
    assert fused == [
        ("d1", pytest.approx(2 / (60 + 1) + 1 / (60 + 2), rel=1e-12)),
        ("d3", pytest.approx(2 / (60 + 3) + 1 / (60 + 1), rel=1e-12)),
        ("d2", pytest.approx(2 / (60 + 2), rel=1e-12)),
        ("d4", pytest.approx(1 / (60 + 3), rel=1e-12)),
    ]


def test_combsum_min_max():
    # A: min 4, max 9 -> d1 1, d2 (5-4)/5 = 0.2, d3 0; B: min 0.2, max 0.9 -> d3 1, d1 0.6/0.7, d4 0
    fused = as_dict(fuse_lists([A, B], method="combsum", normalisation="min-max"))
    assert fused == pytest.approx({"d1": 1 + 0.6 / 0.7, "d3": 0 + 1.0, "d2": 0.2, "d4": 0.0},
                                  rel=1e-12)


def test_combmnz_counts_the_lists_holding_a_document():
    fused = as_dict(fuse_lists([A, B], weights=[0.5, 1.0], method="combmnz",
                               normalisation="min-max"))
    assert fused == pytest.approx({"d1": (0.5 * 1 + 0.6 / 0.7) * 2, "d3": (0.5 * 0 + 1.0) * 2,
                                   "d2": 0.5 * 0.2 * 1, "d4": 0.0}, rel=1e-12)


def test_z_score_uses_the_population_sd():
    mean, sd = 6.0, math.sqrt(((9 - 6) ** 2 + (5 - 6) ** 2 + (4 - 6) ** 2) / 3)
    fused = as_dict(fuse_lists([A], method="combsum", normalisation="z-score"))
    assert fused == pytest.approx({"d1": 3 / sd, "d2": -1 / sd, "d3": -2 / sd}, rel=1e-12)
    assert mean == (9 + 5 + 4) / 3


def test_ties_by_id_descending_and_depth():
    fused = fuse_lists([[("a", 1.0), ("b", 1.0), ("c", 0.5)]], method="combsum",
                       normalisation="none", depth=2)
    assert [d for d, _ in fused] == ["b", "a"]


def random_lists(seed: int, queries: int = 6):
    rng = np.random.default_rng(seed)
    docs = [f"d{i:02d}" for i in range(30)]
    out = []
    for _ in range(queries):
        lists = []
        for _ in range(3):
            chosen = rng.choice(docs, size=int(rng.integers(1, 15)), replace=False)
            scores = rng.random(len(chosen)) * 10  # distinct with probability 1
            lists.append(list(zip(chosen.tolist(), scores.tolist())))
        out.append(lists)
    return out


@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaTypeSafetyWarning")  # ranx's own
@pytest.mark.parametrize("method, norm, ranx_method, weights", [
    ("rrf", "none", "rrf", None),
    ("combsum", "min-max", "sum", None),
    ("combsum", "z-score", "sum", None),
    ("combmnz", "min-max", "mnz", None),
    ("combmnz", "z-score", "mnz", None),
    ("combsum", "min-max", "wsum", [0.2, 1.5, 0.7]),
    ("combsum", "z-score", "wsum", [0.2, 1.5, 0.7]),
])
def test_equal_to_ranx(method, norm, ranx_method, weights):
    from ranx import Run, fuse

    lists_per_query = random_lists(7)
    runs = [Run({f"q{i}": dict(lists[j]) for i, lists in enumerate(lists_per_query)})
            for j in range(3)]
    params = {"weights": weights} if weights else {}
    ranx_norm = {"none": None, "min-max": "min-max", "z-score": "zmuv"}[norm]
    if method == "rrf":
        ranx_norm = None
    theirs = fuse(runs, norm=ranx_norm, method=ranx_method, params=params).to_dict()
    for i, lists in enumerate(lists_per_query):
        ours = as_dict(fuse_lists(lists, weights=weights, method=method, normalisation=norm))
        assert ours == pytest.approx(theirs[f"q{i}"], rel=1e-9, abs=1e-12)


def test_prepared_lists_refuse_nothing_and_reuse_the_layout():
    prepared = PreparedLists.of([A, B])
    first = prepared.fuse(np.array([1.0, 1.0]), "combsum", "min-max")
    again = prepared.fuse(np.array([0.0, 1.0]), "combsum", "min-max")
    assert "min-max" in prepared._normalised  # normalised once, reused by the second fusion
    assert as_dict(again) == pytest.approx({"d3": 1.0, "d1": 0.6 / 0.7, "d4": 0.0, "d2": 0.0})
    assert first[0][0] == "d1"


def test_fuse_run_carries_a_component_failure_as_an_error():
    runs = [RankedRun("a", {"q1": A}, errors={"q2": {"cause": "timeout", "attempts": 3}}),
            RankedRun("b", {"q1": B, "q2": B})]
    params = {"runs": ["a", "b"], "method": "rrf", "normalisation": "none",
              "weights": {"a": 1.0, "b": 1.0}, "rrf_k": 60.0}
    run = fuse_runs("hybrid", runs, [Query("q1", "x"), Query("q2", "y")], params, k=10)
    assert "q2" not in run.results and run.errors["q2"]["cause"] == "a: timeout"
    assert [d for d, _ in run.results["q1"]] == ["d1", "d3", "d2", "d4"]


def test_configuration_of_any_kinds_resolves_with_weights_filled(tmp_path):
    trec = tmp_path / "engine.trec"
    trec.write_text("q1 Q0 d1 1 3.0 e\n")
    raw = {"configurations": {
        "bm25": {"kind": "bm25"}, "engine": {"kind": "trec", "params": {"path": str(trec)}},
        "hybrid": {"kind": "fuse", "served": True,
                   "params": {"runs": ["bm25", "engine"], "weights": {"engine": 0.5}}}}}
    c = configurations_from(raw, "c.yaml")["hybrid"]
    assert c.params["weights"] == {"bm25": 1.0, "engine": 0.5}
    assert [x.name for x in c.components] == ["bm25", "engine"]


@pytest.mark.parametrize("params, field, words", [
    ({"runs": ["bm25", "nope"]}, "hybrid.runs[1]", "not a configuration"),
    ({"runs": ["bm25"], "weights": {"dense": 1}}, "hybrid.weights.dense", "not one of runs"),
    ({"runs": ["bm25"], "weights": {"bm25": 0}}, "hybrid.weights", "at least one weight"),
    ({"runs": ["bm25"], "method": "borda"}, "hybrid.method", "one of rrf"),
    ({"runs": []}, "hybrid.runs", "at least one"),
])
def test_bad_fuse_entries_are_refused_naming_the_parameter(params, field, words):
    raw = {"configurations": {"bm25": {"kind": "bm25"},
                              "hybrid": {"kind": "fuse", "served": True, "params": params}}}
    with pytest.raises(InputError) as e:
        configurations_from(raw, "c.yaml")
    assert e.value.field == field and words in e.value.message and e.value.file == "c.yaml"

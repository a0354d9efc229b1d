"""searcheval tune's inputs: the search space checked against each kind, the split, the refusals
before the first trial (each naming the file and the parameter)."""

from __future__ import annotations

import math

import pytest

from searcheval.errors import InputError
from searcheval.rankers.configs import configurations_from
from searcheval.tuning.space import (
    build_space,
    default_target,
    parse_param,
    read_space_file,
)
from searcheval.tuning.split import check_held_out, smallest_testable, split_queries
from searcheval.tuning.verdict import proposed_entries
from searcheval.types import Query

RAW = {"configurations": {
    "bm25": {"kind": "bm25"},
    "engine": {"kind": "http", "params": {"url": "http://127.0.0.1:9/search", "method": "POST",
                                          "body": {"q": "{text}", "boost": 1.0},
                                          "id": "hits[*].id", "score": "hits[*].score"}},
    "hybrid": {"kind": "fuse", "params": {"runs": ["bm25", "engine"]}},
    "fused": {"kind": "fused", "served": True},
    "dense": {"kind": "dense"},
    "mine": {"kind": "python", "params": {"callable": "tests.example_service:answers",
                                          "options": {"alpha": 0.5}}}}}
FILE = "configurations.yaml"


def space(specs, target=None, source="--param"):
    return build_space(specs, source, RAW, FILE, None, target)


def test_ranges_steps_and_choices():
    s = space({"bm25.k1": "0.5..2:0.5", "hybrid.method": ["rrf", "combsum"],
               "hybrid.weights.engine": "0..1", "bm25.field_weights.name": "1..4:1"})
    k1, method, weight, name = s.dimensions
    assert (k1.kind, k1.grid()) == ("float", [0.5, 1.0, 1.5, 2.0])
    assert method.grid() == ["rrf", "combsum"] and weight.grid() is None
    assert name.grid() == [1.0, 2.0, 3.0, 4.0]
    assert s.grid_size() is None  # one continuous dimension
    assert default_target(s, configurations_from(RAW, FILE)) == "hybrid"


def test_param_flag_and_file(tmp_path):
    assert parse_param("bm25.k1=0.5..2:0.1") == ("bm25.k1", "0.5..2:0.1")
    assert parse_param("hybrid.method=[rrf, combsum]") == ("hybrid.method", ["rrf", "combsum"])
    path = tmp_path / "space.yaml"
    path.write_text("space:\n  bm25.b: {low: 0.2, high: 0.9}\n")
    assert read_space_file(path) == {"bm25.b": {"low": 0.2, "high": 0.9}}


def test_an_http_body_knob_is_a_parameter_of_its_kind():
    # the http kind's `body` is a JSON template of any keys: its knobs can be searched
    s = space({"engine.body.boost": [0.5, 1.0, 2.0], "engine.body.size": "10..50:10"})
    assert s.dimensions[0].grid() == [0.5, 1.0, 2.0]
    assert s.dimensions[1].grid() == [10.0, 20.0, 30.0, 40.0, 50.0]
    # a python retriever's options too
    assert space({"mine.options.alpha": "0..1:0.25"}).dimensions[0].grid() == \
        [0.0, 0.25, 0.5, 0.75, 1.0]
    chosen = configurations_from(RAW, FILE, {"engine.body.boost": 2.0})
    assert chosen["engine"].params["body"] == {"q": "{text}", "boost": 2.0}


@pytest.mark.parametrize("specs, field, words", [
    ({"bm25.k3": "0..1"}, "bm25.k3", "no parameter 'k3'"),
    ({"bm25.b": "0..2"}, "bm25.b", "outside the valid values"),
    ({"fused.candidate_floor": "0..0.9"}, "fused.candidate_floor", "candidate_floor <= abstain"),
    ({"nope.k1": "0..1"}, "nope.k1", "no configuration 'nope'"),
    ({"bm25.k1": "2..1"}, "bm25.k1", "LOW < HIGH"),
    ({"bm25.k1": "0..1:2"}, "bm25.k1", "step in (0, 1]"),
    ({"bm25.k1": "fast"}, "bm25.k1", "LOW..HIGH"),
    ({"hybrid.method": ["rrf", "borda"]}, "hybrid.method", "outside the valid values"),
    ({"hybrid.weights.dense": "0..1"}, "hybrid.weights.dense", "not one of runs"),
    ({"hybrid.method": "0..1"}, "hybrid.method", "not a number"),
    ({}, "space", "empty"),
])
def test_refused_before_the_first_trial_naming_file_and_parameter(specs, field, words):
    with pytest.raises(InputError) as e:
        space(specs, source="space.yaml")
    assert e.value.field == field and e.value.file == "space.yaml" and words in e.value.message


def test_a_parameter_the_target_does_not_run_is_refused():
    with pytest.raises(InputError) as e:
        space({"dense.exact": [True, False]}, target="hybrid")
    assert e.value.field == "dense.exact" and "does not run" in e.value.message


QUERIES = [Query(f"q{i:02d}", "t", category=c) for i, c in
           enumerate(["a"] * 10 + ["b"] * 6 + ["c"] * 4)]


def test_split_is_stratified_seeded_and_disjoint():
    s = split_queries(QUERIES, 0.5, seed=3)
    assert split_queries(QUERIES, 0.5, seed=3) == s  # same seed, same split
    assert split_queries(QUERIES, 0.5, seed=4) != s
    held = {q.category for q in QUERIES if q.id in s.held_out}
    assert held == {"a", "b", "c"}
    count = {c: sum(1 for q in QUERIES if q.id in s.held_out and q.category == c)
             for c in "abc"}
    assert count == {"a": round(0.5 * 10), "b": round(0.5 * 6), "c": round(0.5 * 4)}
    assert set(s.tuning).isdisjoint(s.held_out) and len(s.tuning) + len(s.held_out) == 20


def test_too_few_held_out_refused_and_too_few_for_the_effect_warned():
    assert smallest_testable(0.05) == math.ceil(math.log2(2 / 0.05)) == 6
    with pytest.raises(InputError) as e:
        check_held_out(split_queries(QUERIES, 0.2, seed=0), sd=None, effect=0.02)
    assert "needs at least 6" in e.value.message and e.value.field == "held_out"
    s = split_queries(QUERIES, 0.5, seed=0)
    # (1.96 + 0.84)^2 * 0.2^2 / 0.05^2 = 125.6 -> 126 queries needed
    warning = check_held_out(s, sd=0.2, effect=0.05)
    needed = math.ceil(((1.959963984540054 + 0.8416212335729143) * 0.2 / 0.05) ** 2)
    assert f"needs {needed}" in warning and f"has {len(s.held_out)} queries" in warning
    assert check_held_out(s, sd=0.001, effect=0.5) is None


def test_the_proposed_entries_rename_what_changed():
    base = configurations_from(RAW, FILE)
    chosen = configurations_from(RAW, FILE, {"bm25.k1": 2.0, "hybrid.weights.engine": 0.5})
    entries = proposed_entries(base, chosen, "hybrid", "hybrid_v2")
    assert list(entries) == ["bm25_tuned", "hybrid_v2"]  # engine did not change: kept
    assert entries["hybrid_v2"]["params"]["runs"] == ["bm25_tuned", "engine"]
    assert entries["hybrid_v2"]["params"]["weights"] == {"bm25_tuned": 1.0, "engine": 0.5}
    assert entries["bm25_tuned"]["params"]["k1"] == 2.0
    # and the entries resolve as a configurations file of their own (with what they name)
    merged = {"configurations": {**RAW["configurations"], **entries}}
    assert configurations_from(merged, FILE)["hybrid_v2"].params["weights"]["engine"] == 0.5

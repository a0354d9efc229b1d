"""Fusion: RRF arithmetic, hard filters, the reliability prior, abstention, the fused run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from searcheval.errors import InputError
from searcheval.io.fixtures import load_fixtures
from searcheval.rankers.bm25 import run_bm25
from searcheval.rankers.fusion import FusionParams, fuse, reliability, run_fused
from searcheval.types import Filters, Query, RankedRun, Resource

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def res(rid: str, *, network="base", asset="USDC", price=0.01, settled=0, rate=None) -> Resource:
    return Resource(id=rid, name=rid, description="", network=network, asset=asset,
                    price_usd=price, settled_30d=settled, success_rate=rate)


CATALOG = {r.id: r for r in [res("a"), res("b"), res("c"), res("d"), res("e")]}
QUERY = Query(id="q", text="anything")
# no prior, no floors: only the reciprocal ranks are left
PLAIN = FusionParams(prior_weight=0.0, bm25_floor=0.0, candidate_floor=-1.0, abstain_floor=-1.0)


# --------------------------------------------------------------------------- RRF


def test_rrf_sums_reciprocal_ranks_with_k_60():
    fused = fuse(QUERY, [("a", 9.0), ("b", 5.0), ("c", 4.0)], [("c", 0.9), ("a", 0.8)],
                 CATALOG, PLAIN)
    assert fused == [
        ("a", pytest.approx(1 / (60 + 1) + 1 / (60 + 2), rel=1e-12)),
        ("c", pytest.approx(1 / (60 + 3) + 1 / (60 + 1), rel=1e-12)),
        ("b", pytest.approx(1 / (60 + 2), rel=1e-12)),
    ]


def test_rrf_weights_and_k_are_parameters():
    params = replace(PLAIN, rrf_k=10.0, weights=(2.0, 0.5))
    fused = dict(fuse(QUERY, [("a", 9.0), ("b", 5.0)], [("b", 0.9)], CATALOG, params))
    assert fused == {"a": pytest.approx(2.0 / (10 + 1), rel=1e-12),
                     "b": pytest.approx(2.0 / (10 + 2) + 0.5 / (10 + 1), rel=1e-12)}


def test_lists_are_ranked_by_score_whatever_their_order():
    fused = dict(fuse(QUERY, [("b", 5.0), ("a", 9.0)], [], CATALOG, PLAIN))
    assert fused == {"a": pytest.approx(1 / 61, rel=1e-12), "b": pytest.approx(1 / 62, rel=1e-12)}


def test_duplicates_are_returned_once_at_their_best_rank():
    fused = fuse(QUERY, [("a", 9.0), ("b", 5.0), ("a", 1.0)], [("a", 0.9), ("a", 0.2)],
                 CATALOG, PLAIN)
    assert [d for d, _ in fused] == ["a", "b"]
    assert dict(fused)["a"] == pytest.approx(1 / 61 + 1 / 61, rel=1e-12)


def test_ties_are_broken_by_id_descending_and_depth_cuts():
    # b: bm25 rank 1, dense rank 2; a: bm25 rank 2, dense rank 1 -> the same RRF score
    fused = fuse(QUERY, [("b", 9.0), ("a", 5.0)], [("a", 0.9), ("b", 0.8)], CATALOG, PLAIN)
    assert [d for d, _ in fused] == ["b", "a"]
    assert fused[0][1] == fused[1][1]
    cut = fuse(QUERY, [("a", 3.0), ("b", 2.0), ("c", 1.0)], [], CATALOG, replace(PLAIN, depth=2))
    assert [d for d, _ in cut] == ["a", "b"]


# --------------------------------------------------------------------------- filters

SHOP = {r.id: r for r in [
    res("on-base", network="base", asset="USDC", price=0.002),
    res("on-solana", network="solana", asset="USDC", price=0.002),
    res("in-usdt", network="base", asset="USDT", price=0.002),
    res("pricey", network="base", asset="USDC", price=0.05),
    res("no-price", network="base", asset="USDC", price=None),
]}
EVERYTHING = [("pricey", 0.9), ("on-solana", 0.8), ("in-usdt", 0.7), ("no-price", 0.6),
              ("on-base", 0.5)]


@pytest.mark.parametrize("filters, admitted", [
    (Filters(network="base"), {"on-base", "in-usdt", "pricey", "no-price"}),
    (Filters(asset="USDC"), {"on-base", "on-solana", "pricey", "no-price"}),
    (Filters(max_price_usd=0.01), {"on-base", "on-solana", "in-usdt"}),
    (Filters(network="base", asset="USDC", max_price_usd=0.01), {"on-base"}),
    (Filters(), set(SHOP)),
])
def test_hard_filters_remove_what_fails_them(filters, admitted):
    query = Query(id="q", text="x", filters=filters)
    fused = fuse(query, [(d, 10.0 - i) for i, (d, _) in enumerate(EVERYTHING)], EVERYTHING, SHOP,
                 PLAIN)
    assert {d for d, _ in fused} == admitted


def test_ranks_are_taken_after_filtering():
    query = Query(id="q", text="x", filters=Filters(network="base", asset="USDC",
                                                    max_price_usd=0.01))
    fused = fuse(query, [("pricey", 9.0), ("on-base", 5.0)], [("on-solana", 0.9), ("on-base", 0.8)],
                 SHOP, PLAIN)
    assert fused == [("on-base", pytest.approx(1 / (60 + 1) + 1 / (60 + 1), rel=1e-12))]


# --------------------------------------------------------------------------- prior


def test_reliability_is_a_smoothed_success_rate():
    assert reliability(res("new", settled=0, rate=None)) == 9 / (9 + 1)
    assert reliability(res("no-rate", settled=40, rate=None)) == 9 / (9 + 1)
    assert reliability(res("zero", settled=0, rate=1.0)) == 9 / (9 + 1)
    assert reliability(res("half", settled=100, rate=0.5)) == (0.5 * 100 + 9) / (100 + 9 + 1)
    assert reliability(res("bad", settled=30, rate=0.0), 1.0, 1.0) == (0 + 1) / (30 + 1 + 1)


def test_a_new_resource_is_not_zeroed():
    catalog = {"new": res("new", settled=0, rate=None)}
    fused = fuse(QUERY, [("new", 5.0)], [], catalog, replace(FusionParams(), bm25_floor=0.0))
    assert fused == [("new", pytest.approx(1 / 61 * (1 - 0.04 + 0.04 * 9 / 10), rel=1e-12))]


def test_the_prior_breaks_a_near_tie():
    catalog = {"a": res("a", settled=200, rate=0.4), "b": res("b", settled=5000, rate=0.99)}
    params = replace(PLAIN, prior_weight=0.04)
    # swapped ranks: RRF alone ties them, and would put b first only by its id
    fused = fuse(QUERY, [("a", 9.0), ("b", 5.0)], [("b", 0.9), ("a", 0.8)], catalog, params)
    rrf = 1 / 61 + 1 / 62
    ra = (0.4 * 200 + 9) / (200 + 10)
    rb = (0.99 * 5000 + 9) / (5000 + 10)
    assert fused == [("b", pytest.approx(rrf * (0.96 + 0.04 * rb), rel=1e-12)),
                     ("a", pytest.approx(rrf * (0.96 + 0.04 * ra), rel=1e-12))]
    catalog["a"], catalog["b"] = catalog["b"], catalog["a"]
    assert [d for d, _ in fuse(QUERY, [("a", 9.0), ("b", 5.0)], [("b", 0.9), ("a", 0.8)],
                               catalog, params)] == ["a", "b"]


def test_the_prior_does_not_override_relevance():
    catalog = {"bad": res("bad", settled=100000, rate=0.0),
               "good": res("good", settled=100000, rate=1.0),
               **{x: res(x) for x in ("x1", "x2", "x3")}}
    bm25 = [("bad", 9.0), ("x1", 8.0), ("x2", 7.0), ("good", 6.0)]
    dense = [("bad", 0.9), ("x1", 0.8), ("x2", 0.7), ("good", 0.6)]
    fused = dict(fuse(QUERY, bm25, dense, catalog, replace(PLAIN, prior_weight=0.04)))
    # (2/61) * 0.96... > (2/64) * 1.0
    assert fused["bad"] > fused["good"]


# --------------------------------------------------------------------------- abstention

DEFAULTS = FusionParams()  # bm25_floor 3.0, candidate_floor 0.25, abstain 0.45, margin 0.06


def test_no_bm25_match_and_low_cosine_abstains():
    assert fuse(QUERY, [], [("a", 0.30), ("b", 0.29)], CATALOG, DEFAULTS) == []
    # a bm25 score at or below bm25_floor is no lexical match
    assert fuse(QUERY, [("a", 3.0)], [("a", 0.30), ("b", 0.29)], CATALOG, DEFAULTS) == []
    assert fuse(QUERY, [], [], CATALOG, DEFAULTS) == []


def test_a_bm25_match_answers():
    fused = fuse(QUERY, [("a", 3.5)], [("b", 0.30), ("c", 0.10)], CATALOG, DEFAULTS)
    # c is below candidate_floor and has no lexical match: dropped
    assert [d for d, _ in fused] == ["b", "a"]  # equal RRF 1/61, prior mean, ids descending


def test_a_high_cosine_answers_without_a_bm25_match():
    fused = fuse(QUERY, [], [("a", 0.45), ("b", 0.44), ("c", 0.2)], CATALOG, DEFAULTS)
    assert [d for d, _ in fused] == ["a", "b"]


def test_a_cosine_that_stands_out_answers():
    assert [d for d, _ in fuse(QUERY, [], [("a", 0.30), ("b", 0.24)], CATALOG, DEFAULTS)] == ["a"]
    assert fuse(QUERY, [], [("a", 0.30), ("b", 0.26)], CATALOG, DEFAULTS) == []
    off = replace(DEFAULTS, abstain_margin=None)
    assert fuse(QUERY, [], [("a", 0.30), ("b", 0.24)], CATALOG, off) == []
    # a lone candidate has no runner-up to stand out from
    assert fuse(QUERY, [], [("a", 0.30)], CATALOG, DEFAULTS) == []


def test_abstention_looks_only_at_admissible_resources():
    catalog = {"far": res("far", network="solana"), "near": res("near", network="base")}
    query = Query(id="q", text="x", filters=Filters(network="base"))
    assert fuse(query, [("far", 9.0)], [("far", 0.9), ("near", 0.2)], catalog, DEFAULTS) == []


# --------------------------------------------------------------------------- bad input


def test_unknown_ids_and_bad_scores_are_refused():
    with pytest.raises(InputError, match="'zz', which is not in the catalog") as err:
        fuse(QUERY, [("zz", 1.0)], [], CATALOG, PLAIN)
    assert err.value.field == "bm25.id"
    with pytest.raises(InputError) as err:
        fuse(QUERY, [], [("a", float("nan"))], CATALOG, PLAIN)
    assert err.value.field == "dense.score"


@pytest.mark.parametrize("kwargs, field", [
    ({"rrf_k": -1.0}, "rrf_k"),
    ({"weights": (1.0, 1.0, 1.0)}, "weights"),
    ({"prior_a": 0.0}, "prior_a"),
    ({"prior_weight": 1.5}, "prior_weight"),
    ({"bm25_floor": -1.0}, "bm25_floor"),
    ({"abstain_floor": 2.0}, "abstain_floor"),
    ({"candidate_floor": 0.5, "abstain_floor": 0.4}, "candidate_floor"),
    ({"abstain_margin": -0.1}, "abstain_margin"),
    ({"depth": 0}, "depth"),
])
def test_bad_params_are_refused_with_the_field(kwargs, field):
    with pytest.raises(InputError) as err:
        FusionParams(**kwargs)
    assert err.value.field == f"FusionParams.{field}"


# --------------------------------------------------------------------------- the run


def test_run_fused_adds_up_the_latencies_of_both_retrievals():
    queries = [Query(id="q1", text="x"), Query(id="q2", text="y")]
    bm25 = RankedRun("bm25", {"q1": [("a", 9.0)], "q2": []}, {"q1": 5.0, "q2": 6.0})
    dense = RankedRun("dense", {"q1": [("a", 0.9)], "q2": [("b", 0.1)]}, {"q1": 7.0, "q2": 8.0})
    run = run_fused(bm25, dense, list(CATALOG.values()), queries)
    assert run.configuration == "fused"
    assert run.top_ids("q1", 10) == ["a"]
    assert run.results["q2"] == []
    assert 5.0 + 7.0 <= run.latency_ms["q1"] < 5.0 + 7.0 + 1000.0
    assert 6.0 + 8.0 <= run.latency_ms["q2"] < 6.0 + 8.0 + 1000.0


def test_run_fused_refuses_a_query_missing_from_a_run():
    bm25 = RankedRun("bm25", {"q1": []})
    dense = RankedRun("dense", {})
    with pytest.raises(InputError, match="the dense run has no result list for query 'q1'"):
        run_fused(bm25, dense, list(CATALOG.values()), [Query(id="q1", text="x")])


def _fake_dense(collection, favourite_ids: dict[str, list[str]], rest: float) -> RankedRun:
    """Cosines 0.9, 0.8, ... for each query's favourites, `rest` for every other resource."""
    results = {}
    for q in collection.queries:
        fav = favourite_ids.get(q.id, [])
        hits = [(d, 0.9 - 0.1 * i) for i, d in enumerate(fav)]
        hits += [(r.id, rest) for r in collection.resources if r.id not in fav]
        results[q.id] = hits
    return RankedRun("dense", results)


def test_fixtures_fused_keeps_filters_and_the_genuine_listing_and_abstains():
    collection = load_fixtures(FIXTURES)
    by_id = {r.id: r for r in collection.resources}
    qrels = collection.qrels()
    bm25 = run_bm25(collection.resources, collection.queries)
    # a dense retriever that, like all-MiniLM-L6-v2 on q13 and q15, puts the stuffed copy first
    # and the genuine listing second, prefers listings the filters exclude, and finds nothing
    # else convincing
    favourites = {"q07": ["weather-forecast", "weather-forecast-stuffed", "nimbus-outlook"],
                  "q08": ["web-search", "news-headlines"],
                  "q09": ["free-crypto-price-api", "stock-quotes", "crypto-prices"],
                  "q13": ["weather-forecast-stuffed", "weather-forecast"],
                  "q14": ["weather-forecast-stuffed", "weather-forecast"],
                  "q15": ["free-crypto-price-api", "crypto-prices"]}
    fused = run_fused(bm25, _fake_dense(collection, favourites, 0.2), collection.resources,
                      collection.queries)
    for q in collection.queries:
        top = fused.top_ids(q.id, 100)
        assert all(q.filters.admits(by_id[d]) for d in top), q.id
        if q.category == "no-result":
            assert top == [], (q.id, top)
        if q.category in ("adversarial", "filtered"):
            best = [d for d, g in qrels[q.id].items() if g == 3]
            assert top and top[0] in best, (q.id, top)

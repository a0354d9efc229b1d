"""BM25F: tokenizer, analysis, exact scores, rank-bm25 agreement, stuffing, ties, the run."""

from __future__ import annotations

from math import log
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from searcheval.errors import InputError
from searcheval.io.fixtures import load_fixtures
from searcheval.rankers.bm25 import BM25FIndex, analyze, run_bm25, stem, tokenize
from searcheval.types import Query, Resource

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SAT = 1.2 + 1  # k1 + 1 at the default k1 = 1.2


def res(rid: str, name: str, description: str = "", tags: tuple[str, ...] = ()) -> Resource:
    return Resource(id=rid, name=name, description=description, tags=tags)


# four documents; every name has 2 terms and every tag list 1, so their length norms are 1
GREEK = [
    res("a", "alpha beta", "gamma delta gamma phi", ("alpha",)),
    res("b", "zeta eta", "theta iota", ("kappa",)),
    res("c", "lambda mu", "nu xi", ("omicron",)),
    res("d", "pi rho", "sigma tau", ("upsilon",)),
]
IDF_1_OF_4 = log((4 - 1 + 0.5) / (1 + 0.5))


# --------------------------------------------------------------------------- tokenizer


def test_tokenize_lowercases_and_strips_punctuation():
    assert tokenize("Weather-Forecast API, v2!") == ["weather", "forecast", "api", "v2"]
    assert tokenize("'); DROP TABLE x; --") == ["drop", "table", "x"]
    assert tokenize("snake_case/Path.JSON") == ["snake", "case", "path", "json"]
    assert tokenize("Café ZÜRICH") == ["café", "zürich"]
    assert tokenize(" -- ... ") == []


def test_stem_strips_plurals_only():
    assert [stem(w) for w in ["prices", "forecasts", "queries", "bus", "class", "goes", "is"]] == [
        "price", "forecast", "query", "bus", "class", "goes", "is"]


def test_analyze_drops_stop_words_and_stems():
    assert analyze("Is it going to rain in the Alps?") == ["going", "rain", "alp"]
    assert analyze("The prices of the forecasts") == ["price", "forecast"]


# --------------------------------------------------------------------------- exact scores


def test_score_of_a_term_in_name_and_tags():
    # tf~ = name weight 3 * 1 / norm 1 + tags weight 2 * 1 / norm 1
    tf = 3 * 1 / 1 + 2 * 1 / 1
    assert BM25FIndex(GREEK).search("alpha", 10) == [
        ("a", pytest.approx(IDF_1_OF_4 * tf * SAT / (tf + 1.2), rel=1e-12))]


def test_score_of_a_repeated_term_in_a_long_description():
    # descriptions have 4, 2, 2, 2 terms: average 2.5; "gamma" occurs twice in a's
    norm = 1 - 0.75 + 0.75 * 4 / 2.5
    tf = 1 * 2 / norm
    hits = BM25FIndex(GREEK).search("gamma", 10)
    assert hits == [("a", pytest.approx(IDF_1_OF_4 * tf * SAT / (tf + 1.2), rel=1e-12))]


def test_query_terms_add_up_and_repeats_count_once():
    index = BM25FIndex(GREEK)
    alpha = index.search("alpha", 1)[0][1]
    gamma = index.search("gamma", 1)[0][1]
    assert index.search("alpha gamma", 1)[0][1] == pytest.approx(alpha + gamma, rel=1e-12)
    assert index.search("ALPHA, alpha!", 1)[0][1] == pytest.approx(alpha, rel=1e-12)


def test_field_weights_change_the_score():
    index = BM25FIndex(GREEK, field_weights={"name": 1.0, "tags": 0.5}, k1=2.0, b=0.0)
    tf = 1.0 * 1 + 0.5 * 1
    assert index.search("alpha", 1)[0][1] == pytest.approx(
        IDF_1_OF_4 * tf * (2.0 + 1) / (tf + 2.0), rel=1e-12)


def test_single_field_scores_equal_rank_bm25_okapi():
    names = ["solar wind solar", "wind turbine", "hydro power plant", "coal plant",
             "nuclear fusion reactor", "geothermal"]
    docs = [res(f"d{i}", n) for i, n in enumerate(names)]
    ours = BM25FIndex(docs, field_weights={"name": 1.0, "description": 0.0, "tags": 0.0},
                      k1=1.2, b=0.75, repetition_power=0.0)
    okapi = BM25Okapi([analyze(n) for n in names], k1=1.2, b=0.75)
    # every term here is held by fewer than half the documents, so both idfs agree
    terms = ["solar", "wind", "plant", "turbine"]
    np.testing.assert_allclose(ours.scores(" ".join(terms)), okapi.get_scores(terms), rtol=1e-12)


def test_idf_of_a_term_in_half_the_documents_or_more_is_zero_not_epsilon():
    names = ["common rare", "common", "common other", "unique"]
    index = BM25FIndex([res(f"d{i}", n) for i, n in enumerate(names)])
    okapi = BM25Okapi([analyze(n) for n in names])
    assert okapi.idf["common"] > 0  # rank-bm25's epsilon floor
    assert index.idf_of("common") == 0.0
    assert index.idf_of("rare") == log((4 - 1 + 0.5) / (1 + 0.5))
    assert index.search("common", 10) == []


def test_repetition_penalty_spares_one_repeat_and_scales_the_rest():
    docs = [res("once", "weather weather forecast"),  # one repeat: free
            res("thrice", "weather weather weather forecast", tags=("rain", "rain api")),
            res("x", "geocoder"), res("y", "translation"), res("z", "news")]
    index = BM25FIndex(docs)
    # name: 2 distinct of 4 terms -> (2 + 1) / 4; tags "rain", "rain api": 2 of 3 -> (2 + 1) / 3
    assert list(index.quality) == [1.0, ((2 + 1) / 4) ** 2 * 1.0 ** 2, 1.0, 1.0, 1.0]


# --------------------------------------------------------------------------- stuffing

FILLERS = [
    res("geocoder", "Address Geocoder", "Converts postal addresses into coordinates.", ("maps",)),
    res("fx", "Currency Exchange Rates", "Live foreign exchange rates for fiat currencies.",
        ("finance",)),
    res("news", "News Headlines", "Top headlines from news sources, updated hourly.",
        ("media",)),
    res("ocr", "Document OCR", "Extracts text and tables from scanned documents.", ("pdf",)),
    res("translate", "Text Translation", "Translates text between 120 languages.", ("nlp",)),
]
GENUINE = res("weather-forecast", "Weather Forecast",
              "Hourly and daily weather forecasts for any location: temperature, wind and "
              "precipitation.", ("weather", "forecast", "meteorology"))
STUFFED = res("weather-stuffed", "Weather Forecast API - Best Weather Forecast - Weather",
              "weather weather weather forecast forecast forecast weather forecast api weather "
              "api forecast weather forecast best weather forecast",
              ("weather", "weather", "weather", "forecast", "forecast", "weather api",
               "weather forecast", "forecast api"))


def test_stuffed_listing_ranks_below_the_genuine_one():
    hits = BM25FIndex([GENUINE, STUFFED, *FILLERS]).search("weather forecast api", 10)
    assert [d for d, _ in hits] == ["weather-forecast", "weather-stuffed"]


def test_without_the_repetition_penalty_the_stuffed_listing_wins():
    # the stuffed listing alone matches "api": saturation, b and weights do not make up for it
    hits = BM25FIndex([GENUINE, STUFFED, *FILLERS], repetition_power=0.0).search(
        "weather forecast api", 10)
    assert [d for d, _ in hits] == ["weather-stuffed", "weather-forecast"]


STUFFED_COPY_OF = {"weather-forecast": "weather-forecast-stuffed",
                   "crypto-prices": "free-crypto-price-api"}


def test_fixture_genuine_listings_rank_above_stuffed_ones_for_adversarial_queries():
    collection = load_fixtures(FIXTURES)
    qrels = collection.qrels()
    queries = [q for q in collection.queries if q.category == "adversarial"]
    assert len(queries) == 3
    run = run_bm25(collection.resources, queries)
    for q in queries:
        ranked = run.top_ids(q.id, 100)
        # the query's answer (grade 3) and its stuffed copy, which the query does retrieve
        pairs = [(g, s) for g, s in STUFFED_COPY_OF.items() if qrels[q.id].get(g) == 3]
        assert len(pairs) == 1, q.id
        genuine, stuffed = pairs[0]
        assert ranked[0] == genuine, (q.id, ranked)
        assert stuffed in ranked, (q.id, ranked)


# --------------------------------------------------------------------------- ranks


def test_ties_are_broken_by_doc_id_descending_and_k_cuts():
    docs = [res("a1", "same words"), res("b2", "same words"), res("a10", "same words"),
            res("x", "other"), res("y", "else"), res("z", "more"), res("w", "again")]
    hits = BM25FIndex(docs).search("same", 10)
    assert [d for d, _ in hits] == ["b2", "a10", "a1"]
    assert hits[0][1] == hits[1][1] == hits[2][1] > 0
    assert [d for d, _ in BM25FIndex(docs).search("same", 2)] == ["b2", "a10"]


def test_only_matching_documents_are_returned_each_once():
    index = BM25FIndex(GREEK)
    hits = index.search("alpha gamma alpha beta zeta", 10)
    ids = [d for d, _ in hits]
    assert sorted(ids) == ["a", "b"]
    assert len(ids) == len(set(ids))
    assert all(s > 0 for _, s in hits)
    assert index.search("nothing here matches", 10) == []
    assert index.search("", 10) == []


def test_an_empty_catalog_returns_nothing():
    assert BM25FIndex([]).search("weather", 5) == []


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("kwargs, field", [
    ({"field_weights": {"title": 1.0}}, "field_weights"),
    ({"field_weights": {"name": -1.0}}, "field_weights.name"),
    ({"field_weights": {"name": 0, "description": 0, "tags": 0}}, "field_weights"),
    ({"k1": -0.5}, "k1"),
    ({"b": 1.5}, "b"),
    ({"repetition_power": float("nan")}, "repetition_power"),
])
def test_bad_parameters_are_refused_with_the_field(kwargs, field):
    with pytest.raises(InputError) as err:
        BM25FIndex(GREEK, **kwargs)
    assert err.value.field == field


def test_duplicate_ids_and_bad_k_are_refused():
    with pytest.raises(InputError, match="duplicate resource id 'a'"):
        BM25FIndex([GREEK[0], GREEK[0]])
    with pytest.raises(InputError) as err:
        BM25FIndex(GREEK).search("alpha", 0)
    assert err.value.field == "k"


# --------------------------------------------------------------------------- the run


def test_run_bm25_ranks_every_query_and_times_each():
    queries = [Query(id="q1", text="alpha"), Query(id="q2", text="gamma sigma"),
               Query(id="q3", text="no match")]
    run = run_bm25(GREEK, queries, k=1, b=0.5)
    assert run.configuration == "bm25"
    assert set(run.results) == set(run.latency_ms) == {"q1", "q2", "q3"}
    assert run.top_ids("q1", 10) == ["a"]
    assert len(run.results["q2"]) == 1
    assert run.results["q3"] == []
    assert all(ms >= 0 for ms in run.latency_ms.values())
    with pytest.raises(InputError, match="duplicate query id 'q1'"):
        run_bm25(GREEK, [queries[0], queries[0]])

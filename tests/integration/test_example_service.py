"""The example search service (examples/search_service), through real HTTP against the real
subprocess over the fixtures: ranking, the six API shapes, filters, every knob, the counters and
the document lookup."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import httpx
import pytest
from example_service import running_service

from searcheval import load_collection

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
COLLECTION = load_collection(fixtures=FIXTURES)
QUERIES = {q.id: q for q in COLLECTION.queries}
DOCUMENTS = {r.id: r for r in COLLECTION.resources}


@pytest.fixture
def service(example_service):
    """The session's service, well-behaved and with zeroed counters at the start of each test."""
    example_service.set_knobs()
    yield example_service
    example_service.set_knobs()


def native(service, text: str, k: int = 10, **filters) -> dict:
    response = httpx.get(f"{service.url}/search", params={"q": text, "k": k, **filters})
    assert response.status_code == 200, response.text
    return response.json()


def native_ids(service, text: str, k: int = 10, **filters) -> list[str]:
    return [h["id"] for h in native(service, text, k, **filters)["hits"]]


def words(resource) -> str:
    return " ".join([resource.name, resource.description, *resource.tags]).lower()


# ---------------------------------------------------------------- each engine's request and hits
#
# One function per dialect: the request a configuration for that engine sends, and where its
# response keeps the hits' ids and scores. They double as the reference for the `http` kind.


def ask_native(client, text, k, filters):
    r = client.post("/search", json={"q": text, "k": k, **filters})
    return r, lambda b: [(h["id"], h["score"]) for h in b["hits"]]


def ask_es(client, text, k, filters):
    clauses = []
    if "network" in filters:
        clauses.append({"term": {"network": filters["network"]}})
    if "asset" in filters:
        clauses.append({"term": {"asset.keyword": {"value": filters["asset"]}}})
    if "max_price_usd" in filters:
        clauses.append({"range": {"price_usd": {"lte": filters["max_price_usd"]}}})
    body = {"size": k, "query": {"bool": {
        "must": {"multi_match": {"query": text, "fields": ["title^2", "text"]}},
        "filter": clauses}}}
    r = client.post("/es/fixtures/_search", json=body)
    return r, lambda b: [(h["_id"], h["_score"]) for h in b["hits"]["hits"]]


def ask_solr(client, text, k, filters):
    params = [("q", text), ("rows", k), ("fl", "id,title,score"), ("defType", "edismax"),
              ("qf", "title text"), ("wt", "json")]
    params += [("fq", f"{name}:{filters[name]}") for name in ("network", "asset") if name in filters]
    if "max_price_usd" in filters:
        params.append(("fq", f"price_usd:[* TO {filters['max_price_usd']}]"))
    r = client.get("/solr/fixtures/select", params=params)
    return r, lambda b: [(d["id"], d["score"]) for d in b["response"]["docs"]]


def ask_vespa(client, text, k, filters):
    where = ["userQuery()"]
    where += [f'{name} contains "{filters[name]}"' for name in ("network", "asset") if name in filters]
    if "max_price_usd" in filters:
        where.append(f"price_usd <= {filters['max_price_usd']}")
    r = client.post("/vespa/search/", json={
        "yql": f"select * from sources * where {' and '.join(where)}", "query": text, "hits": k,
        "ranking": {"profile": "bm25"}})
    return r, lambda b: [(c["fields"]["id"], c["relevance"]) for c in b["root"].get("children", [])]


def ask_typesense(client, text, k, filters):
    clauses = [f"{name}:={filters[name]}" for name in ("network", "asset") if name in filters]
    if "max_price_usd" in filters:
        clauses.append(f"price_usd:<={filters['max_price_usd']}")
    params = {"q": text, "query_by": "title,text", "per_page": k}
    if clauses:
        params["filter_by"] = " && ".join(clauses)
    r = client.get("/typesense/collections/fixtures/documents/search", params=params,
                   headers={"X-TYPESENSE-API-KEY": "xyz"})
    return r, lambda b: [(h["document"]["id"], h["text_match"]) for h in b["hits"]]


def ask_meili(client, text, k, filters):
    clauses = [f'{name} = "{filters[name]}"' for name in ("network", "asset") if name in filters]
    if "max_price_usd" in filters:
        clauses.append(f"price_usd <= {filters['max_price_usd']}")
    body = {"q": text, "limit": k, "showRankingScore": True}
    if clauses:
        body["filter"] = " AND ".join(clauses)
    r = client.post("/meili/indexes/fixtures/search", json=body)
    # _rankingScore is score / (1 + score); invert it to compare with the others
    return r, lambda b: [(h["id"], h["_rankingScore"] / (1 - h["_rankingScore"])) for h in b["hits"]]


ASK = {"native": ask_native, "es": ask_es, "solr": ask_solr, "vespa": ask_vespa,
       "typesense": ask_typesense, "meili": ask_meili}


def filters_of(query) -> dict:
    return {k: v for k, v in vars(query.filters).items() if v is not None}


# ---------------------------------------------------------------- ranking


def test_health_names_the_collection(service):
    body = httpx.get(f"{service.url}/health").json()
    assert body["status"] == "ok"
    assert body["collection"] == "fixtures"
    assert body["documents"] == len(COLLECTION.resources) == 18
    assert body["engine"].startswith("tantivy ")


@pytest.mark.parametrize("query_id, named", [("q01", "email-validation"),
                                              ("q02", "document-ocr"), ("q03", "sqli-scanner")])
def test_an_exact_name_query_finds_only_the_named_listing(service, query_id, named):
    # A lexical engine matches a document only when it holds a query word; for these three
    # queries the named listing is the only one that holds any (checked here on the catalog
    # itself), so it must be the first hit and the only one.
    query = QUERIES[query_id]
    holders = [r.id for r in COLLECTION.resources
               if any(re.search(rf"\b{w}", words(r)) for w in query.text.lower().split())]
    assert holders == [named]
    assert native_ids(service, query.text) == [named]


def test_a_query_sharing_no_word_with_any_listing_finds_nothing(service):
    # q06 "put this paragraph into Japanese": "this" and "into" are stop words, and no listing
    # holds put, paragraph or japanese, so a lexical engine has nothing to return (searcheval's
    # dense configuration is what finds translate-text for it).
    query = QUERIES["q06"]
    assert not any(re.search(r"\b(put|paragraph|japanese)", words(r)) for r in COLLECTION.resources)
    assert native_ids(service, query.text) == []


def test_hits_are_ranked_by_score_and_cut_at_k(service):
    body = native(service, "weather forecast api", k=10)
    ranked = [(h["score"], h["id"]) for h in body["hits"]]
    assert len(ranked) >= 3
    # scores descending, ties by id descending: the order searcheval ranks a run in
    assert ranked == sorted(ranked, reverse=True)
    assert all(h["title"] == DOCUMENTS[h["id"]].name for h in body["hits"])
    # a smaller k is a prefix of the larger answer, and total counts every match
    assert native_ids(service, "weather forecast api", k=2) == [i for _, i in ranked[:2]]
    assert body["total"] == len(ranked)


# ---------------------------------------------------------------- six shapes, one ranking


@pytest.mark.parametrize("dialect", sorted(set(ASK) - {"native"}))
def test_each_engine_shape_returns_the_native_ranking(service, dialect):
    with httpx.Client(base_url=service.url) as client:
        for query in COLLECTION.queries:
            filters = filters_of(query)
            expected_response, expected_hits = ask_native(client, query.text, 10, filters)
            response, hits = ASK[dialect](client, query.text, 10, filters)
            assert response.status_code == 200, response.text
            expected = expected_hits(expected_response.json())
            got = hits(response.json())
            assert [i for i, _ in got] == [i for i, _ in expected], (dialect, query.id)
            assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-9)
    # the golden queries exercise something: most have hits, some are filtered
    assert sum(bool(native_ids(service, q.text)) for q in COLLECTION.queries) >= 10


def test_engine_envelopes_match_the_real_engines(service):
    with httpx.Client(base_url=service.url) as client:
        es = ask_es(client, "weather forecast", 3, {})[0].json()
        solr = ask_solr(client, "weather forecast", 3, {})[0].json()
        vespa = ask_vespa(client, "weather forecast", 3, {})[0].json()
        typesense = ask_typesense(client, "weather forecast", 3, {})[0].json()
        meili = ask_meili(client, "weather forecast", 3, {})[0].json()
        vespa_empty = ask_vespa(client, "xylophone zeppelin", 3, {})[0].json()
        solr_default_fl = client.get("/solr/c/select", params={"q": "weather"}).json()
        meili_no_score = client.post("/meili/indexes/i/search", json={"q": "weather"}).json()
        es_no_source = client.post("/es/x/_search", json={
            "query": {"match": {"title": "weather"}}, "_source": False}).json()
        es_some_source = client.post("/es/x/_search", json={
            "query": {"match": {"title": "weather"}}, "_source": ["title", "price_usd"]}).json()
    top = es["hits"]["hits"][0]
    assert top["_index"] == "fixtures" and top["_source"]["title"] == DOCUMENTS[top["_id"]].name
    assert es["hits"]["max_score"] == top["_score"]
    assert es["hits"]["total"]["value"] >= len(es["hits"]["hits"])
    assert solr["responseHeader"]["status"] == 0
    assert solr["response"]["numFound"] >= len(solr["response"]["docs"])
    assert set(solr["response"]["docs"][0]) == {"id", "title", "score"}  # fl=id,title,score
    assert "score" not in solr_default_fl["response"]["docs"][0]  # Solr's default fl=* has none
    child = vespa["root"]["children"][0]
    assert child["id"] == child["fields"]["documentid"] == f"id:searcheval:doc::{child['fields']['id']}"
    assert vespa["root"]["fields"]["totalCount"] == es["hits"]["total"]["value"]
    assert "children" not in vespa_empty["root"]  # Vespa leaves out children when nothing matched
    assert vespa_empty["root"]["fields"]["totalCount"] == 0
    assert typesense["out_of"] == 18 and typesense["page"] == 1
    assert "_source" not in es_no_source["hits"]["hits"][0]
    assert set(es_some_source["hits"]["hits"][0]["_source"]) == {"title", "price_usd"}
    assert meili["limit"] == 3 and "_rankingScore" not in meili_no_score["hits"][0]
    assert all(0 < h["_rankingScore"] < 1 for h in meili["hits"])


def test_pages_follow_the_ranking(service):
    full = native_ids(service, "weather price api", k=5)
    assert len(full) == 5
    with httpx.Client(base_url=service.url) as client:
        es = client.post("/es/x/_search", json={"from": 2, "size": 2,
                                                 "query": {"match": {"text": "weather price api"}}})
        solr = client.get("/solr/x/select", params={"q": "weather price api", "start": 2,
                                                    "rows": 2, "fl": "id"})
        typesense = client.get("/typesense/collections/x/documents/search",
                               params={"q": "weather price api", "per_page": 2, "page": 2})
        meili = client.post("/meili/indexes/x/search",
                            json={"q": "weather price api", "offset": 2, "limit": 2})
    assert [h["_id"] for h in es.json()["hits"]["hits"]] == full[2:4]
    assert [d["id"] for d in solr.json()["response"]["docs"]] == full[2:4]
    assert [h["document"]["id"] for h in typesense.json()["hits"]] == full[2:4]
    assert [h["id"] for h in meili.json()["hits"]] == full[2:4]


def test_a_request_outside_a_dialect_is_refused_in_its_error_shape(service):
    with httpx.Client(base_url=service.url) as client:
        es = client.post("/es/x/_search", json={"query": {"fuzzy": {"text": "wether"}}})
        solr = client.get("/solr/x/select", params={"q": "weather", "fq": "tags:(a OR b)"})
        vespa = client.get("/vespa/search/", params={"yql": "select * from sources * where "
                                                             "userQuery() or true", "query": "x"})
        typesense = client.get("/typesense/collections/x/documents/search",
                               params={"q": "weather", "filter_by": "price_usd:>1"})
        meili = client.post("/meili/indexes/x/search", json={"q": "x", "filter": "color = red"})
        native_bad_k = client.get("/search", params={"q": "weather", "k": "ten"})
    assert es.status_code == 400 and es.json()["error"]["type"] == "parsing_exception"
    assert solr.status_code == 400 and solr.json()["error"]["code"] == 400
    assert vespa.status_code == 400 and vespa.json()["root"]["errors"][0]["code"] == 4
    assert typesense.status_code == 400 and "filter" in typesense.json()["message"]
    assert meili.status_code == 400 and meili.json()["code"] == "invalid_search_filter"
    assert native_bad_k.status_code == 400 and "k must be an integer" in native_bad_k.json()["error"]
    assert service.stats()["by_status"] == {"400": 6}


# ---------------------------------------------------------------- filters


def test_filters_keep_only_matching_documents_in_the_unfiltered_order(service):
    text = "weather forecast price api"
    everything = native_ids(service, text, k=18)
    cases = [({"network": "solana"}, lambda r: r.network == "solana"),
             ({"asset": "USDT"}, lambda r: r.asset == "USDT"),
             ({"max_price_usd": 0.001}, lambda r: r.price_usd <= 0.001),
             ({"network": "base", "asset": "USDC"}, lambda r: (r.network, r.asset) == ("base", "USDC"))]
    for filters, admits in cases:
        expected = [d for d in everything if admits(DOCUMENTS[d])]
        # a filter scores 0, so it removes documents and never reorders the rest
        assert native_ids(service, text, k=18, **filters) == expected, filters
        assert 0 < len(expected) < len(everything), filters  # the filter does something
    # empty filter values are unconstrained (URL templates substitute absent fields that way)
    assert native_ids(service, text, k=18, network="", max_price_usd="") == everything


def test_filters_on_fields_a_beir_corpus_lacks_match_nothing(tmp_path):
    beir = tmp_path / "tiny"
    (beir / "qrels").mkdir(parents=True)
    docs = [{"_id": "d1", "title": "Solar power", "text": "Panels turn sunlight into power."},
            {"_id": "d2", "title": "Wind power", "text": "Turbines turn wind into power."}]
    (beir / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "power"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with running_service("--dataset", str(beir), "--fail-first", "1", "--fail-status", "429",
                         "--delay-ms", "5", "--fail-query", "a=b=500", log_dir=tmp_path) as tiny:
        # start-up flags set the knobs (a query text may hold '='; the last one splits)
        assert tiny.knobs()["fail_first"] == 1 and tiny.knobs()["fail_queries"] == {"a=b": 500}
        assert httpx.get(f"{tiny.url}/search", params={"q": "power"}).status_code == 429
        # both documents hold "power" once in a title and a text of the same lengths: their
        # scores tie, and ties go by id descending
        hits = native(tiny, "power")["hits"]
        assert hits[0]["score"] == hits[1]["score"]
        assert [h["id"] for h in hits] == ["d2", "d1"]
        assert native_ids(tiny, "power", network="base") == []
        assert native_ids(tiny, "power", max_price_usd=1) == []
        health = httpx.get(f"{tiny.url}/health").json()
        assert (health["collection"], health["documents"]) == ("tiny", 2)
        assert httpx.get(f"{tiny.url}/documents/d1").json()["title"] == "Solar power"
        assert "tags" not in httpx.get(f"{tiny.url}/documents/d1").json()


# ---------------------------------------------------------------- knobs


def test_fail_first_fails_the_next_n_requests_then_serves(service):
    service.set_knobs(fail_first=3)
    statuses = [httpx.get(f"{service.url}/search", params={"q": "weather"}).status_code
                for _ in range(5)]
    assert statuses == [503, 503, 503, 200, 200]
    stats = service.stats()
    assert (stats["requests"], stats["failed"], stats["fail_first_remaining"]) == (5, 3, 0)
    assert stats["by_status"] == {"200": 2, "503": 3}
    # a failed request is recorded with what it asked, so a test can see what a client retried
    assert [(r["query"], r["status"]) for r in stats["recent"]] == [("weather", 503)] * 3 + [
        ("weather", 200)] * 2
    service.set_knobs(fail_first=1, fail_status=429)
    with httpx.Client(base_url=service.url) as client:
        failed, _ = ask_es(client, "weather", 3, {})
        served, _ = ask_es(client, "weather", 3, {})
    assert failed.status_code == 429 and failed.json()["status"] == 429  # ES's error shape
    assert served.status_code == 200


def test_fail_queries_fail_one_query_every_time_in_every_shape(service):
    failing = QUERIES["q02"].text
    service.set_knobs(fail_queries={failing: 500})
    with httpx.Client(base_url=service.url) as client:
        for dialect, ask in ASK.items():
            assert ask(client, failing, 10, {})[0].status_code == 500, dialect
            assert ask(client, "weather", 10, {})[0].status_code == 200, dialect
    stats = service.stats()
    assert stats["by_status"] == {"200": 6, "500": 6}
    assert {r["query"] for r in stats["recent"] if r["status"] == 500} == {failing}


def test_delay_holds_every_answer_including_failures(service):
    service.set_knobs(delay_ms=300, fail_queries={"broken": 503})
    for text, status in (("weather", 200), ("broken", 503)):
        started = time.perf_counter()
        response = httpx.get(f"{service.url}/search", params={"q": text})
        elapsed = time.perf_counter() - started
        assert response.status_code == status
        assert elapsed >= 0.3, text


def test_each_recent_request_says_when_it_arrived_since_the_counters_were_zeroed(service):
    service.set_knobs()
    time.sleep(0.2)
    first = time.perf_counter()
    httpx.get(f"{service.url}/search", params={"q": "weather"})
    time.sleep(0.1)
    httpx.get(f"{service.url}/search", params={"q": "weather"})
    apart = time.perf_counter() - first
    a, b = (r["received_s"] for r in service.stats()["recent"])
    assert a >= 0.2 and 0.1 <= b - a <= apart


def test_max_in_flight_counts_concurrent_requests(service):
    delay, concurrent = 0.25, 8
    service.set_knobs(delay_ms=delay * 1000)
    for _ in range(3):  # one at a time: never more than one in flight
        assert httpx.get(f"{service.url}/search", params={"q": "weather"}).status_code == 200
    assert service.stats()["max_in_flight"] == 1

    async def burst() -> list[int]:
        limits = httpx.Limits(max_connections=concurrent)
        async with httpx.AsyncClient(base_url=service.url, limits=limits, timeout=30) as client:
            responses = await asyncio.gather(*(client.get("/search", params={"q": f"weather {i}"})
                                               for i in range(concurrent)))
        return [r.status_code for r in responses]

    service.set_knobs(delay_ms=delay * 1000)
    started = time.perf_counter()
    assert asyncio.run(burst()) == [200] * concurrent
    elapsed = time.perf_counter() - started
    stats = service.stats()
    assert stats["max_in_flight"] == concurrent
    assert (stats["requests"], stats["in_flight"]) == (concurrent, 0)
    assert elapsed < concurrent * delay  # they overlapped: one after another takes 2 s


DIALECT_ID = {  # where each shape keeps the first hit's id, and the key holding its hits
    "native": (lambda b: b["hits"][0]["id"], "hits"),
    "es": (lambda b: b["hits"]["hits"][0]["_id"], "hits"),
    "solr": (lambda b: b["response"]["docs"][0]["id"], "response"),
    "vespa": (lambda b: b["root"]["children"][0]["fields"]["id"], "root"),
    "typesense": (lambda b: b["hits"][0]["document"]["id"], "hits"),
    "meili": (lambda b: b["hits"][0]["id"], "hits"),
}


@pytest.mark.parametrize("dialect", sorted(ASK))
def test_malformed_bodies_in_every_shape(service, dialect):
    first_id, hits_key = DIALECT_ID[dialect]
    with httpx.Client(base_url=service.url) as client:
        good = ask_native(client, "weather forecast", 5, {})[0].json()["hits"][0]["id"]

        service.set_knobs(malformed="not_json")
        response = ASK[dialect](client, "weather forecast", 5, {})[0]
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        with pytest.raises(ValueError):
            json.loads(response.text)

        service.set_knobs(malformed="no_hits")
        body = ASK[dialect](client, "weather forecast", 5, {})[0].json()
        assert hits_key not in body

        service.set_knobs(malformed="object_id")
        body = ASK[dialect](client, "weather forecast", 5, {})[0].json()
        assert first_id(body) == {"id": good}
        assert service.stats()["malformed"] == 1


def test_malformed_queries_spoil_only_the_named_query(service):
    service.set_knobs(malformed_queries={"weather": "no_hits", "crypto": "object_id"})
    spoiled = httpx.get(f"{service.url}/search", params={"q": "weather"}).json()
    odd = httpx.get(f"{service.url}/search", params={"q": "crypto"}).json()
    fine = httpx.get(f"{service.url}/search", params={"q": "weather forecast"}).json()
    assert "hits" not in spoiled
    assert isinstance(odd["hits"][0]["id"], dict) and isinstance(odd["hits"][1]["id"], str)
    assert fine["hits"] and all(isinstance(h["id"], str) for h in fine["hits"])
    stats = service.stats()
    assert (stats["requests"], stats["malformed"], stats["failed"]) == (3, 2, 0)


def test_require_headers_answers_401_without_them(service):
    service.set_knobs(require_headers={"Authorization": "ApiKey s3cret"})
    url = f"{service.url}/search"
    assert httpx.get(url, params={"q": "weather"}).status_code == 401
    wrong = httpx.get(url, params={"q": "weather"}, headers={"Authorization": "ApiKey nope"})
    assert wrong.status_code == 401
    right = httpx.get(url, params={"q": "weather"}, headers={"Authorization": "ApiKey s3cret"})
    assert right.status_code == 200
    # authentication comes before parsing, as in the real engines: 401, not 400
    unparsable = httpx.post(f"{service.url}/es/x/_search", json={"query": {"fuzzy": {}}})
    assert unparsable.status_code == 401
    assert "s3cret" not in json.dumps(service.stats())  # the counters never keep header values


def test_set_knobs_replaces_them_all_and_zeroes_the_counters(service):
    service.set_knobs(delay_ms=1, fail_queries={"x": 500})
    httpx.get(f"{service.url}/search", params={"q": "x"})
    assert service.stats()["requests"] == 1
    answer = service.set_knobs(fail_first=2)
    assert answer["knobs"]["delay_ms"] == 0 and answer["knobs"]["fail_queries"] == {}
    assert answer["stats"]["requests"] == 0 and answer["stats"]["fail_first_remaining"] == 2
    assert service.knobs()["fail_first"] == 2
    for bad in ({"fail_status": 200}, {"delay_ms": -1}, {"malformed": "garbage"}, {"typo": 1},
                {"fail_queries": {"x": 302}}):
        assert httpx.post(f"{service.url}/_knobs", json=bad).status_code == 422, bad
    assert service.knobs()["fail_first"] == 2  # a refused setting changes nothing
    # health and the admin endpoints are never failed, delayed or counted
    assert httpx.get(f"{service.url}/health").status_code == 200
    assert service.stats()["requests"] == 0


# ---------------------------------------------------------------- document lookup


def test_document_lookup_returns_the_catalog_text_and_its_hash(service):
    resource = DOCUMENTS["sqli-scanner"]
    body = httpx.get(f"{service.url}/documents/sqli-scanner").json()
    assert body["title"] == resource.name
    assert body["text"] == resource.description  # verbatim, "'); DROP TABLE x; --" included
    assert "DROP TABLE" in body["text"]
    assert body["content_hash"] == resource.content_hash  # the hash searcheval's staleness uses
    assert (body["network"], body["asset"], body["price_usd"]) == ("base", "USDC", 0.25)
    missing = httpx.get(f"{service.url}/documents/no-such-listing")
    assert missing.status_code == 404 and "no-such-listing" in missing.json()["error"]


def test_document_knobs_fail_edit_and_remove_documents(service):
    service.set_knobs(fail_documents={"geocoding": 500}, edited_documents=["fx-rates"],
                      gone_documents=["weather-forecast"], delay_ms=50)
    url = service.url
    started = time.perf_counter()
    assert httpx.get(f"{url}/documents/geocoding").status_code == 500
    assert time.perf_counter() - started >= 0.05
    edited = httpx.get(f"{url}/documents/fx-rates").json()
    assert edited["content_hash"] != DOCUMENTS["fx-rates"].content_hash
    assert edited["text"].startswith(DOCUMENTS["fx-rates"].description)
    assert httpx.get(f"{url}/documents/weather-forecast").status_code == 404
    # a gone document is gone from the results too
    assert "weather-forecast" not in native_ids(service, "weather forecast")
    assert "weather-forecast-stuffed" in native_ids(service, "weather forecast")
    assert service.stats()["by_endpoint"] == {"documents": 3, "native": 2}

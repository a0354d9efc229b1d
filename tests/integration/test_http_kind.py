"""The `http` kind through real HTTP against the example search service (a real subprocess):
every documented engine shape, metrics equal to scoring the service's own answers, retries,
timeouts, the concurrency limit across shards, the rate limit, malformed answers, secrets."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from searcheval import load_collection
from searcheval.evaluation.pipeline import merge_runs, query_shards
from searcheval.metrics.engine import evaluate
from searcheval.metrics.scoring import score_run
from searcheval.rankers.configs import configurations_from, load_configurations
from searcheval.rankers.registry import RunContext, run_configuration

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "configurations"
COLLECTION = load_collection(fixtures=ROOT / "fixtures")
QUERIES = COLLECTION.queries
ENGINES = ("native", "elasticsearch", "solr", "vespa", "typesense", "meilisearch")


@pytest.fixture
def service(example_service, monkeypatch):
    example_service.set_knobs()
    monkeypatch.setenv("ES_API_KEY", "es-test-key")
    monkeypatch.setenv("TYPESENSE_API_KEY", "ts-test-key")
    yield example_service
    example_service.set_knobs()


def native_answers(service, k: int = 100) -> dict[str, list[tuple[str, float]]]:
    """The service's own answers, asked directly (no searcheval code in between)."""
    out = {}
    for q in QUERIES:
        filters = {name: value for name, value in (("network", q.filters.network),
                                                   ("asset", q.filters.asset),
                                                   ("max_price_usd", q.filters.max_price_usd))
                   if value is not None}
        body = httpx.get(f"{service.url}/search", params={"q": q.text, "k": k, **filters}).json()
        out[q.id] = [(h["id"], h["score"]) for h in body["hits"]]
    return out


def native(service, **params):
    entry = {"kind": "http", "served": True,
             "params": {"base_url": service.url, "url": "/search",
                        "query_params": {"q": "{text}", "k": "{k}", "network": "{network}",
                                         "asset": "{asset}", "max_price_usd": "{max_price_usd}"},
                        "id": "hits[*].id", "score": "hits[*].score", **params}}
    return configurations_from({"configurations": {"web": entry}}, "test.yaml")["web"]


def run(configuration, queries=QUERIES, secrets=None, k: int = 100):
    return run_configuration(configuration, RunContext(secrets=secrets or {}), queries, None, k)


@pytest.mark.parametrize("engine", ENGINES)
def test_each_documented_engine_example_answers_what_the_service_answers(service, engine):
    configurations = load_configurations(EXAMPLES / f"{engine}.yaml",
                                         {f"{engine}.base_url": service.url})
    configuration = configurations[configurations.served]
    result = run(configuration, secrets={"meili-search-key": "meili-test-key"})
    assert result.errors == {}
    expected = native_answers(service)
    assert {q: [d for d, _ in hits] for q, hits in result.results.items()} \
        == {q: [d for d, _ in hits] for q, hits in expected.items()}
    # every filtered fixture query went out with its filters, in this engine's own syntax
    recent = {r["query"]: r for r in service.stats()["recent"]}
    q09 = next(q for q in QUERIES if q.id == "q09")  # asset USDC, at most 0.001
    assert recent[q09.text]["filters"] == {"asset": "USDC", "max_price_usd": 0.001}
    q01 = next(q for q in QUERIES if q.id == "q01")
    assert recent[q01.text]["filters"] == {} and recent[q01.text]["k"] == 100


def test_metrics_equal_scoring_the_services_own_answers(service):
    result = run(native(service))
    qrels = COLLECTION.qrels()
    ours = score_run(result, qrels, QUERIES, ("ndcg@10", "mrr", "recall@20"))
    direct = evaluate(qrels, {q: dict(hits) for q, hits in native_answers(service).items()},
                      ["ndcg@10", "mrr", "recall@20"], query_ids=[q.id for q in QUERIES])
    assert ours.means == pytest.approx(direct.means, abs=1e-12)
    assert set(ours.latency_ms) == {"p50", "p95", "p99"}
    assert all(v > 0 for v in result.latency_ms.values())
    assert set(result.latency_ms) == {q.id for q in QUERIES}


def test_retries_recover_from_injected_503s_and_429s(service):
    service.set_knobs(fail_first=2, fail_status=503)
    result = run(native(service, retries=2, backoff_s=0.01, concurrency=1), QUERIES[:3])
    assert result.errors == {}
    assert result.timing[QUERIES[0].id]["attempts"] == 3  # two 503s, then the answer
    assert service.stats()["by_status"] == {"503": 2, "200": 3}
    service.set_knobs(fail_first=1, fail_status=429)
    result = run(native(service, retries=1, backoff_s=0.01, concurrency=1), QUERIES[:1])
    assert result.errors == {} and service.stats()["by_status"] == {"429": 1, "200": 1}


def test_a_query_failing_after_its_retries_is_an_error_with_its_cause(service):
    service.set_knobs(fail_first=3, fail_status=503)
    result = run(native(service, retries=2, backoff_s=0.01, concurrency=1), QUERIES[:2])
    first, second = QUERIES[0].id, QUERIES[1].id
    assert result.errors[first] == {"cause": "HTTP 503 after 3 attempts", "attempts": 3}
    assert first not in result.results  # never an empty result
    assert second in result.results and second not in result.errors
    # a 4xx is not retried: it will not get better
    service.set_knobs(fail_queries={QUERIES[0].text: 404})
    result = run(native(service, retries=2, backoff_s=0.01), QUERIES[:1])
    assert result.errors[first]["attempts"] == 1
    assert result.errors[first]["cause"].startswith("HTTP 404: ")


def test_a_timeout_is_a_failed_query(service):
    service.set_knobs(delay_ms=400)
    result = run(native(service, timeout_s=0.05, retries=2), QUERIES[:2])
    assert result.results == {}
    assert {e["cause"] for e in result.errors.values()} == {"timeout after 0.05 s"}
    assert all(e["attempts"] == 1 for e in result.errors.values())


@pytest.mark.parametrize("mode, words", [
    ("not_json", "bad response: not JSON (HTTP 200, text/html"),
    ("no_hits", "bad response: no hits in the response (path hits[*].id)"),
    ("object_id", "bad response: the id at hits[0].id is dict"),
])
def test_a_malformed_answer_is_refused_naming_the_path(service, mode, words):
    query = QUERIES[0]
    service.set_knobs(malformed_queries={query.text: mode})
    result = run(native(service), QUERIES[:2])
    assert words in result.errors[query.id]["cause"], result.errors
    assert QUERIES[1].id in result.results


def test_the_concurrency_limit_holds_across_shards(service):
    service.set_knobs(delay_ms=60)
    configuration = native(service, concurrency=3)
    shards = query_shards(QUERIES, __import__("numpy").zeros((len(QUERIES), 1)), 3)
    parts: list = [None] * len(shards)

    def one(i):
        parts[i] = run(configuration, shards[i].queries)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(shards))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    merged = merge_runs(parts)
    assert merged.errors == {} and len(merged.results) == len(QUERIES)
    stats = service.stats()
    # three shards of five queries, each shard up to three at a time: the shared limit holds,
    # and it is reached (the delay keeps three requests in flight together)
    assert stats["max_in_flight"] == 3 and stats["requests"] == len(QUERIES)


def test_the_rate_limit_spaces_the_requests(service):
    configuration = native(service, rate_limit=20.0, concurrency=4)
    started = time.monotonic()
    result = run(configuration, QUERIES[:6])
    assert result.errors == {}
    # six requests at most 20 per second: the last starts at least 5 / 20 s after the first
    assert time.monotonic() - started >= 5 / 20


def test_header_values_come_from_the_environment_and_never_reach_the_configuration(service,
                                                                                    monkeypatch):
    service.set_knobs(require_headers={"Authorization": "Bearer s3cret-value"})
    configuration = native(service, headers={"Authorization": {"env": "WEB_TOKEN",
                                                               "prefix": "Bearer "}})
    monkeypatch.setenv("WEB_TOKEN", "s3cret-value")
    result = run(configuration, QUERIES[:2])
    assert result.errors == {}
    assert "s3cret-value" not in repr(configuration.resolved())
    monkeypatch.setenv("WEB_TOKEN", "wrong")
    assert run(configuration, QUERIES[:1]).errors[QUERIES[0].id]["cause"].startswith("HTTP 401")
    # a credential written in the file is refused
    with pytest.raises(Exception) as err:
        native(service, headers={"Authorization": "Bearer s3cret-value"})
    assert err.value.field == "web.headers.Authorization"


def test_the_backend_benchmark_compares_both_clients_at_two_concurrencies(tmp_path):
    from searcheval.bench.backend import benchmark_backend_concurrency

    lines: list[str] = []
    figures = benchmark_backend_concurrency(ROOT, queries=16, delay_ms=20, concurrencies=(1, 4),
                                            log_dir=tmp_path, out=lines.append)
    rows = {(r["client"], r["concurrency"]): r for r in figures["rows"]}
    assert set(rows) == {(c, n) for c in ("searcheval http", "bare httpx") for n in (1, 4)}
    for (_, concurrency), r in rows.items():
        # the service sleeps 20 ms: no round trip is shorter, so no client does more than
        # concurrency / 20 ms queries per second, nor holds more requests at once
        assert r["round_trip_p50"] >= 20
        assert r["qps"] <= concurrency * 1000 / 20
        assert 1 <= r["in_flight"] <= concurrency
        # keep-alive, a pool of `concurrency` connections: 16 queries on at most that many
        assert 1 <= r["connections"] <= concurrency
        assert r["overhead_p50"] >= 0
    assert figures["speedup"] == pytest.approx(rows[("searcheval http", 4)]["qps"]
                                               / rows[("searcheval http", 1)]["qps"])
    assert lines[-1].startswith("goals: concurrency 4 >= 4x")
    assert f"{figures['speedup']:.2f}x ({'met' if figures['speedup'] >= 4 else 'MISSED'})" \
        in lines[-1]


def test_the_backend_benchmark_at_scale_prints_its_table_and_goals_by_its_figures(tmp_path):
    """`searcheval benchmark backend` at a small size (500 queries at concurrency 32, the service
    sleeping 20 ms, 2 rounds): a row per client and round, the capacity nominal and measured,
    and a goals line that says what the figures say. No timing goal is asserted met: the
    machine is shared."""
    from searcheval.bench.backend import BARE, GOAL_CAPACITY, GOAL_OVERHEAD_MS, OURS, \
        benchmark_backend

    lines: list[str] = []
    figures = benchmark_backend(ROOT, queries=500, concurrency=32, delay_ms=20, rounds=2,
                                log_dir=tmp_path, out=lines.append)
    assert lines[0].startswith("benchmark backend: 500 queries at concurrency 32 against the "
                               "example service sleeping 20 ms per answer")
    assert "nominal capacity 32 / 20 ms = 1600 queries/s" in lines[0] and "load" in lines[0]
    assert "limit_concurrency none" in lines[1] and "asyncio.sleep (20 ms)" in lines[1]
    table = [line.split() for line in lines if line[:1].isdigit()]
    rows = figures["rows"]
    assert [(r["round"], r["client"]) for r in rows] == [(1, BARE), (1, OURS), (2, BARE),
                                                         (2, OURS)]
    assert [(int(t[0]), " ".join(t[1:3])) for t in table] == [(r["round"], r["client"])
                                                            for r in rows]
    for t, r in zip(table, rows):
        assert float(t[3]) == pytest.approx(r["qps"], abs=0.05)  # the printed queries/s
        assert r["queries"] == 500 and r["round_trip_p50"] >= 20  # the sleep bounds each trip
        assert r["qps"] <= 1600 and r["in_flight"] <= 32
        assert 1 <= r["connections"] <= 32  # 500 queries on a pool of 32 kept-alive connections
        assert r["client_cpu_ms"] > 0 and r["load"] >= 0
    assert figures["nominal"] == 1600  # 32 requests at once / 0.020 s each
    capacity = max(r["qps"] for r in rows if r["client"] == BARE)
    ours = max(r["qps"] for r in rows if r["client"] == OURS)
    assert figures["measured"] == capacity and figures["qps"] == ours
    assert figures["share"] == pytest.approx(ours / capacity)
    assert figures["nominal_share"] == pytest.approx(ours / 1600)
    # the overhead goal reads every query of the http kind's rounds, not one round's median
    every = np.concatenate([r["overhead_ms"] for r in rows if r["client"] == OURS])
    assert len(every) == 1000 and figures["overhead_p50"] == np.percentile(every, 50)
    goals = lines[-1]
    assert goals.startswith(f"goals: >= {GOAL_CAPACITY:.0%} of the service's measured capacity")
    assert f"{figures['share']:.1%} ({'met' if figures['share'] >= 0.9 else 'MISSED'})" in goals
    assert f"{figures['overhead_p50']:.3f} ms (" \
        f"{'met' if figures['overhead_p50'] < GOAL_OVERHEAD_MS else 'MISSED'})" in goals
    assert figures["goal_met"] == (figures["share"] >= 0.9
                                   and figures["overhead_p50"] < GOAL_OVERHEAD_MS)
    assert f"measured {capacity:.1f}" in lines[-3] and "nominal 1600" in lines[-3]



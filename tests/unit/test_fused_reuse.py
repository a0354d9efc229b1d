"""`fused` takes the runs of its sibling configurations (the same sha256, the same queries and
depth) instead of searching again, and searches again when a sibling failed a query
(searcheval.rankers.registry, evaluation.pipeline.shard_siblings / reuse_order)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from searcheval.errors import InputError
from searcheval.evaluation import pipeline
from searcheval.io.fixtures import load_fixtures
from searcheval.rankers.configs import builtin_configurations, load_configurations
from searcheval.rankers.fusion import run_fused
from searcheval.rankers.registry import (RunContext, fusion_params, reusable_siblings,
                                         run_configuration, sibling_key)
from searcheval.types import RankedRun

ROOT = Path(__file__).resolve().parents[2]
K = 10


@pytest.fixture(scope="module")
def collection():
    return load_fixtures(ROOT / "fixtures")


@pytest.fixture(scope="module")
def configurations():
    return builtin_configurations()


def context(collection, siblings=None) -> RunContext:
    return RunContext(conn=None, catalog=collection.catalog_id, resources=collection.resources,
                      siblings=siblings or {})


def fake_dense(collection, name="dense") -> RankedRun:
    """A dense run made up from the catalog's order (no database): each query gets a different
    list, with cosines above the fused floors."""
    ids = [r.id for r in collection.resources]
    results = {q.id: [(ids[(i + j) % len(ids)], 0.9 - 0.05 * j) for j in range(5)]
               for i, q in enumerate(collection.queries)}
    return RankedRun(configuration=name, results=results,
                     latency_ms={q: 2.0 for q in results}, usage={"cpu_s": 0.5})


def bm25_run(configurations, collection) -> RankedRun:
    return run_configuration(configurations["bm25"], context(collection), collection.queries,
                             None, K)


def test_fused_takes_both_siblings_and_needs_no_database(configurations, collection):
    fused, bm25, dense = (configurations[n] for n in ("fused", "bm25", "dense"))
    lexical, semantic = bm25_run(configurations, collection), fake_dense(collection)
    siblings = {sibling_key(bm25, K): lexical, sibling_key(dense, K): semantic}
    queries = collection.queries
    # conn is None: a dense search would be refused, so the result can only come from siblings
    got = run_configuration(fused, context(collection, siblings), queries, None, K)
    expected = run_fused(lexical, semantic, collection.resources, queries,
                         fusion_params(fused.params, depth=K))
    assert got.configuration == "fused"
    assert got.results == expected.results
    assert any(got.results.values())
    assert got.usage["cpu_s"] >= lexical.usage["cpu_s"] + 0.5  # the taken CPU counts
    with pytest.raises(InputError, match="needs the database"):
        run_configuration(fused, context(collection, {sibling_key(bm25, K): lexical}),
                          queries, None, K)


def test_a_sibling_with_a_failed_query_is_searched_again(configurations, collection):
    fused, bm25, dense = (configurations[n] for n in ("fused", "bm25", "dense"))
    lexical, semantic = bm25_run(configurations, collection), fake_dense(collection)
    first = collection.queries[0].id
    # a bm25 sibling whose lists are wrong and which failed one query: not taken
    wrong = RankedRun(configuration="bm25",
                      results={q: [] for q in lexical.results if q != first},
                      errors={first: {"cause": "timeout", "detail": "", "attempts": 1}})
    siblings = {sibling_key(bm25, K): wrong, sibling_key(dense, K): semantic}
    got = run_configuration(fused, context(collection, siblings), collection.queries, None, K)
    expected = run_fused(lexical, semantic, collection.resources, collection.queries,
                         fusion_params(fused.params, depth=K))
    assert got.results == expected.results  # bm25 searched again, not the empty lists


def test_another_hash_or_depth_is_not_taken(configurations, collection, tmp_path):
    fused, bm25, dense = (configurations[n] for n in ("fused", "bm25", "dense"))
    lexical, semantic = bm25_run(configurations, collection), fake_dense(collection)
    empty = RankedRun(configuration="bm25", results={q.id: [] for q in collection.queries})
    # an empty bm25 run under another depth's key, and under another configuration's hash
    siblings = {sibling_key(bm25, K + 1): empty, "0" * 64 + f"@{K}": empty,
                sibling_key(dense, K): semantic}
    got = run_configuration(fused, context(collection, siblings), collection.queries, None, K)
    expected = run_fused(lexical, semantic, collection.resources, collection.queries,
                         fusion_params(fused.params, depth=K))
    assert got.results == expected.results

    path = tmp_path / "configurations.yaml"
    path.write_text((ROOT / "configurations.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    changed = load_configurations(path, overrides={"bm25.k1": 0.9})
    # fused names the changed bm25: its component's hash follows it, so the sibling matches
    assert [c.name for c in reusable_siblings(changed["fused"], list(changed.entries.values()))] \
        == ["bm25", "dense"]
    # a fused of the original components does not take the changed bm25's run
    assert [c.name for c in reusable_siblings(fused, [changed["bm25"], dense])] == ["dense"]


def test_the_flow_runs_fused_after_its_siblings_on_the_shards_queries(configurations,
                                                                     collection):
    selected = [configurations[n] for n in ("fused", "bm25", "dense")]
    first, later = pipeline.reuse_order(selected)
    assert [c.name for c in first] == ["bm25", "dense"]
    assert [c.name for c in later] == ["fused"]
    assert pipeline.reuse_order([configurations["fused"]]) == ([configurations["fused"]], [])

    queries = collection.queries
    vectors = np.zeros((len(queries), 4), dtype=np.float32)
    shards = pipeline.query_shards(queries, vectors, 3)
    runs = {"bm25": bm25_run(configurations, collection), "dense": fake_dense(collection)}
    runs["bm25"].usage["cpu_s"] = 3.0
    siblings = pipeline.shard_siblings(configurations["fused"], selected, runs, shards[1], K)
    taken = siblings[sibling_key(configurations["bm25"], K)]
    assert list(taken.results) == [q.id for q in shards[1].queries]
    assert taken.usage["cpu_s"] == pytest.approx(3.0 * len(shards[1].queries) / len(queries))
    assert not pipeline.shard_needs_database(configurations["fused"], collection, shards[1], K,
                                             siblings)
    assert pipeline.shard_needs_database(configurations["fused"], collection, shards[1], K, {})

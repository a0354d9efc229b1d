"""The `dense` configuration end to end: real model, real pgvector, HNSW against exact search."""

from __future__ import annotations

import numpy as np
import pytest

from searcheval import store
from searcheval.errors import InputError
from searcheval.rankers import dense
from searcheval.rankers.embeddings import CachedEmbedder
from searcheval.types import Resource

pytestmark = pytest.mark.slow

CATALOG = [
    Resource(id="weather", name="Weather forecast API",
             description="Hourly temperature, rain and wind forecasts for any city.",
             tags=("weather", "forecast")),
    Resource(id="translate", name="Text translation",
             description="Translate documents and sentences between 100 languages.",
             tags=("language", "translation")),
    Resource(id="images", name="Image generation",
             description="Create pictures from a text prompt with a diffusion model.",
             tags=("images", "generative")),
    Resource(id="stocks", name="Stock quotes",
             description="Real-time share prices and trading volume from US exchanges.",
             tags=("finance", "markets")),
    Resource(id="geocode", name="Geocoding",
             description="Turn a street address into latitude and longitude coordinates.",
             tags=("maps", "location")),
]
QUERIES = {
    "q-rain": "will it rain in Paris tomorrow",
    "q-french": "convert an english sentence into french",
    "q-address": "get the coordinates of a postal address",
}
EXPECTED_TOP = {"q-rain": "weather", "q-french": "translate", "q-address": "geocode"}


@pytest.fixture(scope="module")
def indexed(conn, embedding_model):
    store.save_catalog(conn, "tiny", CATALOG)
    embedder = CachedEmbedder(conn)
    counts = dense.index_documents(conn, "tiny", embedder, CATALOG)
    return embedder, counts


def test_index_documents_embeds_each_document_once(conn, indexed):
    embedder, counts = indexed
    assert counts == {"model": "all-MiniLM-L6-v2", "documents": len(CATALOG),
                      "embedded": len(CATALOG), "from_cache": 0}
    assert embedder.model_seconds > 0  # the texts reached the model
    cached = CachedEmbedder(conn)
    again = dense.index_documents(conn, "tiny", cached, CATALOG)
    assert cached.model_seconds == 0.0  # every text came from the cache
    assert again == {"model": "all-MiniLM-L6-v2", "documents": len(CATALOG), "embedded": 0,
                     "from_cache": len(CATALOG)}


def test_paraphrases_find_their_resource(conn, indexed):
    embedder, _ = indexed
    qids = list(QUERIES)
    qvecs = embedder.embed([QUERIES[q] for q in qids])
    run = dense.run_dense(conn, "tiny", embedder.model, qids, qvecs, k=100)
    assert run.configuration == "dense"
    assert {q: run.top_ids(q, 1)[0] for q in qids} == EXPECTED_TOP
    assert set(run.latency_ms) == set(qids) and all(ms > 0 for ms in run.latency_ms.values())
    docs = embedder.embed([r.text for r in CATALOG])
    for qid, qvec in zip(qids, qvecs):
        hits = run.results[qid]
        assert len(hits) == len(CATALOG)
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True)
        cosine = {r.id: float(d @ qvec) for r, d in zip(CATALOG, docs)}
        assert scores == pytest.approx([cosine[d] for d, _ in hits], abs=1e-6)
    exact = dense.run_dense(conn, "tiny", embedder.model, qids, qvecs, k=2, exact=True)
    assert {q: [d for d, _ in hits] for q, hits in exact.results.items()} == {
        q: run.top_ids(q, 2) for q in qids}


def test_a_removed_resource_leaves_the_search(conn, indexed):
    embedder, _ = indexed
    smaller = [r for r in CATALOG if r.id != "weather"]
    store.save_catalog(conn, "tiny-removal", CATALOG)
    dense.index_documents(conn, "tiny-removal", embedder, CATALOG)
    assert store.save_catalog(conn, "tiny-removal", smaller)["removed"] == 1
    qvec = embedder.embed([QUERIES["q-rain"]])
    run = dense.run_dense(conn, "tiny-removal", embedder.model, ["q-rain"], qvec)
    assert "weather" not in run.top_ids("q-rain", 100)
    assert len(run.results["q-rain"]) == len(CATALOG) - 1


def test_hnsw_recall_at_10_matches_exact_search_on_a_small_set(conn):
    rng = np.random.default_rng(12)
    ids = [f"r{i:02d}" for i in range(60)]
    docs = rng.normal(size=(60, 384)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    store.save_catalog(conn, "recall", [Resource(id=i, name=i, description=i) for i in ids])
    store.save_doc_vectors(conn, "recall", "m", ids, docs)
    queries = rng.normal(size=(8, 384)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    assert "doc_vectors_hnsw_384" in store.dense_search_plan(conn, "recall", "m", queries[0], 10)
    assert dense.hnsw_recall(conn, "recall", "m", queries, k=10) == 1.0


def test_run_dense_needs_indexed_documents(conn, indexed):
    embedder, _ = indexed
    with pytest.raises(InputError) as err:
        dense.run_dense(conn, "never-indexed", embedder.model, ["q"], np.ones((1, 384)))
    assert err.value.field == "catalog"
    with pytest.raises(InputError) as err:
        dense.run_dense(conn, "tiny", embedder.model, ["q1", "q2"], np.ones((1, 384)))
    assert err.value.field == "query_vectors"

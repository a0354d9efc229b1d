"""The `dense` configuration: cosine nearest neighbours in pgvector over all-MiniLM-L6-v2 vectors.

Documents are embedded (through the cache) from `Resource.text` and stored in `doc_vectors`;
queries are ranked in SQL (`ORDER BY embedding <=> q LIMIT k`) through the HNSW index, and
`hnsw_recall` measures that index against exact search.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from searcheval import store
from searcheval.errors import InputError
from searcheval.rankers.embeddings import CachedEmbedder
from searcheval.types import RankedRun, Resource

CONFIGURATION = "dense"


def index_documents(conn: psycopg.Connection, catalog: str, embedder: CachedEmbedder,
                    resources: Sequence[Resource]) -> dict:
    """Embed every resource's text through the cache and make them the document vectors of
    (`catalog`, `embedder.model`). The catalog must have been saved (`store.save_catalog`) first.
    Returns `{"model", "documents", "embedded", "from_cache"}` for this call."""
    embedded, from_cache = embedder.embedded, embedder.from_cache
    vectors = embedder.embed([r.text for r in resources])
    documents = store.save_doc_vectors(conn, catalog, embedder.model, [r.id for r in resources],
                                       vectors)
    return {
        "model": embedder.model,
        "documents": documents,
        "embedded": embedder.embedded - embedded,
        "from_cache": embedder.from_cache - from_cache,
    }


def _query_matrix(query_ids: Sequence[str], query_vectors: Any) -> np.ndarray:
    vectors = np.asarray(query_vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(query_ids):
        raise InputError(f"expected one query vector per query id ({len(query_ids)}) as a 2-d "
                         f"array, got shape {vectors.shape}", field="query_vectors")
    return vectors


def run_dense(conn: psycopg.Connection, catalog: str, model: str, query_ids: Sequence[str],
              query_vectors: Any, k: int = 100, exact: bool = False) -> RankedRun:
    """Rank the catalog's document vectors for each query: score = cosine similarity, best first,
    ties broken by document id descending. `latency_ms` is measured around the SQL of each query; the queries share one transaction
    (`store.dense_search_many`).
    """
    vectors = _query_matrix(query_ids, query_vectors)
    if len(set(query_ids)) != len(query_ids):
        raise InputError("expected distinct query ids", field="query_ids")
    if len(query_ids) and store.count_doc_vectors(conn, catalog, model, vectors.shape[1]) == 0:
        raise InputError(f"no {vectors.shape[1]}-dimension document vectors for catalog "
                         f"{catalog!r} and model {model!r}; run index_documents first",
                         field="catalog")
    results: dict[str, list[tuple[str, float]]] = {}
    latency: dict[str, float] = {}
    searched = store.dense_search_many(conn, catalog, model, list(vectors), k, exact=exact)
    for qid, (hits, milliseconds) in zip(query_ids, searched):  # one transaction for them all
        latency[qid] = milliseconds
        hits.sort(key=lambda hit: hit[0], reverse=True)  # ties: doc id descending
        hits.sort(key=lambda hit: hit[1], reverse=True)  # stable: by score, best first
        results[qid] = hits
    return RankedRun(configuration=CONFIGURATION, results=results, latency_ms=latency)


def hnsw_recall(conn: psycopg.Connection, catalog: str, model: str, query_vectors: Any,
                k: int = 10) -> float:
    """Mean over queries of |HNSW top k ∩ exact top k| / |exact top k|: how much of the true
    nearest neighbours the index finds (1.0 when it finds them all; 1.0 for no query)."""
    vectors = np.asarray(query_vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise InputError(f"expected a 2-d array of query vectors, got shape {vectors.shape}",
                         field="query_vectors")
    recalls = []
    for vector in vectors:
        truth = {d for d, _ in store.dense_search(conn, catalog, model, vector, k, exact=True)}
        if not truth:
            continue
        found = {d for d, _ in store.hnsw_search(conn, catalog, model, vector, k)}
        recalls.append(len(found & truth) / len(truth))
    return float(np.mean(recalls)) if recalls else 1.0

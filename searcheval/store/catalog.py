"""The search data in Postgres: the catalog snapshot, the embedding cache rows, and the document
vectors that dense search runs on (pgvector HNSW, or exact).

Plain functions over a psycopg connection (as `searcheval.store.database.connect` opens it); every
SQL statement comes from `searcheval.store.sql`. Each write runs in one transaction, so a failure
leaves nothing half-written. Text is always passed as a parameter, so any catalog name or resource
text is stored and searched verbatim.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row

from searcheval.errors import InputError
from searcheval.store import sql
from searcheval.types import Resource

#: dimension of the vectors the HNSW index covers (see migrations/001_initial.sql).
HNSW_DIMENSIONS = 384
#: hnsw.ef_search bounds. pgvector's default of 40 found 0.985 of the exact top 10 on SciFact
#: (33 of 300 queries lost a neighbour); 100 found 0.998 (`searcheval benchmark search`), at a
#: cost of about a millisecond per query. 1000 is pgvector's maximum.
EF_SEARCH_MIN = 100
EF_SEARCH_MAX = 1000


def _check_catalog(catalog: Any) -> str:
    if not isinstance(catalog, str) or not catalog:
        raise InputError(f"expected a non-empty catalog name, got {catalog!r}", field="catalog")
    return catalog


# --------------------------------------------------------------------------- catalog


def save_catalog(conn: psycopg.Connection, catalog: str, resources: Sequence[Resource]) -> dict:
    """Make the stored catalog `catalog` equal to `resources`, in one transaction.

    Upserts every resource and deletes the ones no longer listed (their document vectors go with
    them). Returns counts by content hash: `{"added", "changed", "removed", "unchanged"}`.
    """
    _check_catalog(catalog)
    ids: list[str] = []
    seen: set[str] = set()
    for i, resource in enumerate(resources):
        if not isinstance(resource, Resource):
            raise InputError(f"expected a Resource, got {type(resource).__name__}",
                             field=f"resources[{i}]")
        if resource.id in seen:
            raise InputError(f"duplicate resource id {resource.id!r} in catalog {catalog!r}",
                             field=f"resources[{i}].id")
        seen.add(resource.id)
        ids.append(resource.id)
    rows = [_resource_row(catalog, r) for r in resources]
    with conn.transaction():
        conn.execute(sql.CATALOG_LOCK, {"lock_class": sql.CATALOG_LOCK_CLASS, "catalog": catalog})
        before = dict(conn.execute(sql.SELECT_CATALOG_HASHES, {"catalog": catalog}).fetchall())
        with conn.cursor() as cur:
            if rows:
                cur.executemany(sql.UPSERT_RESOURCE, rows)
            cur.execute(sql.DELETE_RESOURCES_NOT_IN, {"catalog": catalog, "ids": ids})
    added = sum(1 for row in rows if row["id"] not in before)
    changed = sum(1 for row in rows
                  if row["id"] in before and before[row["id"]] != row["content_hash"])
    return {
        "added": added,
        "changed": changed,
        "removed": sum(1 for rid in before if rid not in seen),
        "unchanged": len(rows) - added - changed,
    }


def _resource_row(catalog: str, r: Resource) -> dict:
    return {
        "catalog": catalog, "id": r.id, "name": r.name, "description": r.description,
        "tags": list(r.tags), "network": r.network, "asset": r.asset, "price_usd": r.price_usd,
        "settled_30d": r.settled_30d, "success_rate": r.success_rate,
        "updated_at": r.updated_at, "content_hash": r.content_hash,
    }


def load_catalog_hashes(conn: psycopg.Connection, catalog: str) -> dict[str, str]:
    """`{resource id: content_hash}` of the stored catalog (empty if it was never saved)."""
    _check_catalog(catalog)
    return dict(conn.execute(sql.SELECT_CATALOG_HASHES, {"catalog": catalog}).fetchall())


def load_resources(conn: psycopg.Connection, catalog: str) -> list[Resource]:
    """The stored catalog as Resources, by id."""
    _check_catalog(catalog)
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(sql.SELECT_CATALOG, {"catalog": catalog}).fetchall()
    return [Resource(**{**row, "tags": tuple(row["tags"])}) for row in rows]


# --------------------------------------------------------------------------- embedding cache rows


def load_embeddings(conn: psycopg.Connection, model: str, fingerprint: str,
                    keys: Sequence[str]) -> dict[str, np.ndarray]:
    """Cached vectors `{text_sha256: float32 vector}` for the keys that are cached (one query)."""
    if not keys:
        return {}
    with conn.cursor(binary=True) as cur:  # binary vectors: no text parsing
        rows = cur.execute(sql.SELECT_EMBEDDINGS, {
            "model": model, "fingerprint": fingerprint, "keys": list(keys),
        }).fetchall()
    return {key: _as_array(vector) for key, vector in rows}


def count_cached(conn: psycopg.Connection, model: str, fingerprint: str,
                 keys: Sequence[str]) -> int:
    """How many of the distinct `keys` are cached (one query, no vector read)."""
    if not keys:
        return 0
    return conn.execute(sql.COUNT_CACHED_EMBEDDINGS, {
        "model": model, "fingerprint": fingerprint, "keys": list(keys)}).fetchone()[0]


def save_embeddings(conn: psycopg.Connection, model: str, fingerprint: str,
                    items: Iterable[tuple[str, np.ndarray]]) -> None:
    """Add `(text_sha256, vector)` pairs to the cache in one transaction (existing keys kept)."""
    rows = [{"model": model, "fingerprint": fingerprint, "text_sha256": key,
             "embedding": np.asarray(vector, dtype=np.float32)} for key, vector in items]
    if not rows:
        return
    with conn.transaction(), conn.cursor() as cur:
        cur.executemany(sql.INSERT_EMBEDDING, rows)


def count_embeddings(conn: psycopg.Connection, model: str, fingerprint: str) -> int:
    return conn.execute(sql.COUNT_EMBEDDINGS, {"model": model, "fingerprint": fingerprint}
                        ).fetchone()[0]


def _as_array(vector: Any) -> np.ndarray:
    if hasattr(vector, "to_numpy"):  # pgvector.Vector (pgvector-python >= 0.4)
        return np.array(vector.to_numpy(), dtype=np.float32)
    return np.asarray(vector, dtype=np.float32)


# --------------------------------------------------------------------------- document vectors


def _vector_rows(ids: Sequence[str], vectors: np.ndarray | Sequence[np.ndarray]
                 ) -> np.ndarray | list[np.ndarray]:
    """`vectors` checked against `ids`: a 2-d array, or one 1-d float32 array per id, all of one
    length and finite (rows of the embedding batches, written without being copied into one
    matrix first: 43k documents x 384 dimensions are 63 MiB)."""
    if isinstance(vectors, np.ndarray):
        rows = np.asarray(vectors, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[0] != len(ids):
            raise InputError(f"expected {len(ids)} vectors (one per id) as a 2-d array, got "
                             f"shape {rows.shape}", field="vectors")
        if len(ids) and not np.isfinite(rows).all():
            raise InputError("expected finite vector components", field="vectors")
        return rows
    rows = list(vectors)
    if len(rows) != len(ids):
        raise InputError(f"expected {len(ids)} vectors (one per id), got {len(rows)}",
                         field="vectors")
    dims = rows[0].shape if rows else None
    for i, row in enumerate(rows):
        if not isinstance(row, np.ndarray) or row.dtype != np.float32 or row.ndim != 1 \
                or row.shape != dims:
            raise InputError(f"expected 1-d float32 vectors of one length, got "
                             f"{getattr(row, 'shape', type(row).__name__)} at {i}",
                             field=f"vectors[{i}]")
        if not np.isfinite(row).all():
            raise InputError("expected finite vector components", field=f"vectors[{i}]")
    return rows


def save_doc_vectors(conn: psycopg.Connection, catalog: str, model: str, ids: Sequence[str],
                     vectors: np.ndarray | Sequence[np.ndarray]) -> int:
    """Make the document vectors of (`catalog`, `model`) exactly `ids` -> `vectors` (a 2-d array,
    or one 1-d float32 array per id), in one transaction: rows of other ids are deleted, changed
    vectors replaced, equal ones left alone (so the HNSW index is not churned by an unchanged
    catalog). Every id must be a resource of the stored catalog. Returns the number of rows."""
    _check_catalog(catalog)
    vectors = _vector_rows(ids, vectors)
    if len(set(ids)) != len(ids):
        raise InputError("expected distinct document ids", field="ids")
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(sql.DELETE_DOC_VECTORS_NOT_IN,
                        {"catalog": catalog, "model": model, "ids": list(ids)})
            if len(ids):
                cur.execute(sql.CREATE_DOC_VECTORS_STAGING)
                with cur.copy(sql.COPY_DOC_VECTORS_STAGING) as copy:
                    copy.set_types(["text", "vector"])
                    for doc_id, vector in zip(ids, vectors):
                        copy.write_row((doc_id, vector))
                cur.execute(sql.UPSERT_DOC_VECTORS, {"catalog": catalog, "model": model})
    except psycopg.errors.ForeignKeyViolation:
        stored = load_catalog_hashes(conn, catalog)
        missing = [d for d in ids if d not in stored]
        raise InputError(f"{len(missing)} document id(s) are not resources of the stored catalog "
                         f"{catalog!r} (first: {missing[:1]}); save_catalog first",
                         field="ids") from None
    return len(ids)


def count_doc_vectors(conn: psycopg.Connection, catalog: str, model: str, dims: int) -> int:
    return conn.execute(sql.COUNT_DOC_VECTORS,
                        {"catalog": catalog, "model": model, "dims": dims}).fetchone()[0]


def _query_vector(query_vector: Any) -> np.ndarray:
    q = np.asarray(query_vector, dtype=np.float32)
    if q.ndim != 1 or q.size == 0 or not np.isfinite(q).all():
        raise InputError(f"expected a 1-d finite query vector, got shape {q.shape}",
                         field="query_vector")
    return q


def _ef_search(k: int) -> str:
    return str(min(max(k, EF_SEARCH_MIN), EF_SEARCH_MAX))


def dense_search(conn: psycopg.Connection, catalog: str, model: str, query_vector: Any, k: int,
                 exact: bool = False) -> list[tuple[str, float]]:
    """The `k` documents of (`catalog`, `model`) nearest to `query_vector` by cosine distance,
    best first, as `(doc_id, cosine similarity)`.

    `exact=False` searches through the HNSW index (384-dimension vectors; the planner is steered
    to it, since at evaluation scale it would often prefer an exact sort and the evaluation
    should measure what the index returns) with `hnsw.ef_search = clamp(k, 40, 1000)`. HNSW
    filters by catalog and model after the index scan, so it can return fewer than k rows when
    other catalogs crowd the neighbourhood; then the search is repeated exactly, so a short
    answer only ever means a small catalog. `exact=True`, or vectors of another dimension,
    compare every document.
    """
    return dense_search_many(conn, catalog, model, [query_vector], k, exact=exact)[0][0]


def dense_search_many(conn: psycopg.Connection, catalog: str, model: str,
                      query_vectors: Sequence[Any], k: int, exact: bool = False
                      ) -> list[tuple[list[tuple[str, float]], float]]:
    """`dense_search` of each query vector, all in one transaction: the plan settings are set
    once, not per query (on SciFact's 300 queries three statements and a commit each were a
    third of the dense configuration's time). Returns `(hits, milliseconds of its SQL)` per
    vector, in their order; the vectors must share one dimension."""
    _check_catalog(catalog)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"expected k >= 1, got {k!r}", field="k")
    vectors = [_query_vector(v) for v in query_vectors]
    if not vectors:
        return []
    dims = int(vectors[0].size)
    if any(v.size != dims for v in vectors):
        raise InputError("expected query vectors of one dimension", field="query_vectors")
    hnsw = not exact and dims == HNSW_DIMENSIONS
    out: list[tuple[list[tuple[str, float]], float]] = []
    stored: int | None = None  # the catalog's vectors, counted once if an answer is short
    with conn.transaction():
        if hnsw:
            conn.execute(sql.SET_EF_SEARCH, {"ef_search": _ef_search(k)})
            conn.execute(sql.FORCE_INDEX_SCAN)
        for q in vectors:
            start = time.perf_counter()
            params = {"catalog": catalog, "model": model, "q": q, "k": k, "dims": dims}
            if not hnsw:
                rows = _fetch(conn.execute(sql.DENSE_SEARCH_EXACT, params))
            else:
                rows = _fetch(conn.execute(sql.DENSE_SEARCH_HNSW_384, params))
                if len(rows) < k:
                    if stored is None:
                        stored = count_doc_vectors(conn, catalog, model, dims)
                    if len(rows) < stored:
                        rows = _fetch(conn.execute(sql.DENSE_SEARCH_EXACT, params))
            out.append((rows, (time.perf_counter() - start) * 1000.0))
    return out


def hnsw_search(conn: psycopg.Connection, catalog: str, model: str, query_vector: Any,
                k: int) -> list[tuple[str, float]]:
    """Search through the HNSW index only, without the exact fallback of `dense_search`: what
    the index alone returns, for measuring its recall."""
    q = _query_vector(query_vector)
    if q.size != HNSW_DIMENSIONS:
        raise InputError(f"the HNSW index covers {HNSW_DIMENSIONS}-dimension vectors, got "
                         f"{q.size}", field="query_vector")
    params = {"catalog": _check_catalog(catalog), "model": model, "q": q, "k": k}
    with conn.transaction():
        conn.execute(sql.SET_EF_SEARCH, {"ef_search": _ef_search(k)})
        conn.execute(sql.FORCE_INDEX_SCAN)
        return _fetch(conn.execute(sql.DENSE_SEARCH_HNSW_384, params))


def dense_search_plan(conn: psycopg.Connection, catalog: str, model: str, query_vector: Any,
                      k: int, *, exact: bool = False) -> str:
    """EXPLAIN of the statement `dense_search` runs first (under the same settings), for
    checking which index it uses."""
    q = _query_vector(query_vector)
    params = {"catalog": _check_catalog(catalog), "model": model, "q": q, "k": k,
              "dims": int(q.size)}
    with conn.transaction():
        if exact or q.size != HNSW_DIMENSIONS:
            rows = conn.execute(sql.EXPLAIN_DENSE_SEARCH_EXACT, params).fetchall()
        else:
            conn.execute(sql.SET_EF_SEARCH, {"ef_search": _ef_search(k)})
            conn.execute(sql.FORCE_INDEX_SCAN)
            rows = conn.execute(sql.EXPLAIN_DENSE_SEARCH_HNSW_384, params).fetchall()
    return "\n".join(row[0] for row in rows)


def _fetch(cur: psycopg.Cursor) -> list[tuple[str, float]]:
    return [(doc_id, float(similarity)) for doc_id, similarity in cur.fetchall()]

"""What searcheval keeps in Postgres: the catalog snapshot, document vectors for dense search, the
embedding cache rows and the evaluation history; and (the traces section at the end) recorded
production traces and the replay history.

Plain functions over a psycopg connection (as `searcheval.database.connect` opens it); every SQL
statement comes from `searcheval.sql`. Each write runs in one transaction, so a failure leaves
nothing half-written. Text is always passed as a parameter, so any catalog name or resource text
is stored and searched verbatim.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from searcheval import sql
from searcheval.catalog import Resource
from searcheval.errors import InputError
from searcheval.traces import (DEFAULT_GRADE_SCALE, DEFAULT_MAX_BAD_SHARE, BadLines, Trace,
                               TraceTable, describe_selection, iter_trace_file,
                               iter_trace_records)

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


def save_doc_vectors(conn: psycopg.Connection, catalog: str, model: str, ids: Sequence[str],
                     vectors: np.ndarray) -> int:
    """Make the document vectors of (`catalog`, `model`) exactly `ids` -> `vectors`, in one
    transaction: rows of other ids are deleted, changed vectors replaced, equal ones left alone
    (so the HNSW index is not churned by an unchanged catalog). Every id must be a resource of
    the stored catalog. Returns the number of rows."""
    _check_catalog(catalog)
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(ids):
        raise InputError(f"expected {len(ids)} vectors (one per id) as a 2-d array, got shape "
                         f"{vectors.shape}", field="vectors")
    if len(set(ids)) != len(ids):
        raise InputError("expected distinct document ids", field="ids")
    if len(ids) and not np.isfinite(vectors).all():
        raise InputError("expected finite vector components", field="vectors")
    rows = [{"catalog": catalog, "model": model, "doc_id": doc_id, "embedding": vector}
            for doc_id, vector in zip(ids, vectors)]
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(sql.DELETE_DOC_VECTORS_NOT_IN,
                        {"catalog": catalog, "model": model, "ids": list(ids)})
            if rows:
                cur.executemany(sql.UPSERT_DOC_VECTOR, rows)
    except psycopg.errors.ForeignKeyViolation:
        stored = load_catalog_hashes(conn, catalog)
        missing = [d for d in ids if d not in stored]
        raise InputError(f"{len(missing)} document id(s) are not resources of the stored catalog "
                         f"{catalog!r} (first: {missing[:1]}); save_catalog first",
                         field="ids") from None
    return len(rows)


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
    _check_catalog(catalog)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"expected k >= 1, got {k!r}", field="k")
    q = _query_vector(query_vector)
    params = {"catalog": catalog, "model": model, "q": q, "k": k, "dims": int(q.size)}
    if exact or q.size != HNSW_DIMENSIONS:
        return _fetch(conn.execute(sql.DENSE_SEARCH_EXACT, params))
    with conn.transaction():
        conn.execute(sql.SET_EF_SEARCH, {"ef_search": _ef_search(k)})
        conn.execute(sql.FORCE_INDEX_SCAN)
        rows = _fetch(conn.execute(sql.DENSE_SEARCH_HNSW_384, params))
        if len(rows) < k and len(rows) < count_doc_vectors(conn, catalog, model, int(q.size)):
            rows = _fetch(conn.execute(sql.DENSE_SEARCH_EXACT, params))
    return rows


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


# --------------------------------------------------------------------------- evaluation history

RUN_COLUMNS = ("run_id", "flow_run_id", "started_at", "finished_at", "source", "input_hashes",
               "model", "gate_passed", "summary")
METRIC_COLUMNS = ("run_id", "configuration", "category", "metric", "value", "ci_low", "ci_high",
                  "n")
QUERY_COLUMNS = ("run_id", "configuration", "query_id", "category", "metric", "value")
_RUN_REQUIRED = ("run_id", "started_at")
_METRIC_REQUIRED = ("configuration", "category", "metric", "value")
_QUERY_REQUIRED = ("configuration", "query_id", "category", "metric", "value")


def _row(row: Any, columns: tuple[str, ...], required: tuple[str, ...], where: str,
         run_id: str | None) -> dict:
    if not isinstance(row, dict):
        raise InputError(f"expected a dict, got {type(row).__name__}", field=where)
    unknown = sorted(set(row) - set(columns))
    if unknown:
        raise InputError(f"unknown column(s) {unknown}; expected {', '.join(columns)}",
                         field=where)
    out = {c: row.get(c) for c in columns}
    if run_id is not None:
        if out["run_id"] not in (None, run_id):
            raise InputError(f"expected run_id {run_id!r}, got {out['run_id']!r}",
                             field=f"{where}.run_id")
        out["run_id"] = run_id
    for c in required:
        if out[c] is None:
            raise InputError(f"expected a value for {c}", field=f"{where}.{c}")
    value = out.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise InputError(f"expected a number, got {value!r}", field=f"{where}.value")
    if isinstance(value, float) and math.isinf(value):
        raise InputError(f"expected a finite number or NaN, got {value!r}", field=f"{where}.value")
    return out


def save_evaluation(conn: psycopg.Connection, run_row: dict, metric_rows: Sequence[dict],
                    query_rows: Sequence[dict]) -> None:
    """Write one evaluation (the run, its metrics, its per-query values) in one transaction.

    `run_row` has the `eval_runs` columns (`run_id` and `started_at` required; `input_hashes` and
    `summary` are JSON-able). Metric and query rows may leave `run_id` out (it is filled in);
    per-query rows go in with COPY.
    """
    run = _run_row(run_row, RUN_COLUMNS, _RUN_REQUIRED)
    queries = [_row(r, QUERY_COLUMNS, _QUERY_REQUIRED, f"query_rows[{i}]", run["run_id"])
               for i, r in enumerate(query_rows)]

    def copy_queries(cur: psycopg.Cursor) -> None:
        if queries:
            with cur.copy(sql.COPY_EVAL_QUERY_RESULTS) as copy:
                for row in queries:
                    copy.write_row([row[c] for c in QUERY_COLUMNS])

    _save_run(conn, "run", sql.INSERT_EVAL_RUN, run, sql.INSERT_EVAL_METRIC,
              [_row(r, METRIC_COLUMNS, _METRIC_REQUIRED, f"metric_rows[{i}]", run["run_id"])
               for i, r in enumerate(metric_rows)], copy_queries)


def _run_row(run_row: dict, columns: tuple[str, ...], required: tuple[str, ...]) -> dict:
    run = _row(run_row, columns, required, "run_row", None)
    run["input_hashes"] = Jsonb(run["input_hashes"] or {})
    run["summary"] = Jsonb(run["summary"] or {})
    return run


def _save_run(conn: psycopg.Connection, what: str, insert_run: str, run: dict,
              insert_metric: str, metrics: list[dict], more=None) -> None:
    """The run row, its metric rows and (`more`) anything else, in one transaction."""
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(insert_run, run)
            if metrics:
                cur.executemany(insert_metric, metrics)
            if more is not None:
                more(cur)
    except psycopg.errors.UniqueViolation as exc:
        detail = exc.diag.message_detail or str(exc)
        raise InputError(f"duplicate row for {what} {run['run_id']!r}: {detail}",
                         field="run_id") from None


def last_runs(conn: psycopg.Connection, n: int = 10) -> list[dict]:
    """The `n` most recent runs (by started_at), newest first, as dicts of eval_runs columns."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"expected n >= 1, got {n!r}", field="n")
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_LAST_RUNS, {"n": n}).fetchall()


def run_metrics(conn: psycopg.Connection, run_id: str) -> list[dict]:
    """The metric rows of one run, by configuration, category, metric."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_RUN_METRICS, {"run_id": run_id}).fetchall()


def run_query_results(conn: psycopg.Connection, run_id: str) -> list[dict]:
    """The per-query rows of one run, by configuration, query, metric."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_RUN_QUERY_RESULTS, {"run_id": run_id}).fetchall()


# =========================================================================== traces (replay)
# Recorded production traces (`search_traces`, migrations/002_traces.sql) and the replay history
# (`replay_runs`, `replay_metrics`). Owned by the replay issue.

TRACE_READ_BATCH = 5_000  # rows per round trip of the server-side cursor
#: the source name of traces read from the database (TraceTable.source, messages).
TRACES_SOURCE = "search_traces"


def _trace_row(trace: Trace, number: int) -> list:
    if not isinstance(trace, Trace):
        raise InputError(f"expected a Trace, got {type(trace).__name__}", field=f"traces[{number}]")
    return [trace.trace_id, trace.ts, trace.query, trace.query_id, trace.segment,
            trace.configuration, list(trace.retrieved_ids),
            None if trace.relevant_ids is None else list(trace.relevant_ids),
            None if trace.relevance_scores is None else dict(trace.relevance_scores)]


def save_traces(conn: psycopg.Connection, traces: Iterable[Trace]) -> dict:
    """Upsert traces by trace_id, in one transaction: COPY into a staging table, then one
    INSERT ... ON CONFLICT. A stored trace equal to the new one is left alone.

    `traces` is consumed inside the transaction, so an exception it raises (a file refused by the
    bad-line rule once it is read to the end) leaves nothing written. Returns
    `{"traces": given, "inserted", "updated", "unchanged", "stored": rows in the table after}`.
    """
    given = 0
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(sql.TRACES_LOCK, {"lock_class": sql.TRACES_LOCK_CLASS})
            cur.execute(sql.CREATE_TRACES_STAGING)
            with cur.copy(sql.COPY_TRACES_STAGING) as copy:
                copy.set_types(list(sql.TRACE_COPY_TYPES))
                for given, trace in enumerate(traces, start=1):
                    copy.write_row(_trace_row(trace, given - 1))
            cur.execute(sql.ANALYZE_TRACES_STAGING)
            existing = cur.execute(sql.COUNT_STAGED_TRACES_STORED).fetchone()[0]
            cur.execute(sql.UPSERT_TRACES_FROM_STAGING)
            affected = cur.rowcount
            stored = cur.execute(sql.COUNT_TRACES).fetchone()[0]
    except psycopg.errors.CardinalityViolation:
        raise InputError("a trace_id occurs more than once in the traces to save; expected "
                         "distinct trace ids", field="trace_id") from None
    inserted = given - existing
    updated = affected - inserted
    return {"traces": given, "inserted": inserted, "updated": updated,
            "unchanged": existing - updated, "stored": stored}


def ingest_traces(conn: psycopg.Connection, path: str | Path, *,
                  grade_scale: tuple[int, int] = DEFAULT_GRADE_SCALE,
                  max_bad_share: float = DEFAULT_MAX_BAD_SHARE) -> dict:
    """`searcheval traces load`: a JSONL file of traces, validated line by line as replay reads
    it (bad lines skipped up to `max_bad_share`, else refused), streamed into `save_traces`: all
    of the file or nothing. Returns save_traces' counts plus `file` and `bad_lines`."""
    bad = BadLines()
    lines = iter_trace_file(path, grade_scale=grade_scale, max_bad_share=max_bad_share, bad=bad)
    counts = save_traces(conn, (trace for _, trace in lines))
    return {"file": str(path), **counts, "bad_lines": bad.to_dict()}


def count_traces(conn: psycopg.Connection) -> int:
    return conn.execute(sql.COUNT_TRACES).fetchone()[0]


def iter_trace_rows(conn: psycopg.Connection, *, since: datetime | None = None,
                    until: datetime | None = None, segment: str | None = None,
                    batch_size: int = TRACE_READ_BATCH) -> Iterator[dict]:
    """Rows of `search_traces` with since <= ts < until in `segment` (each optional), by
    (ts, trace_id), as dicts, streamed through a server-side cursor `batch_size` rows at a time
    (memory stays flat whatever the table holds). The cursor lives in a transaction that ends
    when the iteration does."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"expected a batch size >= 1, got {batch_size!r}", field="batch_size")
    params = {"since": since, "until": until, "segment": segment}
    with conn.transaction(), conn.cursor(name=sql.TRACES_CURSOR, row_factory=dict_row,
                                         binary=True) as cur:
        cur.itersize = batch_size
        cur.execute(sql.SELECT_TRACES, params)
        yield from cur


def load_trace_table(conn: psycopg.Connection, *, since: datetime | None = None,
                     until: datetime | None = None, segment: str | None = None,
                     grade_scale: tuple[int, int] = DEFAULT_GRADE_SCALE,
                     max_bad_share: float = DEFAULT_MAX_BAD_SHARE,
                     batch_size: int = TRACE_READ_BATCH) -> TraceTable:
    """`searcheval replay --from-db`: the selected rows as the same TraceTable a file gives.

    Every row goes through `parse_trace` (rows may come from other writers than `traces load`):
    a row that is not a valid trace is a bad record, skipped up to `max_bad_share` of the rows
    read, else the read is refused; the table is packed by `TraceTable.from_traces`.
    """
    rows = iter_trace_rows(conn, since=since, until=until, segment=segment,
                           batch_size=batch_size)
    bad = BadLines()
    traces = iter_trace_records(
        rows, source=TRACES_SOURCE, grade_scale=grade_scale, max_bad_share=max_bad_share,
        bad=bad, empty=f"no trace matches {describe_selection(since, until, segment)}")
    return TraceTable.from_traces(traces, TRACES_SOURCE, bad=bad)


# --------------------------------------------------------------------------- replay history

REPLAY_RUN_COLUMNS = ("run_id", "flow_run_id", "started_at", "finished_at", "source",
                      "configuration", "traces", "labelled", "coverage", "min_coverage", "passed",
                      "input_hashes", "summary")
REPLAY_METRIC_COLUMNS = ("run_id", "configuration", "segment", "metric", "value", "n",
                         "threshold")
_REPLAY_RUN_REQUIRED = ("run_id", "started_at", "source", "configuration", "traces", "labelled",
                        "passed")
_REPLAY_METRIC_REQUIRED = ("configuration", "segment", "metric", "n")


def save_replay(conn: psycopg.Connection, run_row: dict, metric_rows: Sequence[dict]) -> None:
    """Write one replay (its run row and metric rows) in one transaction. Metric rows may leave
    `run_id` out (it is filled in); `input_hashes` and `summary` are JSON-able."""
    run = _run_row(run_row, REPLAY_RUN_COLUMNS, _REPLAY_RUN_REQUIRED)
    _save_run(conn, "replay run", sql.INSERT_REPLAY_RUN, run, sql.INSERT_REPLAY_METRIC,
              [_row(r, REPLAY_METRIC_COLUMNS, _REPLAY_METRIC_REQUIRED, f"metric_rows[{i}]",
                    run["run_id"]) for i, r in enumerate(metric_rows)])


def last_replay_runs(conn: psycopg.Connection, n: int = 10) -> list[dict]:
    """The `n` most recent replays (by started_at), newest first, as dicts of replay_runs."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"expected n >= 1, got {n!r}", field="n")
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_LAST_REPLAY_RUNS, {"n": n}).fetchall()


def replay_run_metrics(conn: psycopg.Connection, run_id: str) -> list[dict]:
    """The metric rows of one replay, by configuration, segment, metric."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_REPLAY_METRICS, {"run_id": run_id}).fetchall()

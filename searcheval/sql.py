"""Every SQL statement searcheval runs, by name, with `%(name)s` placeholders.

Identifiers that vary (database names) go through `psycopg.sql.Identifier`; nothing here is ever
built from data with string formatting. The schema itself is in `searcheval/migrations/`.
"""

from __future__ import annotations

from psycopg import sql

# --------------------------------------------------------------------------- migrations

#: pg_advisory_xact_lock key serialising `migrate` (any constant bigint; "searchev" in ASCII).
MIGRATION_LOCK_KEY = 0x7365617263686576

MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(%(key)s)"

CREATE_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""

SELECT_SCHEMA_MIGRATIONS = "SELECT version, checksum FROM schema_migrations ORDER BY version"

INSERT_SCHEMA_MIGRATION = """
INSERT INTO schema_migrations (version, name, checksum)
VALUES (%(version)s, %(name)s, %(checksum)s)
"""

# --------------------------------------------------------------------------- databases (tests)

CREATE_DATABASE = sql.SQL("CREATE DATABASE {name}")  # name=sql.Identifier(...)
DROP_DATABASE = sql.SQL("DROP DATABASE IF EXISTS {name} WITH (FORCE)")

# --------------------------------------------------------------------------- catalog

#: (catalog lock class, hashtext(catalog)): two writers of the same catalog wait for each other.
CATALOG_LOCK_CLASS = 0x5345

CATALOG_LOCK = "SELECT pg_advisory_xact_lock(%(lock_class)s, hashtext(%(catalog)s))"

SELECT_CATALOG_HASHES = "SELECT id, content_hash FROM resources WHERE catalog = %(catalog)s"

SELECT_CATALOG = """
SELECT id, name, description, tags, network, asset, price_usd, settled_30d, success_rate,
       updated_at
FROM resources
WHERE catalog = %(catalog)s
ORDER BY id
"""

UPSERT_RESOURCE = """
INSERT INTO resources (catalog, id, name, description, tags, network, asset, price_usd,
                       settled_30d, success_rate, updated_at, content_hash)
VALUES (%(catalog)s, %(id)s, %(name)s, %(description)s, %(tags)s, %(network)s, %(asset)s,
        %(price_usd)s, %(settled_30d)s, %(success_rate)s, %(updated_at)s, %(content_hash)s)
ON CONFLICT (catalog, id) DO UPDATE SET
    name = EXCLUDED.name,
    description = EXCLUDED.description,
    tags = EXCLUDED.tags,
    network = EXCLUDED.network,
    asset = EXCLUDED.asset,
    price_usd = EXCLUDED.price_usd,
    settled_30d = EXCLUDED.settled_30d,
    success_rate = EXCLUDED.success_rate,
    updated_at = EXCLUDED.updated_at,
    content_hash = EXCLUDED.content_hash
WHERE (resources.name, resources.description, resources.tags, resources.network,
       resources.asset, resources.price_usd, resources.settled_30d, resources.success_rate,
       resources.updated_at, resources.content_hash)
      IS DISTINCT FROM
      (EXCLUDED.name, EXCLUDED.description, EXCLUDED.tags, EXCLUDED.network, EXCLUDED.asset,
       EXCLUDED.price_usd, EXCLUDED.settled_30d, EXCLUDED.success_rate, EXCLUDED.updated_at,
       EXCLUDED.content_hash)
"""

DELETE_RESOURCES_NOT_IN = """
DELETE FROM resources WHERE catalog = %(catalog)s AND NOT (id = ANY(%(ids)s))
"""

# --------------------------------------------------------------------------- embedding cache

SELECT_EMBEDDINGS = """
SELECT text_sha256, embedding
FROM embeddings
WHERE model = %(model)s AND fingerprint = %(fingerprint)s AND text_sha256 = ANY(%(keys)s)
"""

INSERT_EMBEDDING = """
INSERT INTO embeddings (model, fingerprint, text_sha256, embedding)
VALUES (%(model)s, %(fingerprint)s, %(text_sha256)s, %(embedding)s)
ON CONFLICT (model, fingerprint, text_sha256) DO NOTHING
"""

COUNT_EMBEDDINGS = """
SELECT count(*) FROM embeddings WHERE model = %(model)s AND fingerprint = %(fingerprint)s
"""

# --------------------------------------------------------------------------- document vectors

DELETE_DOC_VECTORS_NOT_IN = """
DELETE FROM doc_vectors
WHERE catalog = %(catalog)s AND model = %(model)s AND NOT (doc_id = ANY(%(ids)s))
"""

UPSERT_DOC_VECTOR = """
INSERT INTO doc_vectors (catalog, model, doc_id, embedding)
VALUES (%(catalog)s, %(model)s, %(doc_id)s, %(embedding)s)
ON CONFLICT (catalog, model, doc_id) DO UPDATE SET embedding = EXCLUDED.embedding
WHERE doc_vectors.embedding IS DISTINCT FROM EXCLUDED.embedding
"""

COUNT_DOC_VECTORS = """
SELECT count(*) FROM doc_vectors
WHERE catalog = %(catalog)s AND model = %(model)s AND vector_dims(embedding) = %(dims)s
"""

#: hnsw.ef_search for this transaction (SET cannot take parameters; set_config can).
SET_EF_SEARCH = "SELECT set_config('hnsw.ef_search', %(ef_search)s, true)"

#: Plan settings (this transaction only) that make the planner take the HNSW index whenever the
#: query allows it: at evaluation scale (thousands of rows) it would otherwise often sort
#: exactly, and the evaluation must measure what the index returns.
FORCE_INDEX_SCAN = """
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_sort', 'off', true),
       set_config('enable_bitmapscan', 'off', true)
"""

#: Approximate search through the partial expression HNSW index on 384-dimension vectors
#: (`doc_vectors_hnsw_384`): the ORDER BY expression and the vector_dims predicate must match
#: the index's exactly, so this statement is only for 384-dimension query vectors.
DENSE_SEARCH_HNSW_384 = """
SELECT doc_id, 1 - (embedding::vector(384) <=> %(q)s) AS similarity
FROM doc_vectors
WHERE catalog = %(catalog)s AND model = %(model)s AND vector_dims(embedding) = 384
ORDER BY embedding::vector(384) <=> %(q)s
LIMIT %(k)s
"""

#: Exact search: ordering by the untyped column matches no index, so every candidate row of the
#: catalog and model is compared. Works for vectors of any dimension.
DENSE_SEARCH_EXACT = """
SELECT doc_id, 1 - (embedding <=> %(q)s) AS similarity
FROM doc_vectors
WHERE catalog = %(catalog)s AND model = %(model)s AND vector_dims(embedding) = %(dims)s
ORDER BY embedding <=> %(q)s
LIMIT %(k)s
"""

EXPLAIN_DENSE_SEARCH_HNSW_384 = "EXPLAIN (COSTS OFF) " + DENSE_SEARCH_HNSW_384
EXPLAIN_DENSE_SEARCH_EXACT = "EXPLAIN (COSTS OFF) " + DENSE_SEARCH_EXACT

# --------------------------------------------------------------------------- evaluation history

INSERT_EVAL_RUN = """
INSERT INTO eval_runs (run_id, flow_run_id, started_at, finished_at, source, input_hashes, model,
                       gate_passed, summary)
VALUES (%(run_id)s, %(flow_run_id)s, %(started_at)s, %(finished_at)s, %(source)s,
        %(input_hashes)s, %(model)s, %(gate_passed)s, %(summary)s)
"""

INSERT_EVAL_METRIC = """
INSERT INTO eval_metrics (run_id, configuration, category, metric, value, ci_low, ci_high, n)
VALUES (%(run_id)s, %(configuration)s, %(category)s, %(metric)s, %(value)s, %(ci_low)s,
        %(ci_high)s, %(n)s)
"""

COPY_EVAL_QUERY_RESULTS = """
COPY eval_query_results (run_id, configuration, query_id, category, metric, value) FROM STDIN
"""

SELECT_LAST_RUNS = """
SELECT run_id, flow_run_id, started_at, finished_at, source, input_hashes, model, gate_passed,
       summary
FROM eval_runs
ORDER BY started_at DESC NULLS LAST, run_id DESC
LIMIT %(n)s
"""

SELECT_RUN_METRICS = """
SELECT run_id, configuration, category, metric, value, ci_low, ci_high, n
FROM eval_metrics
WHERE run_id = %(run_id)s
ORDER BY configuration, category, metric
"""

SELECT_RUN_QUERY_RESULTS = """
SELECT run_id, configuration, query_id, category, metric, value
FROM eval_query_results
WHERE run_id = %(run_id)s
ORDER BY configuration, query_id, metric
"""

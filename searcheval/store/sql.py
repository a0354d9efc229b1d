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

COUNT_CACHED_EMBEDDINGS = """
SELECT count(*) FROM embeddings
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

#: A catalog's document vectors go in through a staging table filled by binary COPY, then one
#: set-based upsert: a new catalog's 5,000 vectors took 14.6 s as single-row INSERTs (each a
#: round trip and an HNSW insertion), 8.5 s this way.
CREATE_DOC_VECTORS_STAGING = """
CREATE TEMP TABLE doc_vectors_staging (doc_id text, embedding vector) ON COMMIT DROP
"""

COPY_DOC_VECTORS_STAGING = """
COPY doc_vectors_staging (doc_id, embedding) FROM STDIN WITH (FORMAT BINARY)
"""

UPSERT_DOC_VECTORS = """
INSERT INTO doc_vectors (catalog, model, doc_id, embedding)
SELECT %(catalog)s, %(model)s, doc_id, embedding FROM doc_vectors_staging
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

INSERT_EVAL_SEGMENT_METRIC = """
INSERT INTO eval_segment_metrics (run_id, configuration, segment, metric, value, n)
VALUES (%(run_id)s, %(configuration)s, %(segment)s, %(metric)s, %(value)s, %(n)s)
"""

SELECT_RUN_SEGMENT_METRICS = """
SELECT run_id, configuration, segment, metric, value, n
FROM eval_segment_metrics
WHERE run_id = %(run_id)s
ORDER BY configuration, segment, metric
"""

# --------------------------------------------------------------------------- snapshots (004)
# Ranked lists of every run (eval_ranked_results), the run's identity columns, baseline updates.

#: Column order of COPY_RANKED_RESULTS and its binary types.
RANKED_COPY_TYPES = ("text", "text", "text", "int4", "text", "float8", "int2")

COPY_RANKED_RESULTS = """
COPY eval_ranked_results (run_id, configuration, query_id, rank, doc_id, score, grade)
FROM STDIN (FORMAT BINARY)
"""

SET_RUN_IDENTITY = """
UPDATE eval_runs SET dataset = %(dataset)s, label = %(label)s, kind = %(kind)s,
                     snapshot_depth = %(snapshot_depth)s
WHERE run_id = %(run_id)s
"""

SELECT_RANKED_RESULTS = """
SELECT configuration, query_id, rank, doc_id, score, grade
FROM eval_ranked_results
WHERE run_id = %(run_id)s AND configuration = %(configuration)s
ORDER BY query_id, rank
"""

COUNT_RANKED_RESULTS = "SELECT count(*) FROM eval_ranked_results WHERE run_id = %(run_id)s"

SELECT_EVAL_RUN = """
SELECT run_id, flow_run_id, started_at, finished_at, source, input_hashes, model, gate_passed,
       summary, dataset, label, kind, snapshot_depth, snapshot_pruned_at
FROM eval_runs
WHERE run_id = %(run_id)s
"""

#: Runs, newest first, filtered; a NULL filter selects all. `configuration` keeps the runs that
#: scored it.
SELECT_RUNS_FILTERED = """
SELECT r.run_id, r.flow_run_id, r.started_at, r.finished_at, r.source, r.input_hashes, r.model,
       r.gate_passed, r.summary, r.dataset, r.label, r.kind, r.snapshot_depth,
       r.snapshot_pruned_at
FROM eval_runs r
WHERE (%(dataset)s::text IS NULL OR r.dataset = %(dataset)s::text)
  AND (%(label)s::text IS NULL OR r.label = %(label)s::text)
  AND (%(kind)s::text IS NULL OR r.kind = %(kind)s::text)
  AND (%(before)s::timestamptz IS NULL OR r.started_at < %(before)s::timestamptz
       OR (r.started_at = %(before)s::timestamptz AND r.run_id < %(before_run)s::text))
  AND (%(configuration)s::text IS NULL OR EXISTS (
        SELECT 1 FROM eval_metrics m
        WHERE m.run_id = r.run_id AND m.configuration = %(configuration)s::text))
ORDER BY r.started_at DESC, r.run_id DESC
LIMIT %(n)s
"""

#: Snapshot rows of the runs started before `before`; their metric rows stay.
PRUNE_RANKED_RESULTS = """
DELETE FROM eval_ranked_results
WHERE run_id IN (SELECT run_id FROM eval_runs WHERE started_at < %(before)s)
"""

MARK_RUNS_PRUNED = """
UPDATE eval_runs SET snapshot_pruned_at = now()
WHERE started_at < %(before)s AND snapshot_pruned_at IS NULL
"""

INSERT_BASELINE_UPDATE = """
INSERT INTO baseline_updates (dataset, configuration, from_run, path, who, reason,
                              accepted_regression)
VALUES (%(dataset)s, %(configuration)s, %(from_run)s, %(path)s, %(who)s, %(reason)s,
        %(accepted_regression)s)
"""

SELECT_BASELINE_UPDATES = """
SELECT updated_at, dataset, configuration, from_run, path, who, reason, accepted_regression
FROM baseline_updates
ORDER BY updated_at
"""

# =========================================================================== traces (replay)
# Recorded production traces (migrations/002_traces.sql) and the replay history. Owned by the
# replay issue; statements above this line belong to the nightly evaluation.

#: (traces lock class, 0): two loads of traces wait for each other, so their counts add up.
TRACES_LOCK_CLASS = 0x5452

TRACES_LOCK = "SELECT pg_advisory_xact_lock(%(lock_class)s, 0)"

#: Staging table of one load, shaped like search_traces itself (so the two cannot drift apart);
#: dropped when its transaction ends. COPY and the upsert name their columns.
CREATE_TRACES_STAGING = """
CREATE TEMP TABLE search_traces_staging (LIKE search_traces INCLUDING DEFAULTS) ON COMMIT DROP
"""

#: Column order of COPY_TRACES_STAGING and its binary types.
TRACE_COPY_TYPES = ("text", "timestamptz", "text", "text", "text", "text", "text[]", "text[]",
                    "jsonb", "text[]", "jsonb", "jsonb", "text", "text", "text")

COPY_TRACES_STAGING = """
COPY search_traces_staging (trace_id, ts, query, query_id, segment, configuration, retrieved_ids,
                            relevant_ids, relevance_scores, shown_ids, clicks, feedback,
                            session_id, user_id, configuration_version) FROM STDIN (FORMAT BINARY)
"""

ANALYZE_TRACES_STAGING = "ANALYZE search_traces_staging"

COUNT_STAGED_TRACES_STORED = """
SELECT count(*) FROM search_traces_staging s JOIN search_traces t USING (trace_id)
"""

#: Rows affected = inserted + changed; a row equal to the stored one is left alone (its
#: ingested_at too). jsonb compares as a value, so key order does not make a change.
UPSERT_TRACES_FROM_STAGING = """
INSERT INTO search_traces AS t (trace_id, ts, query, query_id, segment, configuration,
                                retrieved_ids, relevant_ids, relevance_scores, shown_ids, clicks,
                                feedback, session_id, user_id, configuration_version)
SELECT trace_id, ts, query, query_id, segment, configuration, retrieved_ids, relevant_ids,
       relevance_scores, shown_ids, clicks, feedback, session_id, user_id, configuration_version
FROM search_traces_staging
ON CONFLICT (trace_id) DO UPDATE SET
    ts = EXCLUDED.ts,
    query = EXCLUDED.query,
    query_id = EXCLUDED.query_id,
    segment = EXCLUDED.segment,
    configuration = EXCLUDED.configuration,
    retrieved_ids = EXCLUDED.retrieved_ids,
    relevant_ids = EXCLUDED.relevant_ids,
    relevance_scores = EXCLUDED.relevance_scores,
    shown_ids = EXCLUDED.shown_ids,
    clicks = EXCLUDED.clicks,
    feedback = EXCLUDED.feedback,
    session_id = EXCLUDED.session_id,
    user_id = EXCLUDED.user_id,
    configuration_version = EXCLUDED.configuration_version,
    ingested_at = now()
WHERE (t.ts, t.query, t.query_id, t.segment, t.configuration, t.retrieved_ids, t.relevant_ids,
       t.relevance_scores, t.shown_ids, t.clicks, t.feedback, t.session_id, t.user_id,
       t.configuration_version)
      IS DISTINCT FROM
      (EXCLUDED.ts, EXCLUDED.query, EXCLUDED.query_id, EXCLUDED.segment, EXCLUDED.configuration,
       EXCLUDED.retrieved_ids, EXCLUDED.relevant_ids, EXCLUDED.relevance_scores,
       EXCLUDED.shown_ids, EXCLUDED.clicks, EXCLUDED.feedback, EXCLUDED.session_id,
       EXCLUDED.user_id, EXCLUDED.configuration_version)
"""

COUNT_TRACES = "SELECT count(*) FROM search_traces"

#: Traces with since <= ts < until in a segment; a NULL bound or segment selects all. Ordered by
#: (ts, trace_id) so that every read of the same rows gives the same table. Read through a
#: server-side cursor (the parameters are bound per execution, so the planner sees the NULLs).
SELECT_TRACES = """
SELECT trace_id, ts, query, query_id, segment, configuration, retrieved_ids, relevant_ids,
       relevance_scores, shown_ids, clicks, feedback, session_id, user_id, configuration_version
FROM search_traces
WHERE (%(since)s::timestamptz IS NULL OR ts >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR ts < %(until)s::timestamptz)
  AND (%(segment)s::text IS NULL OR segment = %(segment)s::text)
ORDER BY ts, trace_id
"""

#: Name of the server-side cursor of SELECT_TRACES.
TRACES_CURSOR = "searcheval_traces"

INSERT_REPLAY_RUN = """
INSERT INTO replay_runs (run_id, flow_run_id, started_at, finished_at, source, configuration,
                         traces, labelled, coverage, min_coverage, passed, input_hashes, summary)
VALUES (%(run_id)s, %(flow_run_id)s, %(started_at)s, %(finished_at)s, %(source)s,
        %(configuration)s, %(traces)s, %(labelled)s, %(coverage)s, %(min_coverage)s, %(passed)s,
        %(input_hashes)s, %(summary)s)
"""

INSERT_REPLAY_METRIC = """
INSERT INTO replay_metrics (run_id, configuration, segment, metric, value, n, threshold)
VALUES (%(run_id)s, %(configuration)s, %(segment)s, %(metric)s, %(value)s, %(n)s, %(threshold)s)
"""

SELECT_LAST_REPLAY_RUNS = """
SELECT run_id, flow_run_id, started_at, finished_at, source, configuration, traces, labelled,
       coverage, min_coverage, passed, input_hashes, summary
FROM replay_runs
ORDER BY started_at DESC, run_id DESC
LIMIT %(n)s
"""

SELECT_REPLAY_METRICS = """
SELECT run_id, configuration, segment, metric, value, n, threshold
FROM replay_metrics
WHERE run_id = %(run_id)s
ORDER BY configuration, segment, metric
"""

# ---------------------------------------------------------------------------- mapped tables
# A table mapping (searcheval.io.mapped) may read its rows with a SELECT of its own, over the
# project's Postgres. That statement is the mapping's, not built from data; it runs in a
# read-only transaction, so it can never change the database.

SET_TRANSACTION_READ_ONLY = "SET TRANSACTION READ ONLY"

# -- the record of what ran (migration 003)

UPDATE_EVAL_RUN_WHAT_RAN = """
UPDATE eval_runs
   SET git_commit = %(git_commit)s, git_dirty = %(git_dirty)s, incomplete = %(incomplete)s,
       what_ran = %(what_ran)s
 WHERE run_id = %(run_id)s
"""

INSERT_EVAL_RUN_CONFIGURATION = """
INSERT INTO eval_run_configurations (run_id, name, kind, sha256, served, resolved, failed_queries)
VALUES (%(run_id)s, %(name)s, %(kind)s, %(sha256)s, %(served)s, %(resolved)s, %(failed_queries)s)
"""

SELECT_RUN_CONFIGURATIONS = """
SELECT name, kind, sha256, served, resolved, failed_queries
  FROM eval_run_configurations
 WHERE run_id = %(run_id)s
 ORDER BY name
"""

SELECT_RUN_WHAT_RAN = """
SELECT git_commit, git_dirty, incomplete, what_ran FROM eval_runs WHERE run_id = %(run_id)s
"""

# =========================================================================== judgments (issue 13)
# Judgments with provenance, and pools of unjudged results (migrations/005_judgments.sql).

JUDGMENT_COLUMNS = ("catalog", "query_id", "doc_id", "grade", "judge", "judged_at", "source",
                    "guideline", "note", "content_hash", "origin")

#: One judgment; an identical one (same judge, grade, source and time) is not added twice.
INSERT_JUDGMENT = """
INSERT INTO judgments (catalog, query_id, doc_id, grade, judge, judged_at, source, guideline,
                       note, content_hash, origin)
VALUES (%(catalog)s, %(query_id)s, %(doc_id)s, %(grade)s, %(judge)s, %(judged_at)s, %(source)s,
        %(guideline)s, %(note)s, %(content_hash)s, %(origin)s)
ON CONFLICT DO NOTHING
RETURNING id
"""

#: One implicit judgment (migration 009_production): a click model's grade with its provenance
#: (model, parameters, window, impressions). Re-deriving the same grade of the same window adds
#: nothing (the identity index).
INSERT_IMPLICIT_JUDGMENT = """
INSERT INTO judgments (catalog, query_id, doc_id, grade, judge, judged_at, source, note, origin,
                       provenance)
VALUES (%(catalog)s, %(query_id)s, %(doc_id)s, %(grade)s, %(judge)s, %(judged_at)s, 'implicit',
        %(note)s, %(origin)s, %(provenance)s)
ON CONFLICT DO NOTHING
RETURNING id
"""

#: The implicit rows of a catalog, with their provenance.
SELECT_IMPLICIT_JUDGMENTS = """
SELECT query_id, doc_id, grade, judge, judged_at, origin, provenance
FROM judgments
WHERE catalog = %(catalog)s AND source = 'implicit' AND retracted_at IS NULL
ORDER BY query_id, doc_id, judge, judged_at, id
"""

#: (judgments lock class, hashtext(catalog)): two seedings of one catalog wait for each other.
JUDGMENTS_LOCK_CLASS = 0x4A44

JUDGMENTS_LOCK = "SELECT pg_advisory_xact_lock(%(lock_class)s, hashtext(%(catalog)s))"

CREATE_JUDGMENTS_STAGING = """
CREATE TEMP TABLE judgments_staging (
    query_id text, doc_id text, grade integer, judge text, judged_at timestamptz, origin text
) ON COMMIT DROP
"""

COPY_JUDGMENTS_STAGING = """
COPY judgments_staging (query_id, doc_id, grade, judge, judged_at, origin) FROM STDIN
"""

#: The file's rows as seed rows: new ones added, retracted ones that are back un-retracted.
UPSERT_SEED_JUDGMENTS = """
INSERT INTO judgments (catalog, query_id, doc_id, grade, judge, judged_at, source, origin, seed)
SELECT DISTINCT ON (query_id, doc_id, judge, grade, coalesce(judged_at, '-infinity'::timestamptz))
       %(catalog)s, query_id, doc_id, grade, judge, judged_at, 'import', origin, true
FROM judgments_staging
ON CONFLICT (catalog, query_id, doc_id, judge, grade, source, seed,
             coalesce(judged_at, '-infinity'::timestamptz))
DO UPDATE SET retracted_at = NULL
WHERE judgments.retracted_at IS NOT NULL
"""

#: Seed rows of the catalog that the file no longer holds are retracted (kept, never counted).
RETRACT_STALE_SEED_JUDGMENTS = """
UPDATE judgments j SET retracted_at = now()
WHERE j.catalog = %(catalog)s AND j.seed AND j.retracted_at IS NULL
  AND NOT EXISTS (
      SELECT 1 FROM judgments_staging s
      WHERE s.query_id = j.query_id AND s.doc_id = j.doc_id AND s.judge = j.judge
        AND s.grade = j.grade
        AND coalesce(s.judged_at, '-infinity'::timestamptz)
            = coalesce(j.judged_at, '-infinity'::timestamptz))
"""

#: Every row of a catalog, oldest first (the order the effective-grade rule reads them in).
SELECT_JUDGMENTS = """
SELECT id, catalog, query_id, doc_id, grade, judge, judged_at, source, guideline, note,
       content_hash, origin, seed, retracted_at, recorded_at, judge_hash, prompt_version,
       rationale
FROM judgments
WHERE catalog = %(catalog)s AND (retracted_at IS NULL OR %(all)s) AND (NOT seed OR %(seed)s)
ORDER BY query_id, doc_id, judge, judged_at NULLS FIRST, id
"""

#: One judge's live rows of a catalog (the rating page's progress and current grades).
SELECT_JUDGE_JUDGMENTS = """
SELECT id, catalog, query_id, doc_id, grade, judge, judged_at, source, guideline, note,
       content_hash, origin, seed, retracted_at, recorded_at, judge_hash, prompt_version,
       rationale
FROM judgments
WHERE catalog = %(catalog)s AND judge = %(judge)s AND retracted_at IS NULL
ORDER BY query_id, doc_id, judged_at NULLS FIRST, id
"""

COUNT_JUDGMENTS = """
SELECT count(*) FROM judgments WHERE catalog = %(catalog)s AND retracted_at IS NULL
"""

#: Serialises the writes of one (catalog, query, document, judge): two tabs of the rating page
#: grading the same pair wait for each other, then the second sees the first's row.
JUDGMENT_PAIR_LOCK = """
SELECT pg_advisory_xact_lock(hashtext(%(catalog)s || chr(31) || %(query_id)s || chr(31)
                                      || %(doc_id)s || chr(31) || %(judge)s))
"""

#: The latest row of one judge on one pair (None when the judge never graded it).
SELECT_LATEST_JUDGMENT = """
SELECT id, grade, judged_at, source
FROM judgments
WHERE catalog = %(catalog)s AND query_id = %(query_id)s AND doc_id = %(doc_id)s
  AND judge = %(judge)s AND retracted_at IS NULL
ORDER BY judged_at DESC NULLS LAST, id DESC
LIMIT 1
"""

#: The latest row a judge made on the rating page (the one undo takes back).
SELECT_LAST_HUMAN_JUDGMENT = """
SELECT id, query_id, doc_id, grade, judged_at
FROM judgments
WHERE catalog = %(catalog)s AND judge = %(judge)s AND source = 'human'
  AND retracted_at IS NULL AND recorded_at >= %(since)s
ORDER BY recorded_at DESC, id DESC
LIMIT 1
"""

#: Undo: the row is kept, marked taken back, and no longer counts.
RETRACT_JUDGMENT = """
UPDATE judgments SET retracted_at = now()
WHERE id = %(id)s AND judge = %(judge)s AND retracted_at IS NULL
"""

INSERT_POOL = """
INSERT INTO judgment_pools (pool_id, catalog, run_id, depth, configurations, overlap, judges)
VALUES (%(pool_id)s, %(catalog)s, %(run_id)s, %(depth)s, %(configurations)s, %(overlap)s,
        %(judges)s)
"""

DELETE_POOL = "DELETE FROM judgment_pools WHERE pool_id = %(pool_id)s"  # its items cascade

INSERT_POOL_ITEM = """
INSERT INTO judgment_pool_items (pool_id, position, query_id, doc_id, best_rank, configurations,
                                 judges_needed, assigned)
VALUES (%(pool_id)s, %(position)s, %(query_id)s, %(doc_id)s, %(best_rank)s, %(configurations)s,
        %(judges_needed)s, %(assigned)s)
"""

SELECT_LATEST_POOL = """
SELECT pool_id, catalog, run_id, depth, configurations, overlap, judges, created_at
FROM judgment_pools
ORDER BY created_at DESC, pool_id DESC
LIMIT 1
"""

SELECT_LATEST_POOL_OF = """
SELECT pool_id, catalog, run_id, depth, configurations, overlap, judges, created_at
FROM judgment_pools
WHERE catalog = %(catalog)s
ORDER BY created_at DESC, pool_id DESC
LIMIT 1
"""

SELECT_POOL = """
SELECT pool_id, catalog, run_id, depth, configurations, overlap, judges, created_at
FROM judgment_pools
WHERE pool_id = %(pool_id)s
"""

SELECT_POOL_ITEMS = """
SELECT position, query_id, doc_id, best_rank, configurations, judges_needed, assigned
FROM judgment_pool_items
WHERE pool_id = %(pool_id)s
ORDER BY position
"""

SELECT_RUN = """
SELECT run_id, started_at, source, summary
FROM eval_runs
WHERE run_id = %(run_id)s
"""

# =========================================================================== looked-up documents
# What a document lookup returned (issue 11; migrations/008_looked_up_documents.sql).

COPY_RUN_DOCUMENTS = """
COPY eval_run_documents (run_id, configuration, doc_id, gone, title, text, content_hash)
FROM STDIN
"""

#: Every document a run's lookups returned, of every configuration (the diff picks its side's).
SELECT_RUN_DOCUMENTS = """
SELECT configuration, doc_id, gone, title, text, content_hash
FROM eval_run_documents
WHERE run_id = %(run_id)s
ORDER BY configuration, doc_id
"""

PRUNE_RUN_DOCUMENTS = """
DELETE FROM eval_run_documents
WHERE run_id IN (SELECT run_id FROM eval_runs WHERE started_at < %(before)s)
"""

#: (documents lock class, hashtext(catalog)): two runs recording one judgment set's versions
#: wait for each other, so a version number is never taken twice.
DOCUMENTS_LOCK_CLASS = 0x4443

DOCUMENTS_LOCK = "SELECT pg_advisory_xact_lock(%(lock_class)s, hashtext(%(catalog)s))"

#: Every version of some documents of a judgment set, oldest first.
SELECT_DOCUMENT_VERSIONS = """
SELECT doc_id, version, content_hash, title, text, first_seen, last_seen
FROM document_versions
WHERE catalog = %(catalog)s AND doc_id = ANY(%(doc_ids)s)
ORDER BY doc_id, version
"""

#: The latest version of some documents of a judgment set.
SELECT_LATEST_DOCUMENT_VERSIONS = """
SELECT DISTINCT ON (doc_id) doc_id, version, content_hash, title, text, first_seen, last_seen
FROM document_versions
WHERE catalog = %(catalog)s AND doc_id = ANY(%(doc_ids)s)
ORDER BY doc_id, version DESC
"""

SELECT_DOCUMENT_VERSION = """
SELECT doc_id, version, content_hash, title, text, first_seen, last_seen
FROM document_versions
WHERE catalog = %(catalog)s AND doc_id = %(doc_id)s AND version = %(version)s
"""

INSERT_DOCUMENT_VERSION = """
INSERT INTO document_versions (catalog, doc_id, version, content_hash, title, text, first_seen,
                               last_seen, first_run, last_run)
VALUES (%(catalog)s, %(doc_id)s, %(version)s, %(content_hash)s, %(title)s, %(text)s, %(seen)s,
        %(seen)s, %(run_id)s, %(run_id)s)
"""

#: The same answer again: the version was seen once more.
TOUCH_DOCUMENT_VERSION = """
UPDATE document_versions
   SET last_seen = greatest(last_seen, %(seen)s), last_run = %(run_id)s, title = %(title)s,
       text = %(text)s
 WHERE catalog = %(catalog)s AND doc_id = %(doc_id)s AND version = %(version)s
"""

# =========================================================================== live monitor (issue 25)
# The live monitor's windows (migrations/009_production.sql). One monitor run at a time per
# monitor name: a session advisory lock (live lock class, hashtext(monitor)).

LIVE_LOCK_CLASS = 0x4C56

LIVE_LOCK = "SELECT pg_advisory_lock(%(lock_class)s, hashtext(%(monitor)s))"

LIVE_UNLOCK = "SELECT pg_advisory_unlock(%(lock_class)s, hashtext(%(monitor)s))"

SELECT_LAST_LIVE_WINDOW = """
SELECT monitor, window_start, window_end, traces, labelled, metrics, detector, alerted
FROM live_windows
WHERE monitor = %(monitor)s
ORDER BY window_start DESC
LIMIT 1
"""

#: A window is scored once: a second insert of the same (monitor, window_start) adds nothing.
INSERT_LIVE_WINDOW = """
INSERT INTO live_windows (monitor, window_start, window_end, traces, labelled, metrics, detector,
                          alerted)
VALUES (%(monitor)s, %(window_start)s, %(window_end)s, %(traces)s, %(labelled)s, %(metrics)s,
        %(detector)s, %(alerted)s)
ON CONFLICT (monitor, window_start) DO NOTHING
"""

#: The last n windows of a monitor, oldest first.
SELECT_LIVE_SERIES = """
SELECT monitor, window_start, window_end, traces, labelled, metrics, detector, alerted
FROM (SELECT * FROM live_windows WHERE monitor = %(monitor)s
      ORDER BY window_start DESC LIMIT %(n)s) recent
ORDER BY window_start
"""

# =========================================================================== model judges (issue 24)
# A model judge's grades, its answer cache and its labelling runs (migrations/010_judges.sql).

#: One model grade; the same grade of the same answer (its time is the answer's) is not added twice.
INSERT_MODEL_JUDGMENT = """
INSERT INTO judgments (catalog, query_id, doc_id, grade, judge, judged_at, source, guideline,
                       content_hash, origin, judge_hash, prompt_version, rationale)
VALUES (%(catalog)s, %(query_id)s, %(doc_id)s, %(grade)s, %(judge)s, %(judged_at)s, 'model',
        %(guideline)s, %(content_hash)s, %(origin)s, %(judge_hash)s, %(prompt_version)s,
        %(rationale)s)
ON CONFLICT DO NOTHING
"""

#: The (query, document, content hash) of a judge's live grades in a judgment set: what is done.
SELECT_JUDGE_DONE = """
SELECT query_id, doc_id, content_hash
FROM judgments
WHERE catalog = %(catalog)s AND judge = %(judge)s AND judge_hash = %(judge_hash)s
  AND source = 'model' AND retracted_at IS NULL
"""

#: A judge's cached answers of some (query key, content hash) pairs.
SELECT_JUDGE_ANSWERS = """
SELECT a.query_key, a.content_hash, a.grade, a.rationale, a.answered_at
FROM judge_answers a
JOIN unnest(%(query_keys)s::text[], %(content_hashes)s::text[]) AS k(query_key, content_hash)
  ON a.query_key = k.query_key AND a.content_hash = k.content_hash
WHERE a.judge_hash = %(judge_hash)s
"""

#: One answer into the cache; an answer already there wins (two runs at once keep one).
UPSERT_JUDGE_ANSWER = """
INSERT INTO judge_answers (judge_hash, query_key, content_hash, judge, model, grade, rationale,
                           input_tokens, output_tokens)
VALUES (%(judge_hash)s, %(query_key)s, %(content_hash)s, %(judge)s, %(model)s, %(grade)s,
        %(rationale)s, %(input_tokens)s, %(output_tokens)s)
ON CONFLICT (judge_hash, query_key, content_hash) DO UPDATE SET judge = judge_answers.judge
RETURNING grade, rationale, answered_at
"""

INSERT_JUDGE_RUN = """
INSERT INTO judge_runs (judge, judge_hash, catalog, pool_id, resolved, started_at, pairs,
                        requested, requests, from_cache, graded, failed, input_tokens,
                        output_tokens, cost, seconds, errors)
VALUES (%(judge)s, %(judge_hash)s, %(catalog)s, %(pool_id)s, %(resolved)s, %(started_at)s,
        %(pairs)s, %(requested)s, %(requests)s, %(from_cache)s, %(graded)s, %(failed)s,
        %(input_tokens)s, %(output_tokens)s, %(cost)s, %(seconds)s, %(errors)s)
RETURNING id
"""

#: The latest recorded run of each judge of a judgment set (its audit policy and identity).
SELECT_LATEST_JUDGE_RUNS = """
SELECT DISTINCT ON (judge) judge, judge_hash, resolved, finished_at
FROM judge_runs
WHERE catalog = %(catalog)s
ORDER BY judge, finished_at DESC, id DESC
"""

SELECT_JUDGE_RUNS = """
SELECT id, judge, judge_hash, catalog, pool_id, started_at, finished_at, pairs, requested,
       requests, from_cache, graded, failed, input_tokens, output_tokens, cost, seconds, errors
FROM judge_runs
WHERE catalog = %(catalog)s AND judge = %(judge)s
ORDER BY finished_at DESC, id DESC
"""

#: Many model grades at once (the cache's answers of a whole pool): COPY into a staging table,
#: then one INSERT that adds what is not there.
CREATE_MODEL_JUDGMENTS_STAGING = """
CREATE TEMP TABLE model_judgments_staging (
    query_id text, doc_id text, grade integer, judge text, judged_at timestamptz,
    guideline text, content_hash text, origin text, judge_hash text, prompt_version text,
    rationale text
) ON COMMIT DROP
"""

COPY_MODEL_JUDGMENTS_STAGING = """
COPY model_judgments_staging (query_id, doc_id, grade, judge, judged_at, guideline, content_hash,
                              origin, judge_hash, prompt_version, rationale) FROM STDIN
"""

INSERT_MODEL_JUDGMENTS_STAGED = """
INSERT INTO judgments (catalog, query_id, doc_id, grade, judge, judged_at, source, guideline,
                       content_hash, origin, judge_hash, prompt_version, rationale)
SELECT %(catalog)s, query_id, doc_id, grade, judge, judged_at, 'model', guideline, content_hash,
       origin, judge_hash, prompt_version, rationale
FROM model_judgments_staging
ON CONFLICT DO NOTHING
"""

# --------------------------------------------------------------------------- tune (migration 011)

INSERT_TUNE_STUDY = """
INSERT INTO tune_studies (study_id, target, served, metric, definition, split)
VALUES (%(study_id)s, %(target)s, %(served)s, %(metric)s, %(definition)s, %(split)s)
ON CONFLICT (study_id) DO NOTHING
"""

SELECT_TUNE_STUDY = """
SELECT study_id, target, served, metric, definition, split, verdict, finished_at
FROM tune_studies WHERE study_id = %(study_id)s
"""

INSERT_TUNE_TRIAL = """
INSERT INTO tune_trials (study_id, number, overrides, sha256, value, metrics, judged, bounds,
                         flagged, seconds, grades)
VALUES (%(study_id)s, %(number)s, %(overrides)s, %(sha256)s, %(value)s, %(metrics)s,
        %(judged)s, %(bounds)s, %(flagged)s, %(seconds)s, %(grades)s)
ON CONFLICT (study_id, number) DO NOTHING
"""

RESCORE_TUNE_TRIAL = """
UPDATE tune_trials SET value = %(value)s, metrics = %(metrics)s, judged = %(judged)s,
                       bounds = %(bounds)s, flagged = %(flagged)s, grades = %(grades)s
WHERE study_id = %(study_id)s AND number = %(number)s AND sha256 = %(sha256)s
"""

SELECT_TUNE_TRIALS = """
SELECT number, overrides, sha256, value, metrics, judged, bounds, flagged, seconds, grades
FROM tune_trials WHERE study_id = %(study_id)s ORDER BY number
"""

UPDATE_TUNE_VERDICT = """
UPDATE tune_studies SET verdict = %(verdict)s, finished_at = now()
WHERE study_id = %(study_id)s
"""

-- 001: catalog snapshot, embedding cache, document vectors, evaluation history.
-- Applied once by searcheval.database.migrate, recorded in schema_migrations. Never edit an
-- applied migration: add 002_*.sql.

CREATE EXTENSION IF NOT EXISTS vector;

-- The catalog as last seeded, one collection ("fixtures", "scifact", ...) per `catalog`.
CREATE TABLE resources (
    catalog      text NOT NULL,
    id           text NOT NULL,
    name         text NOT NULL,
    description  text NOT NULL,
    tags         text[] NOT NULL DEFAULT '{}',
    network      text,
    asset        text,
    price_usd    double precision,
    settled_30d  integer NOT NULL DEFAULT 0,
    success_rate double precision,
    updated_at   timestamptz,
    content_hash text NOT NULL,
    PRIMARY KEY (catalog, id)
);

-- Embedding cache: one vector per (model, model fingerprint, sha256 of the text). The column is
-- the untyped `vector`, so models of any dimension share the table.
CREATE TABLE embeddings (
    model       text NOT NULL,
    fingerprint text NOT NULL,
    text_sha256 text NOT NULL,
    embedding   vector NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, fingerprint, text_sha256)
);

-- Document vectors that dense search ranks. A resource removed from the catalog loses its vectors
-- (ON DELETE CASCADE). The column is untyped so any model fits; HNSW needs a fixed dimension, so
-- the index is a partial expression index over the 384-dimension rows (all-MiniLM-L6-v2 and any
-- other 384-dimension model). Queries that order by `embedding::vector(384) <=> q` with
-- `vector_dims(embedding) = 384` use it; ordering by the plain column is exact search. A model of
-- another dimension is searched exactly until a migration adds an index for its dimension.
CREATE TABLE doc_vectors (
    catalog   text NOT NULL,
    model     text NOT NULL,
    doc_id    text NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (catalog, model, doc_id),
    FOREIGN KEY (catalog, doc_id) REFERENCES resources (catalog, id) ON DELETE CASCADE
);

CREATE INDEX doc_vectors_hnsw_384 ON doc_vectors
    USING hnsw ((embedding::vector(384)) vector_cosine_ops)
    WHERE vector_dims(embedding) = 384;

CREATE INDEX doc_vectors_resource ON doc_vectors (catalog, doc_id);

-- Evaluation history: one row per run, per (configuration, category, metric), per query.
CREATE TABLE eval_runs (
    run_id       text PRIMARY KEY,
    flow_run_id  text,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    source       text,
    input_hashes jsonb NOT NULL DEFAULT '{}',
    model        text,
    gate_passed  boolean,
    summary      jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX eval_runs_started_at ON eval_runs (started_at DESC, run_id DESC);

CREATE TABLE eval_metrics (
    run_id        text NOT NULL REFERENCES eval_runs (run_id) ON DELETE CASCADE,
    configuration text NOT NULL,
    category      text NOT NULL,
    metric        text NOT NULL,
    value         double precision,
    ci_low        double precision,
    ci_high       double precision,
    n             integer,
    PRIMARY KEY (run_id, configuration, category, metric)
);

CREATE INDEX eval_metrics_history ON eval_metrics (configuration, category, metric, run_id);

CREATE TABLE eval_query_results (
    run_id        text NOT NULL REFERENCES eval_runs (run_id) ON DELETE CASCADE,
    configuration text NOT NULL,
    query_id      text NOT NULL,
    category      text NOT NULL,
    metric        text NOT NULL,
    value         double precision,
    PRIMARY KEY (run_id, configuration, query_id, metric)
);

CREATE INDEX eval_query_results_history ON eval_query_results (query_id, configuration, metric);

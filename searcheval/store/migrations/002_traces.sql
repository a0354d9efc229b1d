-- 002: recorded production traces (the replay flow's input) and the replay history.
-- Applied once by searcheval.database.migrate, recorded in schema_migrations. Never edit an
-- applied migration: add 003_*.sql.

-- One row per recorded search request, in the shape of a traces.jsonl line. `searcheval traces
-- load` upserts by trace_id; a production service may also insert here directly (replay
-- re-validates every row it reads). relevant_ids / relevance_scores are NULL when unlabelled;
-- an empty array / object is kept as given.
CREATE TABLE search_traces (
    trace_id         text PRIMARY KEY,
    ts               timestamptz NOT NULL,
    query            text NOT NULL,
    query_id         text,
    segment          text NOT NULL,
    configuration    text,
    retrieved_ids    text[] NOT NULL,
    relevant_ids     text[],
    relevance_scores jsonb,
    ingested_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX search_traces_ts ON search_traces (ts);
CREATE INDEX search_traces_segment ON search_traces (segment, ts);

-- Replay history, apart from eval_runs / eval_metrics: those hold golden-set evaluations, which
-- `searcheval history` charts and `searcheval baseline update --from-run` reads; replayed
-- production numbers (same configuration names, other queries) must not mix with them.
CREATE TABLE replay_runs (
    run_id        text PRIMARY KEY,
    flow_run_id   text,
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    source        text NOT NULL,          -- 'replay:<file>' or 'replay:db'
    configuration text NOT NULL,          -- the gated (A) side: its configuration, or 'replay'
    traces        integer NOT NULL,
    labelled      integer NOT NULL,
    coverage      double precision,
    min_coverage  double precision,
    passed        boolean NOT NULL,
    input_hashes  jsonb NOT NULL DEFAULT '{}',
    summary       jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX replay_runs_started_at ON replay_runs (started_at DESC, run_id DESC);

-- Per side, per segment ('(all)': every trace), per metric: the mean over the labelled traces
-- (n of them) and its floor when one was set; metric 'coverage' is the labelled share (n: traces).
CREATE TABLE replay_metrics (
    run_id        text NOT NULL REFERENCES replay_runs (run_id) ON DELETE CASCADE,
    configuration text NOT NULL,
    segment       text NOT NULL,
    metric        text NOT NULL,
    value         double precision,
    n             integer NOT NULL,
    threshold     double precision,
    PRIMARY KEY (run_id, configuration, segment, metric)
);

CREATE INDEX replay_metrics_history ON replay_metrics (configuration, segment, metric, run_id);

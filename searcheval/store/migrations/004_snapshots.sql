-- 004: snapshots of ranked results, the run's identity columns, and the baseline updates.
-- Applied once by searcheval.database.migrate, recorded in schema_migrations. Never edit an
-- applied migration: add a new numbered one.

-- Every run's ranked lists, to a stated depth (eval_runs.snapshot_depth): one row per
-- (configuration, query, rank). `grade` is the judgment the document had in that run (NULL:
-- unjudged), so a diff of two runs shows what each side was scored against. Written with COPY.
-- `searcheval history prune` deletes these rows of old runs; their metric rows stay.
CREATE TABLE eval_ranked_results (
    run_id        text NOT NULL REFERENCES eval_runs (run_id) ON DELETE CASCADE,
    configuration text NOT NULL,
    query_id      text NOT NULL,
    rank          integer NOT NULL,
    doc_id        text NOT NULL,
    score         double precision NOT NULL,
    grade         smallint,
    PRIMARY KEY (run_id, configuration, query_id, rank)
);

-- What a run is, so the history can be filtered and a run diffed against the previous run of
-- the same dataset: the dataset (collection name), the run's label, its kind (nightly, manual,
-- candidate), the depth of its snapshot, and when its snapshot was pruned.
ALTER TABLE eval_runs
    ADD COLUMN dataset text,
    ADD COLUMN label text,
    ADD COLUMN kind text,
    ADD COLUMN snapshot_depth integer,
    ADD COLUMN snapshot_pruned_at timestamptz;

CREATE INDEX eval_runs_dataset ON eval_runs (dataset, started_at DESC, run_id DESC);

-- Every `searcheval baseline update` that wrote a baseline: the history chart marks them.
CREATE TABLE baseline_updates (
    id            bigserial PRIMARY KEY,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    dataset       text,
    configuration text NOT NULL,
    from_run      text,
    path          text NOT NULL,
    who           text,
    reason        text,
    accepted_regression boolean NOT NULL DEFAULT false
);

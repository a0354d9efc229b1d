-- 005: judgments with provenance (issue 13). Every grade anyone gave is one row: a re-judgment
-- adds a row, nothing is overwritten. The grade a metric uses (the effective grade) is derived
-- from these rows by a stated rule (searcheval.judging.judgments). Pools of unjudged results are
-- kept here as the rating page's queue.

CREATE TABLE judgments (
    id            bigserial PRIMARY KEY,
    catalog       text NOT NULL,              -- the collection ("fixtures", "scifact", ...)
    query_id      text NOT NULL,
    doc_id        text NOT NULL,
    grade         integer NOT NULL,
    judge         text NOT NULL,
    judged_at     timestamptz,                -- NULL: the source gave no time (BEIR, TREC qrels)
    source        text NOT NULL CHECK (source IN ('human', 'import', 'model')),
    guideline     text,                       -- version of the grading guideline
    note          text,
    content_hash  text,                       -- the document's content hash when it was judged
    origin        text,                       -- the file (and line) an imported row came from
    seed          boolean NOT NULL DEFAULT false,  -- mirrored from the dataset's own judgments file
    retracted_at  timestamptz,                -- taken back (undo, or gone from the seeding file)
    recorded_at   timestamptz NOT NULL DEFAULT now()
);

-- The same grade by the same judge at the same time is one judgment: importing a file twice
-- (the nightly seeding) adds nothing. The dataset's file is the truth for its seed rows: a row
-- that is no longer in it is retracted (kept, never counted), and comes back if the line does.
CREATE UNIQUE INDEX judgments_identity ON judgments
    (catalog, query_id, doc_id, judge, grade, source, seed,
     coalesce(judged_at, '-infinity'::timestamptz));

CREATE INDEX judgments_pair ON judgments (catalog, query_id, doc_id, judge, judged_at);

-- A pool: the unjudged top-k of a run's configurations, in the order a grade matters most.
CREATE TABLE judgment_pools (
    pool_id        text PRIMARY KEY,
    catalog        text NOT NULL,
    run_id         text NOT NULL,
    depth          integer NOT NULL,
    configurations text[] NOT NULL,
    overlap        double precision NOT NULL DEFAULT 0,
    judges         text[] NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX judgment_pools_created ON judgment_pools (created_at DESC, pool_id DESC);

CREATE TABLE judgment_pool_items (
    pool_id          text NOT NULL REFERENCES judgment_pools (pool_id) ON DELETE CASCADE,
    position         integer NOT NULL,        -- 1 = the pair whose grade matters most
    query_id         text NOT NULL,
    doc_id           text NOT NULL,
    best_rank        integer NOT NULL,
    configurations   integer NOT NULL,        -- how many configurations returned it in the top k
    judges_needed    integer NOT NULL DEFAULT 1,
    assigned         text[] NOT NULL DEFAULT '{}',  -- empty: any judge
    PRIMARY KEY (pool_id, query_id, doc_id)
);

-- 010: model judges (issue 24). A model's grade is a judgments row of source 'model' that names
-- its judge's identity (sha256 of kind, model, prompt and parameters), the prompt's version and
-- the judge's rationale. Answers are cached by (judge, query, document content): a second run
-- of the same judge over the same pairs asks nothing. Each labelling run is recorded with what
-- it cost.

ALTER TABLE judgments
    ADD COLUMN judge_hash     text,
    ADD COLUMN prompt_version text,
    ADD COLUMN rationale      text;

CREATE TABLE judge_answers (
    judge_hash     text NOT NULL,
    query_key      text NOT NULL,             -- sha256 of the query text (and notes the prompt uses)
    content_hash   text NOT NULL,             -- the document's content hash
    judge          text NOT NULL,             -- the judge's name when it answered
    model          text NOT NULL,
    grade          integer NOT NULL,
    rationale      text,
    input_tokens   integer NOT NULL DEFAULT 0,
    output_tokens  integer NOT NULL DEFAULT 0,
    answered_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (judge_hash, query_key, content_hash)
);

CREATE TABLE judge_runs (
    id             bigserial PRIMARY KEY,
    judge          text NOT NULL,
    judge_hash     text NOT NULL,
    catalog        text NOT NULL,
    pool_id        text,
    resolved       jsonb NOT NULL,            -- the judge as resolved (credentials by source only)
    started_at     timestamptz NOT NULL,
    finished_at    timestamptz NOT NULL DEFAULT now(),
    pairs          integer NOT NULL,          -- pairs this run took on
    requested      integer NOT NULL,          -- pairs sent to the judge
    requests       integer NOT NULL,          -- requests, retries included
    from_cache     integer NOT NULL,
    graded         integer NOT NULL,
    failed         integer NOT NULL,
    input_tokens   bigint NOT NULL DEFAULT 0,
    output_tokens  bigint NOT NULL DEFAULT 0,
    cost           double precision NOT NULL DEFAULT 0,
    seconds        double precision NOT NULL DEFAULT 0,
    errors         jsonb NOT NULL DEFAULT '[]'
);

CREATE INDEX judge_runs_judge ON judge_runs (judge, finished_at DESC);
CREATE INDEX judgments_judge_hash ON judgments (catalog, judge, judge_hash) WHERE judge_hash IS NOT NULL;

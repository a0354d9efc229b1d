-- 003: the record of what ran. Every evaluation keeps the resolved configurations it ran (all
-- parameters after overrides; secrets are never among them: a header names its source) with
-- their sha256, and the code, versions, model and dataset it ran with.
-- Never edit an applied migration: add a new file.

ALTER TABLE eval_runs
    ADD COLUMN git_commit text,
    ADD COLUMN git_dirty  boolean,
    ADD COLUMN incomplete boolean NOT NULL DEFAULT false,
    ADD COLUMN what_ran   jsonb NOT NULL DEFAULT '{}';

CREATE TABLE eval_run_configurations (
    run_id         text NOT NULL REFERENCES eval_runs (run_id) ON DELETE CASCADE,
    name           text NOT NULL,
    kind           text NOT NULL,
    sha256         text NOT NULL,
    served         boolean NOT NULL DEFAULT false,
    resolved       jsonb NOT NULL,
    failed_queries integer NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, name)
);

CREATE INDEX eval_run_configurations_sha256 ON eval_run_configurations (sha256);

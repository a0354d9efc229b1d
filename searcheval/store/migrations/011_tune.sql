-- searcheval tune: one row per study (a search space over a configuration, its split, sampler
-- and seed: what makes it resumable), one row per trial (its configuration's hash, the
-- overrides it tried, its metrics on the tuning queries, its judged share and bounds).
CREATE TABLE IF NOT EXISTS tune_studies (
    study_id     text PRIMARY KEY,           -- sha256 of everything that defines the study
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    target       text NOT NULL,              -- the configuration tuned
    served       text NOT NULL,              -- what the verdict compares it with
    metric       text NOT NULL,              -- the objective, maximised
    definition   jsonb NOT NULL,             -- space, sampler, seed, split share, files' hashes
    split        jsonb NOT NULL,             -- {"tuning": [query ids], "held_out": [query ids]}
    verdict      jsonb                       -- the held-out comparison, once made
);

CREATE TABLE IF NOT EXISTS tune_trials (
    study_id     text NOT NULL REFERENCES tune_studies (study_id) ON DELETE CASCADE,
    number       integer NOT NULL,
    overrides    jsonb NOT NULL,             -- NAME.PARAM -> value tried
    sha256       text NOT NULL,              -- the tuned configuration's hash
    value        double precision,           -- the objective on the tuning queries
    metrics      jsonb NOT NULL,             -- metric -> mean on the tuning queries
    judged       double precision,           -- judged@10 mean
    bounds       jsonb NOT NULL,             -- metric -> [low, high] (unjudged irrelevant / relevant)
    flagged      boolean NOT NULL DEFAULT false,  -- unjudged share above the threshold
    seconds      double precision NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (study_id, number)
);

-- 009 (issue 25, production data): what users did with a trace's results, implicit judgments,
-- and the live monitor's windows. Never edit an applied migration: add a new file.

-- What was shown (in order), clicks [{position, doc_id, dwell_s}], explicit feedback
-- [{doc_id, grade, thumbs}], the session, a pseudonymous user id and the served configuration's
-- version. Every column is optional, as the JSONL fields are (searcheval.io.behaviour).
ALTER TABLE search_traces
    ADD COLUMN shown_ids             text[],
    ADD COLUMN clicks                jsonb,
    ADD COLUMN feedback              jsonb,
    ADD COLUMN session_id            text,
    ADD COLUMN user_id               text,
    ADD COLUMN configuration_version text;

-- Judgments from clicks: source `implicit`, and each row's maker beyond its judge name (the click
-- model, its parameters, the traces' window, the impressions behind the grade).
ALTER TABLE judgments DROP CONSTRAINT IF EXISTS judgments_source_check;
ALTER TABLE judgments ADD CONSTRAINT judgments_source_check
    CHECK (source IN ('human', 'import', 'model', 'implicit'));
ALTER TABLE judgments ADD COLUMN IF NOT EXISTS provenance jsonb;

-- The live monitor (searcheval.production.monitor): one row per scored window of one monitor,
-- [window_start, window_end); a window is scored once (the primary key), an empty one is kept
-- with traces = 0. `detector` is the change detector's state after the window, so a restarted
-- monitor resumes where it stopped.
CREATE TABLE live_windows (
    monitor       text NOT NULL,
    window_start  timestamptz NOT NULL,
    window_end    timestamptz NOT NULL,
    traces        integer NOT NULL,
    labelled      integer NOT NULL,
    metrics       jsonb NOT NULL DEFAULT '{}',
    detector      jsonb NOT NULL DEFAULT '{}',
    alerted       boolean NOT NULL DEFAULT false,
    scored_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (monitor, window_start)
);

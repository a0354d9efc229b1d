-- 007: data inputs (issue 15). Each run's means per automatic segment of the queries (number of
-- words, digits, a quoted phrase, the data's query class), beside eval_metrics' categories, so
-- that "dense search is bad for queries of more than three words" is one query over the history.
-- The conventions a run used (gain, relevance level, grade scale, judged-share floor and where
-- each came from) are in eval_runs.summary -> 'conventions'.

CREATE TABLE eval_segment_metrics (
    run_id        text NOT NULL REFERENCES eval_runs (run_id) ON DELETE CASCADE,
    configuration text NOT NULL,
    segment       text NOT NULL,  -- words:1 | words:2 | words:3 | words:4+ | digits:yes|no | quoted:yes|no | class:<name>
    metric        text NOT NULL,
    value         double precision,
    n             integer,  -- queries of the segment with a value of this metric
    PRIMARY KEY (run_id, configuration, segment, metric)
);

CREATE INDEX eval_segment_metrics_history ON eval_segment_metrics (configuration, segment, metric, run_id);

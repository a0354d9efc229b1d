-- 008: what a document lookup returned (issue 11, "the documents of an external engine"). An
-- engine that holds its own documents is asked for them by id (rankers.documents); what it
-- answered is kept so that the diff, the pool and the rating page show titles and text long after
-- the run without asking again, and so that staleness can tell which version a judgment was of.
-- Never a header or any other secret: only what the documents said.

-- Per run and configuration: the title, text and content hash its lookup returned for each
-- document it looked up (the judged ones and the top of every ranked list), or that the document
-- was gone. What a diff of that run shows beside the ranked lists; pruned with them.
CREATE TABLE eval_run_documents (
    run_id        text NOT NULL REFERENCES eval_runs (run_id) ON DELETE CASCADE,
    configuration text NOT NULL,
    doc_id        text NOT NULL,
    gone          boolean NOT NULL DEFAULT false,
    title         text,
    text          text,
    content_hash  text,
    PRIMARY KEY (run_id, configuration, doc_id)
);

-- Per judgment set (judgments.catalog) and document: each version the lookup reported, in order,
-- with when it was first and last seen. A version is a span of equal answers: a document whose
-- hash goes A, B, A has three rows; content_hash NULL is a span in which it was gone. A judgment
-- without a recorded hash is of the first version reported at or after it was made
-- (searcheval.judging.versions).
CREATE TABLE document_versions (
    catalog       text NOT NULL,
    doc_id        text NOT NULL,
    version       integer NOT NULL,
    content_hash  text,
    title         text,
    text          text,
    first_seen    timestamptz NOT NULL,
    last_seen     timestamptz NOT NULL,
    first_run     text,
    last_run      text,
    PRIMARY KEY (catalog, doc_id, version)
);

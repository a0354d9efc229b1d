"""Recorded production traces in Postgres (`search_traces`, migrations/002_traces.sql): upserted
from a JSONL file with COPY, read back as a TraceTable through a server-side cursor."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from searcheval.errors import InputError
from searcheval.io.behaviour import behaviour_dict
from searcheval.io.traces import (
    DEFAULT_GRADE_SCALE,
    DEFAULT_MAX_BAD_SHARE,
    BadLines,
    Trace,
    TraceTable,
    describe_selection,
    iter_trace_file,
    iter_trace_records,
)
from searcheval.store import sql

TRACE_READ_BATCH = 5_000  # rows per round trip of the server-side cursor
#: the source name of traces read from the database (TraceTable.source, messages).
TRACES_SOURCE = "search_traces"


def _trace_row(trace: Trace, number: int) -> list:
    if not isinstance(trace, Trace):
        raise InputError(f"expected a Trace, got {type(trace).__name__}", field=f"traces[{number}]")
    return [trace.trace_id, trace.ts, trace.query, trace.query_id, trace.segment,
            trace.configuration, list(trace.retrieved_ids),
            None if trace.relevant_ids is None else list(trace.relevant_ids),
            None if trace.relevance_scores is None else dict(trace.relevance_scores),
            *_behaviour_columns(trace)]


def _behaviour_columns(trace: Trace) -> list:
    """shown_ids, clicks, feedback, session_id, user_id, configuration_version (issue 25)."""
    fields = behaviour_dict(trace)
    return [fields.get("shown_ids"), fields.get("clicks"), fields.get("feedback"),
            trace.session_id, trace.user_id, trace.configuration_version]


def save_traces(conn: psycopg.Connection, traces: Iterable[Trace]) -> dict:
    """Upsert traces by trace_id, in one transaction: COPY into a staging table, then one
    INSERT ... ON CONFLICT. A stored trace equal to the new one is left alone.

    `traces` is consumed inside the transaction, so an exception it raises (a file refused by the
    bad-line rule once it is read to the end) leaves nothing written. Returns
    `{"traces": given, "inserted", "updated", "unchanged", "stored": rows in the table after}`.
    """
    given = 0
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(sql.TRACES_LOCK, {"lock_class": sql.TRACES_LOCK_CLASS})
            cur.execute(sql.CREATE_TRACES_STAGING)
            with cur.copy(sql.COPY_TRACES_STAGING) as copy:
                copy.set_types(list(sql.TRACE_COPY_TYPES))
                for given, trace in enumerate(traces, start=1):
                    copy.write_row(_trace_row(trace, given - 1))
            cur.execute(sql.ANALYZE_TRACES_STAGING)
            existing = cur.execute(sql.COUNT_STAGED_TRACES_STORED).fetchone()[0]
            cur.execute(sql.UPSERT_TRACES_FROM_STAGING)
            affected = cur.rowcount
            stored = cur.execute(sql.COUNT_TRACES).fetchone()[0]
    except psycopg.errors.CardinalityViolation:
        raise InputError("a trace_id occurs more than once in the traces to save; expected "
                         "distinct trace ids", field="trace_id") from None
    inserted = given - existing
    updated = affected - inserted
    return {"traces": given, "inserted": inserted, "updated": updated,
            "unchanged": existing - updated, "stored": stored}


def ingest_traces(conn: psycopg.Connection, path: str | Path, *,
                  grade_scale: tuple[int, int] = DEFAULT_GRADE_SCALE,
                  max_bad_share: float = DEFAULT_MAX_BAD_SHARE) -> dict:
    """`searcheval traces load`: a JSONL file of traces, validated line by line as replay reads
    it (bad lines skipped up to `max_bad_share`, else refused), streamed into `save_traces`: all
    of the file or nothing. Returns save_traces' counts plus `file` and `bad_lines`."""
    bad = BadLines()
    lines = iter_trace_file(path, grade_scale=grade_scale, max_bad_share=max_bad_share, bad=bad)
    counts = save_traces(conn, (trace for _, trace in lines))
    return {"file": str(path), **counts, "bad_lines": bad.to_dict()}


def ingest_ubi(conn, queries: str | Path, events: str | Path | None = None, *,
               grade_scale: tuple[int, int] = (0, 3)) -> dict:
    """`searcheval traces load --ubi`: UBI queries (and their clicks) upserted into search_traces
    in one transaction (all or nothing: the strict reader refuses a malformed document before
    the transaction commits). The counts of `store.traces.save_traces`, plus `file` and the
    reader's `ubi` counts."""
    from searcheval.io.ubi import iter_ubi_traces

    tally: dict = {}
    counts = save_traces(conn, (t for _, t in iter_ubi_traces(queries, events,
                                                               grade_scale=grade_scale,
                                                               counts=tally)))
    if not counts["traces"]:
        raise InputError("the file holds no UBI query", file=queries)
    return {"file": str(queries), **counts, "ubi": tally,
            "bad_lines": {"count": 0, "lines": counts["traces"], "first": []}}


def count_traces(conn: psycopg.Connection) -> int:
    return conn.execute(sql.COUNT_TRACES).fetchone()[0]


def iter_trace_rows(conn: psycopg.Connection, *, since: datetime | None = None,
                    until: datetime | None = None, segment: str | None = None,
                    batch_size: int = TRACE_READ_BATCH) -> Iterator[dict]:
    """Rows of `search_traces` with since <= ts < until in `segment` (each optional), by
    (ts, trace_id), as dicts, streamed through a server-side cursor `batch_size` rows at a time
    (memory stays flat whatever the table holds). The cursor lives in a transaction that ends
    when the iteration does."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"expected a batch size >= 1, got {batch_size!r}", field="batch_size")
    params = {"since": since, "until": until, "segment": segment}
    with conn.transaction(), conn.cursor(name=sql.TRACES_CURSOR, row_factory=dict_row,
                                         binary=True) as cur:
        cur.itersize = batch_size
        cur.execute(sql.SELECT_TRACES, params)
        yield from cur


def load_trace_table(conn: psycopg.Connection, *, since: datetime | None = None,
                     until: datetime | None = None, segment: str | None = None,
                     grade_scale: tuple[int, int] = DEFAULT_GRADE_SCALE,
                     max_bad_share: float = DEFAULT_MAX_BAD_SHARE,
                     batch_size: int = TRACE_READ_BATCH) -> TraceTable:
    """`searcheval replay --from-db`: the selected rows as the same TraceTable a file gives.

    Every row goes through `parse_trace` (rows may come from other writers than `traces load`):
    a row that is not a valid trace is a bad record, skipped up to `max_bad_share` of the rows
    read, else the read is refused; the table is packed by `TraceTable.from_traces`.
    """
    rows = iter_trace_rows(conn, since=since, until=until, segment=segment,
                           batch_size=batch_size)
    bad = BadLines()
    traces = iter_trace_records(
        rows, source=TRACES_SOURCE, grade_scale=grade_scale, max_bad_share=max_bad_share,
        bad=bad, empty=f"no trace matches {describe_selection(since, until, segment)}")
    return TraceTable.from_traces(traces, TRACES_SOURCE, bad=bad)

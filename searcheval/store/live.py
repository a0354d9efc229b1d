"""The live monitor's windows in Postgres (`live_windows`, migrations/009_production.sql) and the
traces of one window."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime
from typing import Iterator

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from searcheval.io.traces import BadLines, TraceTable, iter_trace_records
from searcheval.store import sql
from searcheval.store.traces import TRACES_SOURCE, iter_trace_rows


@contextmanager
def monitor_lock(conn: psycopg.Connection, monitor: str) -> Iterator[None]:
    """One run of a monitor at a time (a second waits, then finds the windows stored)."""
    params = {"lock_class": sql.LIVE_LOCK_CLASS, "monitor": monitor}
    conn.execute(sql.LIVE_LOCK, params)
    try:
        yield
    finally:
        conn.execute(sql.LIVE_UNLOCK, params)


def last_window(conn: psycopg.Connection, monitor: str) -> dict | None:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_LAST_LIVE_WINDOW, {"monitor": monitor}).fetchone()


def save_window(conn: psycopg.Connection, row: dict) -> bool:
    """Store one window; False when it was already stored (never scored twice)."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(sql.INSERT_LIVE_WINDOW, {**row, "metrics": Jsonb(row["metrics"]),
                                             "detector": Jsonb(row["detector"])})
        return cur.rowcount == 1


def load_series(conn: psycopg.Connection, monitor: str, n: int = 96) -> list[dict]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_LIVE_SERIES, {"monitor": monitor, "n": n}).fetchall()


def window_traces(conn: psycopg.Connection, start: datetime, end: datetime, *,
                  grade_scale: tuple[int, int] = (0, 3),
                  max_bad_share: float = 0.01) -> TraceTable | None:
    """The traces with start <= ts < end, or None when there is none (an empty window)."""
    rows = list(iter_trace_rows(conn, since=start, until=end))
    if not rows:
        return None
    bad = BadLines()
    traces = iter_trace_records(rows, source=TRACES_SOURCE, grade_scale=grade_scale,
                                max_bad_share=max_bad_share, bad=bad)
    return TraceTable.from_traces(traces, TRACES_SOURCE, bad=bad)

"""The run history in Postgres: evaluations (`eval_runs`, `eval_metrics`, `eval_query_results`) and
replays (`replay_runs`, `replay_metrics`). Each run is written with its rows in one transaction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from searcheval.errors import InputError
from searcheval.store import sql

# --------------------------------------------------------------------------- evaluations

RUN_COLUMNS = ("run_id", "flow_run_id", "started_at", "finished_at", "source", "input_hashes",
               "model", "gate_passed", "summary")
METRIC_COLUMNS = ("run_id", "configuration", "category", "metric", "value", "ci_low", "ci_high",
                  "n")
QUERY_COLUMNS = ("run_id", "configuration", "query_id", "category", "metric", "value")
SEGMENT_COLUMNS = ("run_id", "configuration", "segment", "metric", "value", "n")
_SEGMENT_REQUIRED = ("configuration", "segment", "metric", "value")
_RUN_REQUIRED = ("run_id", "started_at")
_METRIC_REQUIRED = ("configuration", "category", "metric", "value")
_QUERY_REQUIRED = ("configuration", "query_id", "category", "metric", "value")


def _row(row: Any, columns: tuple[str, ...], required: tuple[str, ...], where: str,
         run_id: str | None) -> dict:
    if not isinstance(row, dict):
        raise InputError(f"expected a dict, got {type(row).__name__}", field=where)
    unknown = sorted(set(row) - set(columns))
    if unknown:
        raise InputError(f"unknown column(s) {unknown}; expected {', '.join(columns)}",
                         field=where)
    out = {c: row.get(c) for c in columns}
    if run_id is not None:
        if out["run_id"] not in (None, run_id):
            raise InputError(f"expected run_id {run_id!r}, got {out['run_id']!r}",
                             field=f"{where}.run_id")
        out["run_id"] = run_id
    for c in required:
        if out[c] is None:
            raise InputError(f"expected a value for {c}", field=f"{where}.{c}")
    value = out.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise InputError(f"expected a number, got {value!r}", field=f"{where}.value")
    if isinstance(value, float) and math.isinf(value):
        raise InputError(f"expected a finite number or NaN, got {value!r}", field=f"{where}.value")
    return out


def save_evaluation(conn: psycopg.Connection, run_row: dict, metric_rows: Sequence[dict],
                    query_rows: Sequence[dict], segment_rows: Sequence[dict] = (),
                    what_ran: dict | None = None,
                    configuration_rows: Sequence[dict] = ()) -> None:
    """Write one evaluation (the run, its metrics, its per-query values, its means per automatic
    segment) in one transaction.

    `run_row` has the `eval_runs` columns (`run_id` and `started_at` required; `input_hashes` and
    `summary` are JSON-able). Metric, query and segment rows may leave `run_id` out (it is filled
    in); per-query rows go in with COPY. `what_ran` (git_commit, git_dirty, incomplete,
    what_ran) and `configuration_rows` (name, kind, sha256, served, resolved, failed_queries) are
    the record of what ran (migration 003).
    """
    run = _run_row(run_row, RUN_COLUMNS, _RUN_REQUIRED)
    queries = [_row(r, QUERY_COLUMNS, _QUERY_REQUIRED, f"query_rows[{i}]", run["run_id"])
               for i, r in enumerate(query_rows)]
    segments = [_row(r, SEGMENT_COLUMNS, _SEGMENT_REQUIRED, f"segment_rows[{i}]", run["run_id"])
                for i, r in enumerate(segment_rows)]

    def copy_queries(cur: psycopg.Cursor) -> None:
        if what_ran is not None:
            cur.execute(sql.UPDATE_EVAL_RUN_WHAT_RAN, {
                "run_id": run["run_id"], "git_commit": what_ran.get("git_commit"),
                "git_dirty": what_ran.get("git_dirty"),
                "incomplete": bool(what_ran.get("incomplete")),
                "what_ran": Jsonb(what_ran.get("what_ran") or {})})
        if configuration_rows:
            cur.executemany(sql.INSERT_EVAL_RUN_CONFIGURATION, [
                {**r, "run_id": run["run_id"], "resolved": Jsonb(r["resolved"])}
                for r in configuration_rows])
        if segments:
            cur.executemany(sql.INSERT_EVAL_SEGMENT_METRIC, segments)
        if queries:
            with cur.copy(sql.COPY_EVAL_QUERY_RESULTS) as copy:
                for row in queries:
                    copy.write_row([row[c] for c in QUERY_COLUMNS])

    _save_run(conn, "run", sql.INSERT_EVAL_RUN, run, sql.INSERT_EVAL_METRIC,
              [_row(r, METRIC_COLUMNS, _METRIC_REQUIRED, f"metric_rows[{i}]", run["run_id"])
               for i, r in enumerate(metric_rows)], copy_queries)


def _run_row(run_row: dict, columns: tuple[str, ...], required: tuple[str, ...]) -> dict:
    run = _row(run_row, columns, required, "run_row", None)
    run["input_hashes"] = Jsonb(run["input_hashes"] or {})
    run["summary"] = Jsonb(run["summary"] or {})
    return run


def _save_run(conn: psycopg.Connection, what: str, insert_run: str, run: dict,
              insert_metric: str, metrics: list[dict], more=None) -> None:
    """The run row, its metric rows and (`more`) anything else, in one transaction."""
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(insert_run, run)
            if metrics:
                cur.executemany(insert_metric, metrics)
            if more is not None:
                more(cur)
    except psycopg.errors.UniqueViolation as exc:
        detail = exc.diag.message_detail or str(exc)
        raise InputError(f"duplicate row for {what} {run['run_id']!r}: {detail}",
                         field="run_id") from None


def last_runs(conn: psycopg.Connection, n: int = 10) -> list[dict]:
    """The `n` most recent runs (by started_at), newest first, as dicts of eval_runs columns."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"expected n >= 1, got {n!r}", field="n")
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_LAST_RUNS, {"n": n}).fetchall()


def run_metrics(conn: psycopg.Connection, run_id: str) -> list[dict]:
    """The metric rows of one run, by configuration, category, metric."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_RUN_METRICS, {"run_id": run_id}).fetchall()


def run_segment_metrics(conn: psycopg.Connection, run_id: str) -> list[dict]:
    """The means per automatic segment of one run, by configuration, segment, metric."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_RUN_SEGMENT_METRICS, {"run_id": run_id}).fetchall()


def run_query_results(conn: psycopg.Connection, run_id: str) -> list[dict]:
    """The per-query rows of one run, by configuration, query, metric."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_RUN_QUERY_RESULTS, {"run_id": run_id}).fetchall()


def run_configurations(conn: psycopg.Connection, run_id: str) -> list[dict]:
    """The configurations one run ran: name, kind, sha256, served, resolved, failed_queries."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_RUN_CONFIGURATIONS, {"run_id": run_id}).fetchall()


def run_what_ran(conn: psycopg.Connection, run_id: str) -> dict | None:
    """git_commit, git_dirty, incomplete and the what_ran document of one run."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_RUN_WHAT_RAN, {"run_id": run_id}).fetchone()


# --------------------------------------------------------------------------- replay history

REPLAY_RUN_COLUMNS = ("run_id", "flow_run_id", "started_at", "finished_at", "source",
                      "configuration", "traces", "labelled", "coverage", "min_coverage", "passed",
                      "input_hashes", "summary")
REPLAY_METRIC_COLUMNS = ("run_id", "configuration", "segment", "metric", "value", "n",
                         "threshold")
_REPLAY_RUN_REQUIRED = ("run_id", "started_at", "source", "configuration", "traces", "labelled",
                        "passed")
_REPLAY_METRIC_REQUIRED = ("configuration", "segment", "metric", "n")


def save_replay(conn: psycopg.Connection, run_row: dict, metric_rows: Sequence[dict]) -> None:
    """Write one replay (its run row and metric rows) in one transaction. Metric rows may leave
    `run_id` out (it is filled in); `input_hashes` and `summary` are JSON-able."""
    run = _run_row(run_row, REPLAY_RUN_COLUMNS, _REPLAY_RUN_REQUIRED)
    _save_run(conn, "replay run", sql.INSERT_REPLAY_RUN, run, sql.INSERT_REPLAY_METRIC,
              [_row(r, REPLAY_METRIC_COLUMNS, _REPLAY_METRIC_REQUIRED, f"metric_rows[{i}]",
                    run["run_id"]) for i, r in enumerate(metric_rows)])


def last_replay_runs(conn: psycopg.Connection, n: int = 10) -> list[dict]:
    """The `n` most recent replays (by started_at), newest first, as dicts of replay_runs."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"expected n >= 1, got {n!r}", field="n")
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_LAST_REPLAY_RUNS, {"n": n}).fetchall()


def replay_run_metrics(conn: psycopg.Connection, run_id: str) -> list[dict]:
    """The metric rows of one replay, by configuration, segment, metric."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_REPLAY_METRICS, {"run_id": run_id}).fetchall()

"""Snapshots of ranked results (`eval_ranked_results`, migrations/004_snapshots.sql): every run's
ranked lists to a stated depth, written with binary COPY in the run's own transaction, read back
for diffs, and pruned by age (the metric history stays).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta, timezone

import psycopg
from psycopg.rows import dict_row

from searcheval.errors import InputError
from searcheval.store import sql
from searcheval.types import RankedRun

RUN_KINDS = ("nightly", "manual", "candidate")


def _depth(depth: object) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InputError(f"expected a snapshot depth >= 1, got {depth!r}", field="snapshot_depth")
    return depth


def ranked_rows(run_id: str, runs: Mapping[str, RankedRun], qrels: Mapping[str, Mapping[str, int]],
                depth: int):
    """The COPY rows of `runs`, each query's list cut at `depth`, ranks from 1, with the grade the
    document had in `qrels` (None: unjudged)."""
    for name, run in runs.items():
        for qid, docs in run.results.items():
            grades = qrels.get(qid) or {}
            for rank, (doc, score) in enumerate(docs[:depth], start=1):
                yield (run_id, name, qid, rank, doc, float(score), grades.get(doc))


def write_ranked_results(cur: psycopg.Cursor, run_id: str, runs: Mapping[str, RankedRun],
                         qrels: Mapping[str, Mapping[str, int]], depth: int) -> int:
    """COPY the ranked lists of one run on `cur` (inside the caller's transaction); returns rows."""
    depth = _depth(depth)
    count = 0
    with cur.copy(sql.COPY_RANKED_RESULTS) as copy:
        copy.set_types(list(sql.RANKED_COPY_TYPES))
        for row in ranked_rows(run_id, runs, qrels, depth):
            copy.write_row(row)
            count += 1
    return count


def set_run_identity(cur: psycopg.Cursor, run_id: str, *, dataset: str | None,
                     label: str | None, kind: str | None, depth: int | None) -> None:
    if kind is not None and kind not in RUN_KINDS:
        raise InputError(f"expected a run kind of {', '.join(RUN_KINDS)}, got {kind!r}",
                         field="kind")
    cur.execute(sql.SET_RUN_IDENTITY, {"run_id": run_id, "dataset": dataset, "label": label,
                                       "kind": kind, "snapshot_depth": depth})


def load_ranked_results(conn: psycopg.Connection, run_id: str, configuration: str
                        ) -> dict[str, list[tuple[str, float, int | None]]]:
    """query id -> [(doc id, score, grade)] best first, of one configuration of one run."""
    out: dict[str, list[tuple[str, float, int | None]]] = {}
    with conn.cursor() as cur:
        cur.execute(sql.SELECT_RANKED_RESULTS, {"run_id": run_id, "configuration": configuration})
        for _, qid, _, doc, score, grade in cur:
            out.setdefault(qid, []).append((doc, score, grade))
    return out


def count_ranked_results(conn: psycopg.Connection, run_id: str) -> int:
    return conn.execute(sql.COUNT_RANKED_RESULTS, {"run_id": run_id}).fetchone()[0]


def load_run(conn: psycopg.Connection, run_id: str) -> dict | None:
    """The eval_runs row of one run, or None."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_EVAL_RUN, {"run_id": run_id}).fetchone()


def find_runs(conn: psycopg.Connection, *, n: int = 20, dataset: str | None = None,
              configuration: str | None = None, label: str | None = None,
              kind: str | None = None, before: dict | None = None) -> list[dict]:
    """Runs newest first, filtered (None: any); `before` (a run row) keeps the runs older than it."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"expected n >= 1, got {n!r}", field="n")
    params = {"n": n, "dataset": dataset, "configuration": configuration, "label": label,
              "kind": kind, "before": before["started_at"] if before else None,
              "before_run": before["run_id"] if before else None}
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_RUNS_FILTERED, params).fetchall()


def parse_age(text: str) -> timedelta:
    """`90d`, `12h`, `30m`, `2w` as a timedelta; refused otherwise."""
    units = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
    raw = str(text).strip().lower()
    try:
        number, unit = int(raw[:-1]), raw[-1]
        if unit not in units or number < 0:
            raise ValueError
    except (ValueError, IndexError):
        raise InputError(f"expected an age like 90d, 12h or 2w, got {text!r}",
                         field="older_than") from None
    return timedelta(**{units[unit]: number})


def prune_snapshots(conn: psycopg.Connection, older_than: timedelta,
                    now: datetime | None = None) -> dict:
    """Delete the ranked lists of runs started more than `older_than` ago, and the documents their
    lookups returned (what a diff of those lists showed), in one transaction; their run, metric
    and per-query rows stay. Returns {"rows", "runs", "before"} (rows: of ranked lists)."""
    before = (now or datetime.now(timezone.utc)) - older_than
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(sql.PRUNE_RANKED_RESULTS, {"before": before})
        rows = cur.rowcount
        cur.execute(sql.PRUNE_RUN_DOCUMENTS, {"before": before})
        cur.execute(sql.MARK_RUNS_PRUNED, {"before": before})
        runs = cur.rowcount
    return {"rows": rows, "runs": runs, "before": before}


def record_baseline_update(conn: psycopg.Connection, *, dataset: str | None, configuration: str,
                           from_run: str | None, path: str, who: str | None, reason: str | None,
                           accepted_regression: bool) -> None:
    conn.execute(sql.INSERT_BASELINE_UPDATE, {
        "dataset": dataset, "configuration": configuration, "from_run": from_run, "path": path,
        "who": who, "reason": reason, "accepted_regression": accepted_regression})


def baseline_updates(conn: psycopg.Connection) -> list[dict]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_BASELINE_UPDATES).fetchall()

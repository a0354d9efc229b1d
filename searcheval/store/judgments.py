"""Judgment rows and pools in Postgres (migrations/005_judgments.sql).

`seed_judgments` mirrors a dataset's own judgments file (its rows become seed rows; seed rows the
file no longer holds are retracted); `add_judgments` adds the rows of an import in one
transaction; `record_grade` is the rating page's write: one row, refused when another tab wrote
that judge's grade of the pair since the page was loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg.rows import dict_row

from searcheval.types import JudgmentRow
from searcheval.store import sql


def _params(catalog: str, row: JudgmentRow) -> dict:
    return {"catalog": catalog, "query_id": row.query_id, "doc_id": row.doc_id,
            "grade": row.grade, "judge": row.judge, "judged_at": row.judged_at,
            "source": row.source, "guideline": row.guideline, "note": row.note,
            "content_hash": row.content_hash, "origin": row.origin}


def seed_judgments(conn: psycopg.Connection, catalog: str, rows: list[JudgmentRow]) -> dict:
    """The dataset file's rows as the catalog's seed rows, in one transaction: {added,
    retracted, restored} counts. Rows of imports and of the rating page are never touched."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(sql.JUDGMENTS_LOCK, {"lock_class": sql.JUDGMENTS_LOCK_CLASS,
                                         "catalog": catalog})
        cur.execute(sql.CREATE_JUDGMENTS_STAGING)
        with cur.copy(sql.COPY_JUDGMENTS_STAGING) as copy:
            for r in rows:
                copy.write_row([r.query_id, r.doc_id, r.grade, r.judge, r.judged_at, r.origin])
        cur.execute(sql.UPSERT_SEED_JUDGMENTS, {"catalog": catalog})
        upserted = cur.rowcount
        cur.execute(sql.RETRACT_STALE_SEED_JUDGMENTS, {"catalog": catalog})
        retracted = cur.rowcount
    return {"upserted": upserted, "retracted": retracted}


def add_judgments(conn: psycopg.Connection, catalog: str, rows: list[JudgmentRow]) -> int:
    """Add the rows of one import (one transaction); returns how many were new (a row identical
    to a stored one is not added twice)."""
    added = 0
    with conn.transaction(), conn.cursor() as cur:
        for row in rows:
            cur.execute(sql.INSERT_JUDGMENT, _params(catalog, row))
            added += cur.fetchone() is not None
    return added


def load_judgment_rows(conn: psycopg.Connection, catalog: str,
                       include_retracted: bool = False,
                       judge: str | None = None, include_seed: bool = True) -> list[JudgmentRow]:
    """Every row of the catalog (or one judge's live rows), in the order the effective-grade rule
    reads them; `include_seed=False` leaves out the rows mirrored from the dataset's file."""
    with conn.cursor(row_factory=dict_row) as cur:
        if judge is not None:
            found = cur.execute(sql.SELECT_JUDGE_JUDGMENTS, {"catalog": catalog,
                                                             "judge": judge}).fetchall()
        else:
            found = cur.execute(sql.SELECT_JUDGMENTS, {"catalog": catalog,
                                                       "all": include_retracted,
                                                       "seed": include_seed}).fetchall()
    return [JudgmentRow(query_id=r["query_id"], doc_id=r["doc_id"], grade=r["grade"],
                        judge=r["judge"], judged_at=r["judged_at"], source=r["source"],
                        guideline=r["guideline"], note=r["note"], content_hash=r["content_hash"],
                        origin=r["origin"], id=r["id"], seed=r["seed"],
                        retracted_at=r["retracted_at"], recorded_at=r["recorded_at"],
                        judge_hash=r["judge_hash"], prompt_version=r["prompt_version"],
                        rationale=r["rationale"])
            for r in found]


def count_judgments(conn: psycopg.Connection, catalog: str) -> int:
    return conn.execute(sql.COUNT_JUDGMENTS, {"catalog": catalog}).fetchone()[0]


@dataclass
class Recorded:
    """What `record_grade` did: `id` of the new row, or `conflict` (the row another tab wrote)."""

    id: int | None
    conflict: dict | None = None


def record_grade(conn: psycopg.Connection, catalog: str, row: JudgmentRow,
                 expected_id: int | None) -> Recorded:
    """One grade from the rating page, in one transaction. `expected_id` is the id of the judge's
    latest row of the pair when the page was shown (None: none): if another tab has written one
    since, nothing is written and the conflict is returned."""
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql.JUDGMENT_PAIR_LOCK, {"catalog": catalog, "query_id": row.query_id,
                                             "doc_id": row.doc_id, "judge": row.judge})
        current = cur.execute(sql.SELECT_LATEST_JUDGMENT, {
            "catalog": catalog, "query_id": row.query_id, "doc_id": row.doc_id,
            "judge": row.judge}).fetchone()
        if (current["id"] if current else None) != expected_id:
            return Recorded(None, current)
        new = cur.execute(sql.INSERT_JUDGMENT, _params(catalog, row)).fetchone()
    return Recorded(new["id"] if new else None)


def undo_last(conn: psycopg.Connection, catalog: str, judge: str, since: datetime) -> dict | None:
    """Retract the judge's latest rating-page row recorded since `since` (this app's start);
    returns it, or None when there is nothing to undo."""
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        last = cur.execute(sql.SELECT_LAST_HUMAN_JUDGMENT, {"catalog": catalog, "judge": judge,
                                                             "since": since}).fetchone()
        if last is None:
            return None
        cur.execute(sql.RETRACT_JUDGMENT, {"id": last["id"], "judge": judge})
    return last


# --------------------------------------------------------------------------- pools


def save_pool(conn: psycopg.Connection, pool: dict, items: list[dict]) -> None:
    """One pool and its items, in one transaction."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(sql.INSERT_POOL, pool)
        if items:
            cur.executemany(sql.INSERT_POOL_ITEM, [{**i, "pool_id": pool["pool_id"]}
                                                   for i in items])


def replace_pool(conn: psycopg.Connection, pool: dict, items: list[dict]) -> None:
    """A pool of a fixed id (a tuning study's `tune:STUDY`) in place of the earlier one, in one
    transaction; with no items, the earlier one is only removed."""
    with conn.transaction():
        conn.execute(sql.DELETE_POOL, {"pool_id": pool["pool_id"]})
        if items:
            save_pool(conn, pool, items)


def load_pool(conn: psycopg.Connection, pool_id: str | None,
              catalog: str | None = None) -> tuple[dict, list[dict]] | None:
    """(pool, items by position) of `pool_id`, or of the latest pool (of `catalog`, when given)
    when it is None or `latest`; None when there is no such pool."""
    with conn.cursor(row_factory=dict_row) as cur:
        if pool_id in (None, "latest") and catalog is not None:
            pool = cur.execute(sql.SELECT_LATEST_POOL_OF, {"catalog": catalog}).fetchone()
        elif pool_id in (None, "latest"):
            pool = cur.execute(sql.SELECT_LATEST_POOL).fetchone()
        else:
            pool = cur.execute(sql.SELECT_POOL, {"pool_id": pool_id}).fetchone()
        if pool is None:
            return None
        items = cur.execute(sql.SELECT_POOL_ITEMS, {"pool_id": pool["pool_id"]}).fetchall()
    return pool, items


def run_row(conn: psycopg.Connection, run_id: str) -> dict | None:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_RUN, {"run_id": run_id}).fetchone()


def add_implicit_judgments(conn: psycopg.Connection, catalog: str,
                           rows: list[JudgmentRow]) -> int:
    """Add implicit rows (source `implicit`, with their provenance) in one transaction; returns
    how many were new."""
    from psycopg.types.json import Jsonb

    added = 0
    with conn.transaction(), conn.cursor() as cur:
        for row in rows:
            cur.execute(sql.INSERT_IMPLICIT_JUDGMENT, {
                "catalog": catalog, "query_id": row.query_id, "doc_id": row.doc_id,
                "grade": row.grade, "judge": row.judge, "judged_at": row.judged_at,
                "note": row.note, "origin": row.origin, "provenance": Jsonb(row.provenance)})
            added += cur.fetchone() is not None
    return added


def load_implicit_judgments(conn: psycopg.Connection, catalog: str) -> list[JudgmentRow]:
    with conn.cursor(row_factory=dict_row) as cur:
        found = cur.execute(sql.SELECT_IMPLICIT_JUDGMENTS, {"catalog": catalog}).fetchall()
    return [JudgmentRow(query_id=r["query_id"], doc_id=r["doc_id"], grade=r["grade"],
                        judge=r["judge"], judged_at=r["judged_at"], source="implicit",
                        origin=r["origin"], provenance=r["provenance"]) for r in found]

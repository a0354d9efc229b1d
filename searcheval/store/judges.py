"""A model judge's rows in Postgres (migrations/010_judges.sql): its grades (judgments rows of
source `model`), its answer cache (`judge_answers`) and its labelling runs (`judge_runs`)."""

from __future__ import annotations

import json
import psycopg
from psycopg.rows import dict_row

from searcheval.store import sql

COPY_ABOVE = 200  # grade rows written through COPY beyond this many


def done_pairs(conn: psycopg.Connection, catalog: str, judge: str, judge_hash: str
               ) -> set[tuple[str, str, str | None]]:
    """(query, document, content hash) of the judge's live grades in the judgment set."""
    rows = conn.execute(sql.SELECT_JUDGE_DONE, {"catalog": catalog, "judge": judge,
                                                "judge_hash": judge_hash}).fetchall()
    return {(q, d, h) for q, d, h in rows}


def cached_answers(conn: psycopg.Connection, judge_hash: str, keys: list[tuple[str, str]]
                   ) -> dict[tuple[str, str], dict]:
    """(query key, content hash) -> the cached answer {grade, rationale, answered_at}."""
    if not keys:
        return {}
    with conn.cursor(row_factory=dict_row) as cur:
        found = cur.execute(sql.SELECT_JUDGE_ANSWERS, {
            "judge_hash": judge_hash, "query_keys": [k[0] for k in keys],
            "content_hashes": [k[1] for k in keys]}).fetchall()
    return {(r["query_key"], r["content_hash"]): r for r in found}


def save_answers(conn: psycopg.Connection, catalog: str, answers: list[dict],
                 grades: list[dict]) -> int:
    """In one transaction: new `answers` into the cache (each returns the stored answer, which
    becomes its grade row: an answer another run stored first wins) and the grade rows of
    `grades` (already cached answers). Returns how many grade rows were written."""
    written = 0
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        rows = list(grades)
        if answers:
            cur.executemany(sql.UPSERT_JUDGE_ANSWER, [a["answer"] for a in answers],
                            returning=True)
            for a in answers:
                stored = cur.fetchone()
                rows.append({**a["grade"], "grade": stored["grade"],
                             "rationale": stored["rationale"],
                             "judged_at": stored["answered_at"]})
                cur.nextset()
        if len(rows) > COPY_ABOVE:
            cur.execute(sql.CREATE_MODEL_JUDGMENTS_STAGING)
            with cur.copy(sql.COPY_MODEL_JUDGMENTS_STAGING) as copy:
                for r in rows:
                    copy.write_row([r["query_id"], r["doc_id"], r["grade"], r["judge"],
                                    r["judged_at"], r["guideline"], r["content_hash"],
                                    r["origin"], r["judge_hash"], r["prompt_version"],
                                    r["rationale"]])
            cur.execute(sql.INSERT_MODEL_JUDGMENTS_STAGED, {"catalog": catalog})
            written = cur.rowcount
        elif rows:
            cur.executemany(sql.INSERT_MODEL_JUDGMENT, [{"catalog": catalog, **r} for r in rows])
            written = cur.rowcount
    return written


def record_run(conn: psycopg.Connection, run: dict) -> int:
    with conn.transaction():
        return conn.execute(sql.INSERT_JUDGE_RUN, {
            **run, "resolved": json.dumps(run["resolved"], default=str),
            "errors": json.dumps(run["errors"][:50], default=str)}).fetchone()[0]


def latest_judges(conn: psycopg.Connection, catalog: str) -> dict[str, dict]:
    """judge -> {judge_hash, resolved, finished_at} of its latest labelling run of the set."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(sql.SELECT_LATEST_JUDGE_RUNS, {"catalog": catalog}).fetchall()
    return {r["judge"]: r for r in rows}


def judge_runs(conn: psycopg.Connection, catalog: str, judge: str) -> list[dict]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql.SELECT_JUDGE_RUNS, {"catalog": catalog, "judge": judge}).fetchall()


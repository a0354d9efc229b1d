"""Tuning studies and their trials in Postgres (`tune_studies`, `tune_trials`: migrations 011
and 012, the digest of the grades each trial was scored with).

A study is keyed by the sha256 of everything that defines it (space, sampler, seed, split share,
target, metric, configurations and collection hashes): running the same command again finds its
trials and resumes after the last one stored. Each trial is written as soon as it is scored.
"""

from __future__ import annotations

import math

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from searcheval.store import sql


def _finite(value):
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) \
        else value


def open_study(conn: psycopg.Connection, study_id: str, *, target: str, served: str,
               metric: str, definition: dict, split: dict) -> dict:
    """The study's row, made if new; an existing study keeps its own split (made before its
    first trial)."""
    conn.execute(sql.INSERT_TUNE_STUDY, {"study_id": study_id, "target": target,
                                         "served": served, "metric": metric,
                                         "definition": Jsonb(definition), "split": Jsonb(split)})
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql.SELECT_TUNE_STUDY, {"study_id": study_id})
        return cur.fetchone()


def save_trial(conn: psycopg.Connection, study_id: str, row: dict,
               grades: str | None = None) -> None:
    """A trial as scored; `grades`: the digest of the effective grades it was scored with."""
    conn.execute(sql.INSERT_TUNE_TRIAL, {
        "study_id": study_id, "number": row["number"], "overrides": Jsonb(row["overrides"]),
        "sha256": row["sha256"], "value": _finite(row["value"]),
        "metrics": Jsonb(row["metrics"]), "judged": _finite(row["judged"]),
        "bounds": Jsonb(row["bounds"]), "flagged": bool(row["flagged"]),
        "seconds": float(row["seconds"]), "grades": grades})


def rescore_trial(conn: psycopg.Connection, study_id: str, row: dict, grades: str) -> None:
    """A stored trial scored again with other grades (its configuration unchanged)."""
    conn.execute(sql.RESCORE_TUNE_TRIAL, {
        "study_id": study_id, "number": row["number"], "sha256": row["sha256"],
        "value": _finite(row["value"]), "metrics": Jsonb(row["metrics"]),
        "judged": _finite(row["judged"]), "bounds": Jsonb(row["bounds"]),
        "flagged": bool(row["flagged"]), "grades": grades})


def load_trials(conn: psycopg.Connection, study_id: str) -> list[dict]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql.SELECT_TUNE_TRIALS, {"study_id": study_id})
        return list(cur.fetchall())


def save_verdict(conn: psycopg.Connection, study_id: str, verdict: dict) -> None:
    conn.execute(sql.UPDATE_TUNE_VERDICT, {"study_id": study_id, "verdict": Jsonb(verdict)})

"""What document lookups returned, in Postgres (migrations/008_looked_up_documents.sql): per run
and configuration (`eval_run_documents`, what a diff of that run shows), and per judgment set and
document the versions the lookups reported (`document_versions`, what staleness, the pool and the
rating page read). Written in the run's publishing transaction; read without asking the engine
again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
import psycopg
from psycopg.rows import dict_row

from searcheval.judging.versions import Observed, Version, observe
from searcheval.store import sql


def _version(row: dict) -> Version:
    return Version(version=row["version"], content_hash=row["content_hash"],
                   first_seen=row["first_seen"], last_seen=row["last_seen"], title=row["title"],
                   text=row["text"])


def write_run_documents(cur: psycopg.Cursor, run_id: str, documents: Mapping[str, dict]) -> int:
    """COPY each configuration's looked-up documents (`evaluation.lookups` shape: {configuration:
    {"documents": {id: {title, text, content_hash}}, "gone": [ids]}}) on `cur`; returns rows."""
    count = 0
    with cur.copy(sql.COPY_RUN_DOCUMENTS) as copy:
        for configuration, found in sorted(documents.items()):
            for doc_id, d in sorted((found.get("documents") or {}).items()):
                copy.write_row((run_id, configuration, doc_id, False, d.get("title"),
                                d.get("text"), d.get("content_hash")))
                count += 1
            for doc_id in sorted(found.get("gone") or []):
                copy.write_row((run_id, configuration, doc_id, True, None, None, None))
                count += 1
    return count


def record_versions(cur: psycopg.Cursor, catalog: str, observed: Observed,
                    run_id: str | None) -> dict:
    """One more report of each observed document (`judging.versions.observe`), on `cur` inside
    the caller's transaction: {"new": versions started, "seen": versions seen again}."""
    if not observed.documents:
        return {"new": 0, "seen": 0}
    cur.execute(sql.DOCUMENTS_LOCK, {"lock_class": sql.DOCUMENTS_LOCK_CLASS, "catalog": catalog})
    ids = sorted(observed.documents)
    latest = _latest(cur, catalog, ids)
    new, seen = [], []
    for doc_id in ids:
        found = observed.documents[doc_id] or {}
        before = [latest[doc_id]] if doc_id in latest else []
        after = observe(before, found.get("content_hash"), observed.at, found.get("title"),
                        found.get("text"))[-1]
        params = {"catalog": catalog, "doc_id": doc_id, "version": after.version,
                  "content_hash": after.content_hash, "title": after.title, "text": after.text,
                  "seen": observed.at, "run_id": run_id}
        (seen if before and after.version == before[0].version else new).append(params)
    if new:
        cur.executemany(sql.INSERT_DOCUMENT_VERSION, new)
    if seen:
        cur.executemany(sql.TOUCH_DOCUMENT_VERSION, seen)
    return {"new": len(new), "seen": len(seen)}


def _latest(cur: psycopg.Cursor, catalog: str, doc_ids: list[str]) -> dict[str, Version]:
    rows = cur.execute(sql.SELECT_LATEST_DOCUMENT_VERSIONS,
                       {"catalog": catalog, "doc_ids": doc_ids}).fetchall()
    columns = [c.name for c in cur.description]
    return {r[0]: _version(dict(zip(columns, r))) for r in rows}


def latest_versions(conn: psycopg.Connection, catalog: str,
                    doc_ids: Iterable[str]) -> dict[str, Version]:
    """doc id -> the latest version the lookups reported (documents never looked up: absent)."""
    with conn.cursor() as cur:
        return _latest(cur, catalog, sorted(set(doc_ids)))


def load_versions(conn: psycopg.Connection, catalog: str,
                  doc_ids: Iterable[str]) -> dict[str, list[Version]]:
    """doc id -> every version the lookups reported, oldest first."""
    out: dict[str, list[Version]] = {}
    with conn.cursor(row_factory=dict_row) as cur:
        for row in cur.execute(sql.SELECT_DOCUMENT_VERSIONS,
                               {"catalog": catalog, "doc_ids": sorted(set(doc_ids))}):
            out.setdefault(row["doc_id"], []).append(_version(row))
    return out


def load_version(conn: psycopg.Connection, catalog: str, doc_id: str,
                 version: int) -> Version | None:
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(sql.SELECT_DOCUMENT_VERSION, {"catalog": catalog, "doc_id": doc_id,
                                                        "version": version}).fetchone()
    return None if row is None else _version(row)


def run_documents(conn: psycopg.Connection, run_id: str) -> dict[str, dict[str, dict]]:
    """configuration -> doc id -> {title, text, content_hash, gone} of one run's lookups."""
    out: dict[str, dict[str, dict]] = {}
    with conn.cursor(row_factory=dict_row) as cur:
        for row in cur.execute(sql.SELECT_RUN_DOCUMENTS, {"run_id": run_id}):
            out.setdefault(row["configuration"], {})[row["doc_id"]] = {
                "title": row["title"], "text": row["text"], "content_hash": row["content_hash"],
                "gone": row["gone"]}
    return out

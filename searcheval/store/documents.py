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

from searcheval.types import Version
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


def lock_versions(cur: psycopg.Cursor, catalog: str) -> None:
    """The catalog's document versions locked for this transaction (one writer at a time)."""
    cur.execute(sql.DOCUMENTS_LOCK, {"lock_class": sql.DOCUMENTS_LOCK_CLASS, "catalog": catalog})


def write_versions(cur: psycopg.Cursor, catalog: str, new: list[tuple[str, Version]],
                   seen: list[tuple[str, Version]], at, run_id: str | None) -> None:
    """Versions started (`new`) and versions seen again (`seen`), as (doc id, version), at `at`,
    on `cur` (judging.versions.record_versions decides which is which)."""
    def params(doc_id: str, v: Version) -> dict:
        return {"catalog": catalog, "doc_id": doc_id, "version": v.version,
                "content_hash": v.content_hash, "title": v.title, "text": v.text, "seen": at,
                "run_id": run_id}

    if new:
        cur.executemany(sql.INSERT_DOCUMENT_VERSION, [params(d, v) for d, v in new])
    if seen:
        cur.executemany(sql.TOUCH_DOCUMENT_VERSION, [params(d, v) for d, v in seen])


def latest_on(cur: psycopg.Cursor, catalog: str, doc_ids: list[str]) -> dict[str, Version]:
    """doc id -> its latest version, read on `cur` (inside the caller's transaction)."""
    return _latest(cur, catalog, doc_ids)


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

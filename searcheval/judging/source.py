"""The judgments an evaluation scores with: the rows in Postgres plus the dataset's own judgments
file, through the effective-grade rule.

The dataset's file (the fixtures' `judgments.csv`, BEIR qrels, WANDS labels, a mapping's table)
seeds the table: its rows are the catalog's seed rows. `preview_judgments` reads the stored rows
and puts the file's rows in place of the stored seed rows *in memory*, so that validation sees
exactly what the table will hold, and a refused run writes nothing; `seed_collection_judgments`
writes the seed once the inputs are accepted.

Without a catalog (the engine holds the documents), the versions a document lookup reported
(`store.documents`, `judging.versions`) say which judgments are of a document that changed or is
gone; a run passes what it has just observed (`observed`), which counts as the latest report
before it is written.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import psycopg

from searcheval.errors import InputError
from searcheval.judging.judgments import (Effective, Rule, effective_judgments, judgment_set,
                                          rows_from_collection)
from searcheval.judging.versions import Observed, applied
from searcheval.store import documents as looked_up
from searcheval.store import judgments as store
from searcheval.types import Collection

_JUDGMENT_SOURCES = ("judgments", "qrels", "labels", "mapping")


def _origin(collection: Collection) -> str | None:
    for key in _JUDGMENT_SOURCES:
        if key in collection.sources:
            return collection.sources[key].name
    return None


def seed_rows(collection: Collection):
    return rows_from_collection(collection.judgments, origin=_origin(collection))


def _rows(conn: psycopg.Connection, collection: Collection):
    stored = store.load_judgment_rows(conn, judgment_set(collection), include_seed=False)
    queries = {q.id for q in collection.queries}
    return [r for r in stored + seed_rows(collection) if r.query_id in queries]


def judged_documents(conn: psycopg.Connection, collection: Collection) -> set[str]:
    """The ids of every document a golden query has a judgment of (stored rows and the file)."""
    return {r.doc_id for r in _rows(conn, collection)}


def preview_judgments(conn: psycopg.Connection, collection: Collection, rule: Rule, *,
                      max_age_days: float | None, now: datetime | None = None,
                      observed: Observed | None = None) -> tuple[Collection, Effective]:
    """(the collection with its effective judgments, the Effective set) from the stored rows and
    the dataset's file, without writing anything. Only golden queries' judgments are kept; the
    collection's digests gain `judgments` (sha256 of the effective set). Without a catalog, the
    stored versions of the judged documents, with `observed` added, tell staleness."""
    rows = _rows(conn, collection)
    if rule.kind == "judge" and not any(r.judge == rule.judge for r in rows):
        judges = sorted({r.judge for r in rows})
        raise InputError(f"judge {rule.judge!r} has no judgment of {judgment_set(collection)}; its judges "
                         f"are {', '.join(judges) or 'none'}", field="judgment_rule")
    versions = None
    if not collection.has_catalog:
        versions = looked_up.load_versions(conn, judgment_set(collection),
                                           {r.doc_id for r in rows})
        if observed is not None:
            versions = applied(observed, versions)
    effective = effective_judgments(rows, rule, collection.resources, now=now,
                                    max_age_days=max_age_days, catalog=collection.has_catalog,
                                    versions=versions)
    digests = {**collection.digests, "judgments_effective": effective.digest()}
    return replace(collection, judgments=effective.judgments, digests=digests), effective


def seed_collection_judgments(conn: psycopg.Connection, collection: Collection) -> dict:
    """The dataset's own judgments as the catalog's seed rows (`store.judgments.seed_judgments`)."""
    return store.seed_judgments(conn, judgment_set(collection), seed_rows(collection))

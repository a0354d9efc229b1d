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

Model grades (`judging.counting`): a model judge's rows count only while its human audit holds
(`judging.audit.judge_audits`, with the audit policy of the judge's latest labelling run), and
only on pairs no person graded: where a human or an imported grade exists, it is the grade. Only
the judge's current identity counts (that of its latest labelling run): grades made under another
prompt, model or parameters are superseded, and a new identity is audited afresh. Rows that do not
count are left out of the effective grades, and `Effective.model_judges` says why.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import psycopg

from searcheval.errors import InputError
from searcheval.judging.judgments import (Effective, JudgmentRow, Rule, effective_judgments,
                                          judgment_set, rows_from_collection)
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


#: the datasets whose own judgments are a public benchmark's (BEIR qrels, WANDS labels): by
#: default only those count, so the published numbers are reproduced exactly
BENCHMARK_JUDGMENTS = ("qrels", "labels")


def counted_sources(collection: Collection, given=None,
                    given_from: str | None = None) -> tuple[str | tuple[str, ...], str]:
    """(which judgments count, where that came from): the run parameter, else the dataset's
    setting (`judgment_sources`), else `dataset` for a public benchmark's qrels or labels and
    `all` for a team's own data (the fixtures' layout, a mapping). `given_from` says where a
    given value came from (a project setting), when not from the caller."""
    from searcheval.io.settings import check_judgment_sources

    if given is not None:
        return check_judgment_sources(given), given_from or "run parameter judgment_sources"
    declared = getattr(collection.settings, "judgment_sources", None)
    if declared is not None:
        return declared, f"dataset setting in {collection.settings.source}"
    if any(key in collection.sources for key in BENCHMARK_JUDGMENTS):
        return "dataset", "default for a benchmark's qrels"
    return "all", "default for a team's own judgments"


def describe_sources(counted: str | tuple[str, ...]) -> str:
    if counted == "dataset":
        return "the dataset's own judgments only"
    if counted == "all":
        return "the dataset's own judgments and every stored grade (imports, rating page, judges)"
    return f"the dataset's own judgments and stored grades of source {', '.join(counted)}"


def collection_rows(conn: psycopg.Connection, collection: Collection):
    """Every live row of the collection's golden queries: the stored ones and the file's."""
    return _rows(conn, collection)


def _rows(conn: psycopg.Connection, collection: Collection, counted="all"):
    stored = [] if counted == "dataset" else \
        store.load_judgment_rows(conn, judgment_set(collection), include_seed=False)
    if counted not in ("dataset", "all"):
        stored = [r for r in stored if r.source in counted]
    queries = {q.id for q in collection.queries}
    return [r for r in stored + seed_rows(collection) if r.query_id in queries]


def judge_settings(conn: psycopg.Connection, catalog: str) -> tuple[dict, dict]:
    """({judge: its AuditPolicy}, {judge: its current identity}), as each judge's latest
    labelling run of the set recorded them."""
    from searcheval.judging.judges import AuditPolicy
    from searcheval.store import judges as judge_store

    policies, hashes = {}, {}
    for name, run in judge_store.latest_judges(conn, catalog).items():
        audit = (run.get("resolved") or {}).get("audit") or {}
        policies[name] = AuditPolicy(**{k: audit[k] for k in ("share", "minimum", "floor", "seed")
                                        if k in audit})
        hashes[name] = run["judge_hash"]
    return policies, hashes


def counted_rows(rows: list[JudgmentRow], collection: Collection, policies: dict,
                 current: dict | None = None) -> tuple[list[JudgmentRow], dict]:
    """(the rows that count, {model judge: its audit and standing}) (module docstring). A model
    row made by another identity of its judge than the current one (`current`: judge -> hash;
    another prompt, model or parameters) is superseded: neither audited nor counted."""
    from searcheval.judging.audit import judge_audits

    if not any(r.source == "model" for r in rows):
        return rows, {}
    current = current or {}
    superseded = [r for r in rows if r.source == "model" and r.judge_hash is not None
                  and r.judge in current and r.judge_hash != current[r.judge]]
    if superseded:
        gone = {id(r) for r in superseded}
        rows = [r for r in rows if id(r) not in gone]
    audits = judge_audits(rows, {q.id: q.category for q in collection.queries},
                          collection.grade_scale, policies)
    by_people = {(r.query_id, r.doc_id) for r in rows
                 if r.source != "model" and r.retracted_at is None}
    kept = [r for r in rows if r.source != "model"
            or (audits.get(r.judge, {}).get("counts") and (r.query_id, r.doc_id) not in by_people)]
    for judge, audit in audits.items():
        audit["pairs_counted"] = len({(r.query_id, r.doc_id) for r in kept
                                      if r.judge == judge and r.source == "model"})
        audit["judge_hash"] = current.get(judge)
        audit["superseded_rows"] = sum(1 for r in superseded if r.judge == judge)
    return kept, audits


def grade_sources(rows: list[JudgmentRow], effective: Effective) -> dict:
    """pair -> the source its effective grade rests on: human, import or model:<judge>."""
    source_of = {}
    for r in rows:
        source_of.setdefault(r.judge, r.source)
    out = {}
    for pair, grades in effective.latest.items():
        sources = {source_of.get(j, "import") for j in grades}
        if sources == {"model"}:
            out[pair] = "model:" + ",".join(sorted(grades))
        elif "human" in sources:
            out[pair] = "human"
        else:
            out[pair] = "import"
    return out


def judged_documents(conn: psycopg.Connection, collection: Collection) -> set[str]:
    """The ids of every document a golden query has a judgment of (stored rows and the file)."""
    return {r.doc_id for r in _rows(conn, collection)}


def preview_judgments(conn: psycopg.Connection, collection: Collection, rule: Rule, *,
                      max_age_days: float | None, now: datetime | None = None,
                      observed: Observed | None = None,
                      counted: str | tuple[str, ...] = "all",
                      counted_from: str = "default") -> tuple[Collection, Effective]:
    """(the collection with its effective judgments, the Effective set) from the stored rows and
    the dataset's file, without writing anything. Only golden queries' judgments are kept; the
    collection's digests gain `judgments` (sha256 of the effective set). Without a catalog, the
    stored versions of the judged documents, with `observed` added, tell staleness. `counted`
    (`counted_sources`) says which stored rows count beside the dataset's own."""
    rows, model_judges = counted_rows(_rows(conn, collection, counted), collection,
                                      *judge_settings(conn, judgment_set(collection)))
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
    effective.counted, effective.counted_from = counted, counted_from
    effective.model_judges = model_judges
    effective.rests_on = grade_sources(rows, effective)
    digests = {**collection.digests, "judgments_effective": effective.digest()}
    return replace(collection, judgments=effective.judgments, digests=digests), effective


def seed_collection_judgments(conn: psycopg.Connection, collection: Collection) -> dict:
    """The dataset's own judgments as the catalog's seed rows (`store.judgments.seed_judgments`)."""
    return store.seed_judgments(conn, judgment_set(collection), seed_rows(collection))

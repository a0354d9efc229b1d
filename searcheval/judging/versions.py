"""Versions of an engine's documents, as its document lookup reported them, and the staleness
they tell of a judgment (for a dataset without a catalog: the engine holds the documents).

Every run that looks documents up is one observation per document: its content hash (the
lookup's `content_hash` field, else the sha256 of the whole document: `rankers.documents`), or
gone. Equal answers in a row are one *version* (a span with when it was first and last seen); a
changed answer starts the next version, so a hash that goes A, B, A is three versions.

Which version a judgment is of:
- a judgment that recorded a hash (the rating page records the hash of the version it showed) is
  of that hash;
- one that did not (an import, a dataset's own judgments file) is of the first version the lookup
  reported at or after the judgment was made: the first version last seen at or after `judged_at`
  (a judgment without a time: the first version ever reported). A judgment made after every
  report so far is of the version the next report sees, so it is never stale until then.

A judgment is stale (`document-changed`) when the version it is of has another hash than the
latest one, and (`document-gone`) when the latest report says the document is gone. A report that
failed (a timeout, an HTTP 500) is no report: the latest one that answered counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timezone

from searcheval.types import Observed, Version  # the nouns, re-exported here


def _utc(ts: datetime | None) -> datetime | None:
    if ts is None or ts.tzinfo is not None:
        return ts
    return ts.replace(tzinfo=timezone.utc)


def observe(versions: list[Version], content_hash: str | None, at: datetime,
            title: str | None = None, text: str | None = None) -> list[Version]:
    """`versions` after one more report (`content_hash` None: gone): the latest version seen again,
    or a new one."""
    at = _utc(at)
    if versions and versions[-1].content_hash == content_hash:
        last = versions[-1]
        return [*versions[:-1], replace(last, last_seen=max(_utc(last.last_seen), at),
                                        title=title, text=text)]
    number = versions[-1].version + 1 if versions else 1
    return [*versions, Version(number, content_hash, at, at, title, text)]


def judged_hash(content_hash: str | None, judged_at: datetime | None,
                versions: list[Version]) -> str | None:
    """The hash of the version a judgment is of (module docstring); None when no report at or
    after it was made has seen the document."""
    if content_hash is not None:
        return content_hash
    judged = _utc(judged_at)
    for v in versions:
        if v.gone:
            continue
        if judged is None or _utc(v.last_seen) >= judged:
            return v.content_hash
    return None


def lookup_stale_reason(content_hash: str | None, judged_at: datetime | None,
                        versions: list[Version] | None) -> str | None:
    """`document-gone`, `document-changed` or None (fresh, or never looked up)."""
    if not versions:
        return None
    latest = versions[-1]
    if latest.gone:
        return "document-gone"
    judged = judged_hash(content_hash, judged_at, versions)
    if judged is not None and judged != latest.content_hash:
        return "document-changed"
    return None


def applied(observed: Observed, stored: Mapping[str, list[Version]]) -> dict[str, list[Version]]:
    """The stored versions with `observed` added (in memory: nothing is written)."""
    out = {doc: list(versions) for doc, versions in stored.items()}
    for doc, found in observed.documents.items():
        found = found or {}
        out[doc] = observe(out.get(doc, []), found.get("content_hash"), observed.at,
                           found.get("title"), found.get("text"))
    return out


def record_versions(cur, catalog: str, observed: Observed, run_id: str | None) -> dict:
    """One more report of each observed document (`observe`), written on `cur` inside the
    caller's transaction (store.documents): {"new": versions started, "seen": versions seen
    again}."""
    from searcheval.store import documents

    if not observed.documents:
        return {"new": 0, "seen": 0}
    documents.lock_versions(cur, catalog)
    ids = sorted(observed.documents)
    latest = documents.latest_on(cur, catalog, ids)
    new, seen = [], []
    for doc_id in ids:
        found = observed.documents[doc_id] or {}
        before = [latest[doc_id]] if doc_id in latest else []
        after = observe(before, found.get("content_hash"), observed.at, found.get("title"),
                        found.get("text"))[-1]
        (seen if before and after.version == before[0].version else new).append((doc_id, after))
    documents.write_versions(cur, catalog, new, seen, observed.at, run_id)
    return {"new": len(new), "seen": len(seen)}

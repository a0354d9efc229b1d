"""A run's document lookups (`rankers.documents`): which documents each configuration's lookup is
asked for, what the run observed, and the staleness a lookup tells.

Configurations whose lookups are the same (`rankers.documents.lookup_key`) share one: each
document is asked for once per run. The judged documents are looked up before the judgments are
read (`look_up_judged`), so the effective grades already leave out what changed or is gone; the
top results of every query after the search (`look_up_results`), for the report's titles and for
what the diff, the pool and the rating page show.

What the run observed of a document (`Lookups.observed`, written as a version by
`store.documents`): the answer of the served configuration's lookup when it has one, else of the
first configuration (in the run's order) whose lookup answered; a failed request is no answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from searcheval.evaluation.validation import StaleJudgment, ValidationReport
from searcheval.judging.versions import Observed
from searcheval.rankers.configs import Configuration
from searcheval.types import Collection, RankedRun

LOOKUP_TOP = 3  # results per query whose titles the report shows


@dataclass
class Lookups:
    """What a run's distinct lookups returned so far."""

    at: datetime
    params: dict[str, dict] = field(default_factory=dict)  # key -> the lookup's parameters
    by_configuration: dict[str, str] = field(default_factory=dict)  # configuration -> key
    found: dict[str, dict] = field(default_factory=dict)  # key -> look_up's answer, merged
    asked: dict[str, set[str]] = field(default_factory=dict)  # key -> ids asked for

    def ask(self, ids_by_key: dict[str, Iterable[str]]) -> None:
        """Look up the ids each lookup has not been asked for yet."""
        from searcheval.rankers.documents import look_up

        for key, ids in ids_by_key.items():
            todo = set(ids) - self.asked[key]
            if not todo:
                continue
            self.asked[key] |= todo
            answer = look_up(self.params[key], todo)
            found = self.found[key]
            found["documents"].update(answer["documents"])
            found["gone"] = sorted(set(found["gone"]) | set(answer["gone"]))
            found["failed"].update(answer["failed"])

    def observed(self) -> Observed:
        """Per document, the answer that counts (module docstring); None: gone."""
        out: dict[str, dict | None] = {}
        for key in self.found:  # in priority order (lookups_of)
            found = self.found[key]
            for doc_id, d in found["documents"].items():
                if doc_id not in out:
                    out[doc_id] = {"content_hash": d["content_hash"], "title": d.get("title"),
                                   "text": d.get("text")}
            for doc_id in found["gone"]:
                if doc_id not in out:
                    out[doc_id] = None
        return Observed(at=self.at, documents=out)


def any_lookup(configurations: list[Configuration]) -> bool:
    return any(c.documents for c in configurations)


def lookups_of(configurations: list[Configuration], served: str | None = None,
               now: datetime | None = None) -> Lookups:
    """The distinct lookups of `configurations`, the served configuration's first."""
    from searcheval.rankers.documents import lookup_key

    lookups = Lookups(at=now or datetime.now(timezone.utc))
    ordered = sorted(configurations, key=lambda c: c.name != served)  # stable: run order
    for c in ordered:
        if not c.documents:
            continue
        key = lookup_key(c.documents)
        lookups.by_configuration[c.name] = key
        if key not in lookups.params:
            lookups.params[key] = c.documents
            lookups.found[key] = {"documents": {}, "gone": [], "failed": {}}
            lookups.asked[key] = set()
    return lookups


def look_up_judged(configurations: list[Configuration], served: str | None,
                   judged: Iterable[str], now: datetime | None = None) -> Lookups:
    """Every lookup of `configurations` asked for the judged documents."""
    lookups = lookups_of(configurations, served, now)
    judged = set(judged)
    lookups.ask({key: judged for key in lookups.params})
    return lookups


def look_up_results(lookups: Lookups, runs: dict[str, RankedRun],
                    configurations: list[Configuration], collection: Collection,
                    top: int = LOOKUP_TOP) -> dict:
    """Each lookup asked for the top `documents.depth` results of every query of its
    configurations; returns per configuration what the report shows and the run keeps:
    {"looked_up", "gone", "failed", "top" (the first `top` results with titles), "documents"}."""
    judged = {j.doc_id for j in collection.judgments}
    wanted: dict[str, dict[str, set[str]]] = {}  # key -> configuration -> ids
    for c in configurations:
        key = lookups.by_configuration.get(c.name)
        if key is None or c.name not in runs:
            continue
        depth = lookups.params[key]["depth"]
        ids = set(judged)
        for hits in runs[c.name].results.values():
            ids.update(d for d, _ in hits[:depth])
        wanted.setdefault(key, {})[c.name] = ids
    lookups.ask({key: set().union(*by_name.values()) for key, by_name in wanted.items()})
    out = {}
    for key, by_name in wanted.items():
        found = lookups.found[key]
        for name, ids in by_name.items():
            documents = {d: v for d, v in found["documents"].items() if d in ids}
            shown = {qid: [d for d, _ in hits[:top]] for qid, hits in runs[name].results.items()}
            out[name] = {
                "looked_up": len(ids),
                "gone": sorted(d for d in found["gone"] if d in ids),
                "failed": {d: v for d, v in found["failed"].items() if d in ids},
                "top": {qid: [{"id": d, "title": (documents.get(d) or {}).get("title")}
                              for d in shown_ids] for qid, shown_ids in shown.items()},
                "documents": documents}
    return {c.name: out[c.name] for c in configurations if c.name in out}


def lookup_staleness(report: ValidationReport, documents: dict,
                     collection: Collection) -> ValidationReport:
    """The validation report with the judgments a lookup found gone, or (with a catalog) changed
    against the catalog's hash, added as stale (each judgment once, the reason found first
    kept). Without a catalog, the effective grades already hold these (`judging.versions`)."""
    from searcheval.rankers.documents import stale_from_lookup

    if not documents:
        return report
    hashes = {r.id: r.content_hash for r in collection.resources}
    seen = {(s.query_id, s.doc_id) for s in report.stale}
    stale = list(report.stale)
    for found in documents.values():
        lookup = {"gone": found["gone"], "documents": found["documents"]}
        for qid, doc_id, reason in stale_from_lookup(lookup, collection.judgments, hashes):
            if (qid, doc_id) not in seen:
                seen.add((qid, doc_id))
                stale.append(StaleJudgment(qid, doc_id, reason))
    return replace(report, stale=stale)

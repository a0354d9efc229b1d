"""The nouns of an evaluation, without any I/O: documents, queries, judgments, collections and runs.

At the edges a run is `dict[query_id, dict[doc_id, score]]` and judgments are
`dict[query_id, dict[doc_id, grade]]` (the shape ranx, ir_measures and BEIR share); a `RankedRun`
keeps the rank order and per-query latency of one configuration.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from searcheval.errors import InputError

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]


@dataclass(frozen=True, slots=True)
class Resource:
    """One searchable document: a paid API resource, or a BEIR document (no commerce fields)."""

    id: str
    name: str
    description: str
    tags: tuple[str, ...] = ()
    network: str | None = None
    asset: str | None = None
    price_usd: float | None = None
    settled_30d: int = 0
    success_rate: float | None = None
    updated_at: datetime | None = None
    #: any other field of the source kept as it came (a product's class, category path, features,
    #: ratings): shown, never searched by the built-in rankers
    fields: tuple[tuple[str, str], ...] = ()
    #: `content_hash`, computed once: a run asks for it many times (the catalog seed, the BM25
    #: index's key, lookups, judgments) and on SciFact hashing 5,183 documents each time cost
    #: seconds of a warm run. Not a field of the dataclass's comparisons, repr or constructor.
    _content_hash: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The text that is embedded and shown: name, description and tags."""
        parts = [self.name, self.description]
        if self.tags:
            parts.append(" ".join(self.tags))
        return "\n".join(p for p in parts if p)

    @property
    def content_hash(self) -> str:
        """sha256 over every field a judgment depends on; changes when the listing changes."""
        if self._content_hash is not None:
            return self._content_hash
        values = [self.id, self.name, self.description, list(self.tags), self.network, self.asset,
                  self.price_usd]
        if self.fields:  # absent from the hash when empty, so older catalogs keep theirs
            values.append([list(f) for f in self.fields])
        payload = json.dumps(values, ensure_ascii=False)
        digest = hashlib.sha256(payload.encode("utf-8")).hexdigest()
        object.__setattr__(self, "_content_hash", digest)  # frozen: every field is fixed
        return digest


@dataclass(frozen=True)
class Filters:
    """A query's hard constraints; None means unconstrained."""

    network: str | None = None
    asset: str | None = None
    max_price_usd: float | None = None

    def admits(self, resource: Resource) -> bool:
        if self.network is not None and resource.network != self.network:
            return False
        if self.asset is not None and resource.asset != self.asset:
            return False
        if self.max_price_usd is not None:
            if resource.price_usd is None or resource.price_usd > self.max_price_usd:
                return False
        return True

    @property
    def empty(self) -> bool:
        return self.network is None and self.asset is None and self.max_price_usd is None


@dataclass(frozen=True)
class Query:
    """A golden query. `intent` and `persona` are notes for the people who judge and read the
    results (what the user wants, who they are): kept, shown in the report, and never sent to a
    search backend unless its configuration asks for them (`notes`). `query_class` is the class
    the data gives a query besides its category (an automatic segment)."""

    id: str
    text: str
    category: str = "all"
    filters: Filters = field(default_factory=Filters)
    intent: str = ""
    persona: str = ""
    query_class: str | None = None

    def notes(self, names: tuple[str, ...] | list[str] = ("intent", "persona")) -> dict[str, str]:
        """The notes a backend opted in to, by name (`intent`, `persona`), the empty ones left out."""
        unknown = [n for n in names if n not in NOTE_FIELDS]
        if unknown:
            raise InputError(f"unknown query note(s) {', '.join(map(repr, unknown))}; expected "
                             f"{', '.join(NOTE_FIELDS)}", field="notes")
        return {n: getattr(self, n) for n in names if getattr(self, n)}


NOTE_FIELDS = ("intent", "persona")


@dataclass(frozen=True, slots=True)  # slots: a quarter of a million of them load fast and small
class Judgment:
    query_id: str
    doc_id: str
    grade: int
    judged_at: datetime | None = None
    judge: str | None = None
    line: int | None = None  # where it came from, for messages


@dataclass(frozen=True)
class DatasetSettings:
    """The conventions a dataset declares for itself (`searcheval.yaml` beside its files, or the
    `settings:` block of a mapping); None means "not declared" (a flag or the default decides).
    `source` names where they were read, for the report and the alerts."""

    gain: str | None = None  # exponential | linear
    relevance_level: int | None = None  # lowest grade that counts as relevant for binary metrics
    no_relevant: str | None = None  # one | zero | skip
    grade_scale: tuple[int, int] | None = None  # lowest and highest grade allowed
    coverage_floor: float | None = None  # judged share of the top k below which a run alerts
    grade_map: tuple[tuple[str, int], ...] | None = None  # text label -> grade
    source: str | None = None
    name: str | None = None  # the dataset's declared name: its catalog's identity in Postgres
    # which judgments count: "dataset" (its own qrels/labels only), "all", or sources beside them
    judgment_sources: str | tuple[str, ...] | None = None

    def declared(self) -> dict[str, object]:
        """The settings the dataset declares, by name."""
        names = ("gain", "relevance_level", "no_relevant", "grade_scale", "coverage_floor",
                 "grade_map")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}


def resources_fingerprint(resources) -> str:
    """`sha256:` and 32 hex digits over every resource's id and content hash, in id order."""
    digest = hashlib.sha256()
    for r in sorted(resources, key=lambda r: r.id):
        digest.update(f"{r.id}\t{r.content_hash}\n".encode("utf-8"))
    return f"sha256:{digest.hexdigest()[:32]}"


DATA_CATEGORIES = "data"  # Collection.categories: whatever categories the data has
UNCLASSIFIED = "unclassified"  # the category of a query whose data gives it none


@dataclass
class Collection:
    """Everything one evaluation reads. `sources` names the files it came from (for messages and
    the input hashes of the run history); `settings` the conventions the dataset declares;
    `notes` what the loader accepted that a reader should know (e.g. qrels without a header);
    `categories` the known category set: a tuple when the format fixes one (the fixtures' five,
    BEIR's "all"), `DATA_CATEGORIES` when the categories are the data's own (WANDS' query classes,
    a mapping's category column), None to let validation infer it (a collection built in code);
    `provenance` where the loader took its conventions from (grade scale, grade map)."""

    name: str
    resources: list[Resource]
    queries: list[Query]
    judgments: list[Judgment]
    grade_scale: tuple[int, int] = (0, 3)
    sources: dict[str, Path] = field(default_factory=dict)
    settings: DatasetSettings = field(default_factory=DatasetSettings)
    notes: list[str] = field(default_factory=list)
    categories: tuple[str, ...] | str | None = None
    provenance: dict[str, str] = field(default_factory=dict)  # loader-level convention -> where from
    grade_map: tuple[tuple[str, int], ...] | None = None  # text label -> grade, as the loader applied it
    digests: dict[str, str] = field(default_factory=dict)  # sha256 of inputs that are no file (SQL)
    #: False when the dataset has no documents of its own (queries and judgments only): the search
    #: engine holds them; results then count as judged or unjudged, never as unknown documents
    has_catalog: bool = True
    declared_name: str | None = None  # a name the dataset declares for itself (never a folder's)
    fingerprint: str | None = None  # resources_fingerprint, computed once by load_collection

    @property
    def catalog_id(self) -> str:
        """The catalog's identity in Postgres: the dataset's declared name, else the fingerprint
        of its resources' content; never the folder's base name (two folders both called
        `fixtures` are two catalogs unless they hold the same resources)."""
        if self.declared_name:
            return self.declared_name
        return self.fingerprint or resources_fingerprint(self.resources)

    def qrels(self) -> Qrels:
        """Judgments in the shape ranx, ir_measures and BEIR share: {query: {doc: grade}}."""
        out: Qrels = {q.id: {} for q in self.queries}
        for j in self.judgments:
            out.setdefault(j.query_id, {})[j.doc_id] = j.grade
        return out


@dataclass
class RankedRun:
    """One configuration's results: query -> [(doc_id, score)] best first, and latency per query.

    `errors` holds the queries that failed (query -> {"cause", "detail", "attempts"}): a failed
    query has no result list and is never scored as an empty one. `timing` holds what a backend
    measured besides the latency (query -> {"round_trip_ms"} for http)."""

    configuration: str
    results: dict[str, list[tuple[str, float]]]
    latency_ms: dict[str, float] = field(default_factory=dict)
    errors: dict[str, dict] = field(default_factory=dict)
    timing: dict[str, dict] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)  # {"requests", "cpu_s"}: what it cost

    def as_run(self) -> Run:
        return {q: {d: float(s) for d, s in docs} for q, docs in self.results.items()}

    def top_ids(self, query_id: str, k: int) -> list[str]:
        return [d for d, _ in self.results.get(query_id, [])[:k]]


@dataclass(frozen=True)
class JudgmentRow:
    """One row of the judgments table."""

    query_id: str
    doc_id: str
    grade: int
    judge: str
    judged_at: datetime | None = None
    source: str = "import"
    guideline: str | None = None
    note: str | None = None
    content_hash: str | None = None
    origin: str | None = None
    id: int | None = None  # the database's, for ordering rows recorded at the same time
    seed: bool = False
    retracted_at: datetime | None = None
    recorded_at: datetime | None = None
    provenance: dict | None = None  # an implicit row's maker: click model, parameters, window
    judge_hash: str | None = None  # a model judge's identity (judging.judges)
    prompt_version: str | None = None
    rationale: str | None = None

    def to_dict(self) -> dict:
        out = {"query_id": self.query_id, "doc_id": self.doc_id, "grade": self.grade,
               "judge": self.judge,
               "judged_at": self.judged_at.isoformat() if self.judged_at else None,
               "source": self.source, "guideline": self.guideline, "note": self.note}
        if self.provenance is not None:
            out["provenance"] = self.provenance
        if self.judge_hash is not None:
            out.update(judge_hash=self.judge_hash, prompt_version=self.prompt_version,
                       rationale=self.rationale, content_hash=self.content_hash)
        return out


@dataclass(frozen=True)
class Version:
    """One span of equal answers of the lookup about one document."""

    version: int
    content_hash: str | None  # None: the lookup said the document is gone
    first_seen: datetime
    last_seen: datetime
    title: str | None = None
    text: str | None = None

    @property
    def gone(self) -> bool:
        return self.content_hash is None


@dataclass
class Observed:
    """What one run's lookups reported (`evaluation.lookups`): per document its content hash,
    title and text, or None when it is gone; `at` is when the run looked."""

    at: datetime
    documents: dict[str, dict | None] = field(default_factory=dict)

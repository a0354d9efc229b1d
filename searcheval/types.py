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

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]


@dataclass(frozen=True)
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
        payload = json.dumps(
            [self.id, self.name, self.description, list(self.tags), self.network, self.asset,
             self.price_usd],
            ensure_ascii=False,
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


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
    id: str
    text: str
    category: str = "all"
    filters: Filters = field(default_factory=Filters)
    intent: str = ""


@dataclass(frozen=True)
class Judgment:
    query_id: str
    doc_id: str
    grade: int
    judged_at: datetime | None = None
    judge: str | None = None
    line: int | None = None  # where it came from, for messages


@dataclass
class Collection:
    """Everything one evaluation reads. `sources` names the files it came from (for messages and
    the input hashes of the run history)."""

    name: str
    resources: list[Resource]
    queries: list[Query]
    judgments: list[Judgment]
    grade_scale: tuple[int, int] = (0, 3)
    sources: dict[str, Path] = field(default_factory=dict)

    def qrels(self) -> Qrels:
        """Judgments in the shape ranx, ir_measures and BEIR share: {query: {doc: grade}}."""
        out: Qrels = {q.id: {} for q in self.queries}
        for j in self.judgments:
            out.setdefault(j.query_id, {})[j.doc_id] = j.grade
        return out


@dataclass
class RankedRun:
    """One configuration's results: query -> [(doc_id, score)] best first, and latency per query."""

    configuration: str
    results: dict[str, list[tuple[str, float]]]
    latency_ms: dict[str, float] = field(default_factory=dict)

    def as_run(self) -> Run:
        return {q: {d: float(s) for d, s in docs} for q, docs in self.results.items()}

    def top_ids(self, query_id: str, k: int) -> list[str]:
        return [d for d, _ in self.results.get(query_id, [])[:k]]

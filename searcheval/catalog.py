"""The evaluated collection: resources (documents), golden queries and graded judgments.

Loaders for the seed fixtures (`fixtures/catalog.json`, `golden_queries.json`, `judgments.csv`)
and for test collections in BEIR layout (`corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`).
Every refusal is an `InputError` naming the file, line and field.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from searcheval.errors import InputError

CATEGORIES = ("exact-name", "paraphrase", "filtered", "no-result", "adversarial")
FIXTURE_GRADES = (0, 3)


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
    """Everything one evaluation reads."""

    name: str
    resources: list[Resource]
    queries: list[Query]
    judgments: list[Judgment]
    grade_scale: tuple[int, int] = FIXTURE_GRADES
    sources: dict[str, Path] = field(default_factory=dict)

    def qrels(self) -> dict[str, dict[str, int]]:
        """Judgments in the shape ranx, ir_measures and BEIR share: {query: {doc: grade}}."""
        out: dict[str, dict[str, int]] = {q.id: {} for q in self.queries}
        for j in self.judgments:
            out.setdefault(j.query_id, {})[j.doc_id] = j.grade
        return out

    def input_hashes(self) -> dict[str, str]:
        """sha256 of each input file, for the run history."""
        return {name: sha256_file(path) for name, path in sorted(self.sources.items())}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------- parsing helpers


def read_text(path: Path) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", file=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the file ({exc.__class__.__name__}: {exc})", file=path) from None
    if not text.strip():
        raise InputError("the file is empty", file=path)
    return text


def read_json(path: Path) -> tuple[Any, str]:
    """A JSON file's value and its text (for line numbers), or an InputError naming the line."""
    text = read_text(path)
    try:
        return json.loads(text), text
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=path, line=exc.lineno) from None


def read_yaml_list(path: str | Path, key: str) -> list:
    """The non-empty list under `key` of a YAML file (prefect.yaml, automations.yaml)."""
    import yaml

    path = Path(path)
    try:
        document = yaml.safe_load(read_text(path))
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=path) from None
    entries = document.get(key) if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InputError("expected a non-empty list", file=path, field=key)
    return entries


def parse_time(value: Any, *, file: Path, line: int | None, field_name: str) -> datetime:
    if not isinstance(value, str) or not value.strip():
        raise InputError("expected an ISO 8601 timestamp", file=file, line=line, field=field_name)
    try:
        ts = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"expected an ISO 8601 timestamp, got {value!r}", file=file, line=line, field=field_name
        ) from None
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


def _number(value: Any, *, file: Path, line: int | None, field_name: str, allow_none: bool = False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"expected a number, got {value!r}", file=file, line=line, field=field_name)
    return value


def _string(obj: dict, key: str, *, file: Path, line: int | None, prefix: str = "",
            required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise InputError(f"expected a non-empty string, got {value!r}", file=file, line=line,
                         field=prefix + key)
    return value


def _json_line_of(text: str, index: int) -> int | None:
    """Best-effort line number of the index-th top-level element of a JSON array (1-based)."""
    depth = 0
    seen = -1
    in_str = False
    escape = False
    line = 1
    for ch in text:
        if ch == "\n":
            line += 1
        if in_str:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth == 2:
                seen += 1
                if seen == index:
                    return line
        elif ch in "]}":
            depth -= 1
    return None


def _load_json_list(path: Path) -> tuple[list, str]:
    data, text = read_json(path)
    if not isinstance(data, list):
        raise InputError("expected a JSON list of objects at the top level", file=path)
    return data, text


# --------------------------------------------------------------------------- fixtures


def load_catalog(path: str | Path) -> list[Resource]:
    """`catalog.json`: a list of `{id, name, description, tags, network, asset, price_usd,
    settlement: {settled_30d, success_rate}, updated_at}`."""
    path = Path(path)
    data, text = _load_json_list(path)
    resources: list[Resource] = []
    seen: dict[str, int] = {}
    for i, obj in enumerate(data):
        line = _json_line_of(text, i)
        if not isinstance(obj, dict):
            raise InputError("expected an object per resource", file=path, line=line)
        rid = _string(obj, "id", file=path, line=line)
        if rid in seen:
            raise InputError(f"duplicate resource id {rid!r} (first at element {seen[rid] + 1})",
                             file=path, line=line, field="id")
        seen[rid] = i
        name = _string(obj, "name", file=path, line=line)
        description = _string(obj, "description", file=path, line=line)
        tags = obj.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise InputError("expected a list of strings", file=path, line=line, field="tags")
        price = _number(obj.get("price_usd"), file=path, line=line, field_name="price_usd",
                        allow_none=True)
        if price is not None and price < 0:
            raise InputError(f"expected a price >= 0, got {price}", file=path, line=line,
                             field="price_usd")
        settlement = obj.get("settlement") or {}
        if not isinstance(settlement, dict):
            raise InputError("expected an object {settled_30d, success_rate}", file=path,
                             line=line, field="settlement")
        settled = _number(settlement.get("settled_30d", 0), file=path, line=line,
                          field_name="settlement.settled_30d")
        if settled < 0 or int(settled) != settled:
            raise InputError(f"expected a whole number >= 0, got {settled}", file=path, line=line,
                             field="settlement.settled_30d")
        rate = _number(settlement.get("success_rate"), file=path, line=line,
                       field_name="settlement.success_rate", allow_none=True)
        if rate is not None and not 0.0 <= rate <= 1.0:
            raise InputError(f"expected a rate in [0, 1], got {rate}", file=path, line=line,
                             field="settlement.success_rate")
        updated = obj.get("updated_at")
        resources.append(
            Resource(
                id=rid,
                name=name,
                description=description,
                tags=tuple(tags),
                network=_string(obj, "network", file=path, line=line, required=False),
                asset=_string(obj, "asset", file=path, line=line, required=False),
                price_usd=float(price) if price is not None else None,
                settled_30d=int(settled),
                success_rate=float(rate) if rate is not None else None,
                updated_at=parse_time(updated, file=path, line=line, field_name="updated_at")
                if updated is not None else None,
            )
        )
    if not resources:
        raise InputError("the catalog lists no resource", file=path)
    return resources


def load_queries(path: str | Path, categories: tuple[str, ...] = CATEGORIES) -> list[Query]:
    """`golden_queries.json`: a list of `{id, text, category, filters, intent}`."""
    path = Path(path)
    data, text = _load_json_list(path)
    queries: list[Query] = []
    seen: set[str] = set()
    for i, obj in enumerate(data):
        line = _json_line_of(text, i)
        if not isinstance(obj, dict):
            raise InputError("expected an object per query", file=path, line=line)
        qid = _string(obj, "id", file=path, line=line)
        if qid in seen:
            raise InputError(f"duplicate query id {qid!r}", file=path, line=line, field="id")
        seen.add(qid)
        category = _string(obj, "category", file=path, line=line)
        if category not in categories:
            raise InputError(f"expected one of {', '.join(categories)}, got {category!r}",
                             file=path, line=line, field="category")
        raw = obj.get("filters") or {}
        if not isinstance(raw, dict):
            raise InputError("expected an object", file=path, line=line, field="filters")
        unknown = set(raw) - {"network", "asset", "max_price_usd"}
        if unknown:
            raise InputError(f"unknown filter(s) {sorted(unknown)}; expected network, asset, "
                             "max_price_usd", file=path, line=line, field="filters")
        max_price = _number(raw.get("max_price_usd"), file=path, line=line,
                            field_name="filters.max_price_usd", allow_none=True)
        queries.append(
            Query(
                id=qid,
                text=_string(obj, "text", file=path, line=line),
                category=category,
                filters=Filters(
                    network=_string(raw, "network", file=path, line=line, prefix="filters.",
                                    required=False),
                    asset=_string(raw, "asset", file=path, line=line, prefix="filters.",
                                  required=False),
                    max_price_usd=float(max_price) if max_price is not None else None,
                ),
                intent=obj.get("intent") or "",
            )
        )
    if not queries:
        raise InputError("the file lists no query", file=path)
    return queries


JUDGMENT_COLUMNS = ("query_id", "resource_id", "grade", "judged_at", "judge")


def load_judgments(
    path: str | Path,
    *,
    grade_scale: tuple[int, int] = FIXTURE_GRADES,
    query_ids: set[str] | None = None,
) -> list[Judgment]:
    """`judgments.csv`: `query_id,resource_id,grade,judged_at,judge`, one row per judgment."""
    path = Path(path)
    text = read_text(path)
    reader = csv.reader(text.splitlines())
    header = next(reader)
    header = [h.strip() for h in header]
    missing = [c for c in JUDGMENT_COLUMNS if c not in header]
    unknown = [c for c in header if c not in JUDGMENT_COLUMNS]
    if missing or unknown:
        detail = []
        if missing:
            detail.append(f"missing column(s) {', '.join(missing)}")
        if unknown:
            detail.append(f"unknown column(s) {', '.join(unknown)}")
        raise InputError(f"{'; '.join(detail)}; expected the header {','.join(JUDGMENT_COLUMNS)}",
                         file=path, line=1)
    col = {name: header.index(name) for name in JUDGMENT_COLUMNS}
    judgments: list[Judgment] = []
    seen: dict[tuple[str, str], int] = {}
    lo, hi = grade_scale
    for line_no, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise InputError(f"expected {len(header)} columns, got {len(row)}", file=path,
                             line=line_no)
        qid = row[col["query_id"]].strip()
        doc = row[col["resource_id"]].strip()
        if not qid:
            raise InputError("expected a query id", file=path, line=line_no, field="query_id")
        if not doc:
            raise InputError("expected a resource id", file=path, line=line_no, field="resource_id")
        grade = parse_grade(row[col["grade"]], lo, hi, file=path, line=line_no)
        key = (qid, doc)
        if key in seen:
            raise InputError(f"duplicate judgment of ({qid}, {doc}); first at line {seen[key]}",
                             file=path, line=line_no)
        seen[key] = line_no
        if query_ids is not None and qid not in query_ids:
            raise InputError(f"judgment names query {qid!r}, which is not a golden query",
                             file=path, line=line_no, field="query_id")
        judgments.append(
            Judgment(
                query_id=qid,
                doc_id=doc,
                grade=grade,
                judged_at=parse_time(row[col["judged_at"]], file=path, line=line_no,
                                     field_name="judged_at"),
                judge=row[col["judge"]].strip() or None,
                line=line_no,
            )
        )
    if not judgments:
        raise InputError("the file holds no judgment", file=path)
    return judgments


def parse_grade(raw: str, lo: int, hi: int, *, file: Path, line: int, field_name: str = "grade") -> int:
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"expected a whole grade in {lo}..{hi}, got {raw.strip()!r}", file=file,
                         line=line, field=field_name) from None
    if not value.is_integer() or not lo <= value <= hi:
        raise InputError(f"expected a whole grade in {lo}..{hi}, got {raw.strip()!r}", file=file,
                         line=line, field=field_name)
    return int(value)


def load_fixtures(directory: str | Path) -> Collection:
    """The seed fixtures: `catalog.json`, `golden_queries.json`, `judgments.csv`."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError("expected a folder with catalog.json, golden_queries.json, judgments.csv",
                         file=directory)
    sources = {
        "catalog": directory / "catalog.json",
        "queries": directory / "golden_queries.json",
        "judgments": directory / "judgments.csv",
    }
    resources = load_catalog(sources["catalog"])
    queries = load_queries(sources["queries"])
    judgments = load_judgments(sources["judgments"], query_ids={q.id for q in queries})
    return Collection(name=directory.name, resources=resources, queries=queries,
                      judgments=judgments, grade_scale=FIXTURE_GRADES, sources=sources)


# --------------------------------------------------------------------------- BEIR


def _read_jsonl(path: Path) -> list[tuple[int, dict]]:
    text = read_text(path)
    rows = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", file=path, line=line_no) from None
        if not isinstance(obj, dict):
            raise InputError("expected one JSON object per line", file=path, line=line_no)
        rows.append((line_no, obj))
    return rows


def load_beir(directory: str | Path, split: str = "test", *, max_grade: int | None = None,
              max_queries: int | None = None) -> Collection:
    """A test collection in BEIR layout. Only queries judged in `split` are evaluated.

    The grade scale is 0..max_grade (the largest grade in the qrels when not given); BEIR
    documents have no commerce fields, so filters and the settlement prior have nothing to act on.
    `max_queries` keeps the first N judged queries (in file order), for quick runs.
    """
    from searcheval.judgments import load_beir_qrels

    directory = Path(directory)
    corpus_path = directory / "corpus.jsonl"
    queries_path = directory / "queries.jsonl"
    qrels_path = directory / "qrels" / f"{split}.tsv"
    for p in (corpus_path, queries_path, qrels_path):
        if not p.exists():
            raise InputError("file not found (expected BEIR layout: corpus.jsonl, queries.jsonl, "
                             f"qrels/{split}.tsv)", file=p)
    resources = []
    seen: set[str] = set()
    for line_no, obj in _read_jsonl(corpus_path):
        doc_id = obj.get("_id")
        if not isinstance(doc_id, str) or not doc_id:
            raise InputError("expected a string _id", file=corpus_path, line=line_no, field="_id")
        if doc_id in seen:
            raise InputError(f"duplicate document id {doc_id!r}", file=corpus_path, line=line_no,
                             field="_id")
        seen.add(doc_id)
        resources.append(Resource(id=doc_id, name=str(obj.get("title") or ""),
                                  description=str(obj.get("text") or "")))
    qrels, scale_max = load_beir_qrels(qrels_path, max_grade=max_grade)
    texts: dict[str, str] = {}
    for line_no, obj in _read_jsonl(queries_path):
        qid = obj.get("_id")
        if not isinstance(qid, str) or not qid:
            raise InputError("expected a string _id", file=queries_path, line=line_no, field="_id")
        texts[qid] = str(obj.get("text") or "")
    unknown = [q for q in qrels if q not in texts]
    if unknown:
        raise InputError(f"qrels name {len(unknown)} queries absent from queries.jsonl "
                         f"(first: {unknown[0]!r})", file=qrels_path)
    query_ids = list(qrels)
    if max_queries is not None:
        query_ids = query_ids[:max_queries]
    queries = [Query(id=q, text=texts[q], category="all") for q in query_ids]
    keep = set(query_ids)
    judgments = [Judgment(query_id=q, doc_id=d, grade=g)
                 for q, docs in qrels.items() if q in keep for d, g in docs.items()]
    return Collection(name=directory.name, resources=resources, queries=queries,
                      judgments=judgments, grade_scale=(0, scale_max),
                      sources={"corpus": corpus_path, "queries": queries_path,
                               "qrels": qrels_path})


def load_collection(*, fixtures: str | Path | None = None, dataset: str | Path | None = None,
                    split: str = "test", max_queries: int | None = None) -> Collection:
    """Either the seed fixtures or a BEIR dataset (exactly one)."""
    if (fixtures is None) == (dataset is None):
        raise InputError("give exactly one of --fixtures DIR or --dataset DIR")
    if dataset is not None:
        return load_beir(dataset, split, max_queries=max_queries)
    return load_fixtures(fixtures)

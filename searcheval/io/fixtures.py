"""The seed fixtures: `catalog.json`, `golden_queries.json` and `judgments.csv` (fixtures/README.md).

Every refusal is an `InputError` naming the file, line and field.
"""

from __future__ import annotations

import json
from pathlib import Path

from searcheval.errors import InputError
from searcheval.io.escape import csv_value
from searcheval.io.files import (
    json_line_of,
    number_field,
    parse_grade,
    parse_time,
    control_problem,
    iter_delimited,
    read_json,
    read_json_list,
    string_field,
)
from searcheval.io.settings import check_setting, load_settings
from searcheval.types import Collection, Filters, Judgment, Query, Resource

CATEGORIES = ("exact-name", "paraphrase", "filtered", "no-result", "adversarial")
FIXTURE_GRADES = (0, 3)


def load_catalog(path: str | Path) -> list[Resource]:
    """`catalog.json`: a list of `{id, name, description, tags, network, asset, price_usd,
    settlement: {settled_30d, success_rate}, updated_at}`."""
    path = Path(path)
    data, text = read_json_list(path)
    resources: list[Resource] = []
    seen: dict[str, int] = {}
    for i, obj in enumerate(data):
        line = json_line_of(text, i)
        if not isinstance(obj, dict):
            raise InputError("expected an object per resource", file=path, line=line)
        rid = string_field(obj, "id", file=path, line=line, identifier=True)
        if rid in seen:
            raise InputError(f"duplicate resource id {rid!r} (first at element {seen[rid] + 1})",
                             file=path, line=line, field="id")
        seen[rid] = i
        name = string_field(obj, "name", file=path, line=line)
        description = string_field(obj, "description", file=path, line=line)
        tags = obj.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise InputError("expected a list of strings", file=path, line=line, field="tags")
        for tag in tags:
            if control_problem(tag):
                raise InputError(control_problem(tag), file=path, line=line, field="tags")
        price = number_field(obj.get("price_usd"), file=path, line=line, field_name="price_usd",
                        allow_none=True)
        if price is not None and price < 0:
            raise InputError(f"expected a price >= 0, got {price}", file=path, line=line,
                             field="price_usd")
        settlement = obj.get("settlement") or {}
        if not isinstance(settlement, dict):
            raise InputError("expected an object {settled_30d, success_rate}", file=path,
                             line=line, field="settlement")
        settled = number_field(settlement.get("settled_30d", 0), file=path, line=line,
                          field_name="settlement.settled_30d")
        if settled < 0 or int(settled) != settled:
            raise InputError(f"expected a whole number >= 0, got {settled}", file=path, line=line,
                             field="settlement.settled_30d")
        rate = number_field(settlement.get("success_rate"), file=path, line=line,
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
                network=string_field(obj, "network", file=path, line=line, required=False),
                asset=string_field(obj, "asset", file=path, line=line, required=False),
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
    """`golden_queries.json`: a list of `{id, text, category, filters, intent, persona}`; `intent`
    and `persona` are optional notes (strings)."""
    path = Path(path)
    data, text = _golden_list(path)
    queries: list[Query] = []
    seen: set[str] = set()
    for i, obj in enumerate(data):
        line = json_line_of(text, i) if text is not None else None
        if not isinstance(obj, dict):
            raise InputError("expected an object per query", file=path, line=line,
                             field=None if text is not None else f"queries[{i}]")
        qid = string_field(obj, "id", file=path, line=line, identifier=True)
        if qid in seen:
            raise InputError(f"duplicate query id {qid!r}", file=path, line=line, field="id")
        seen.add(qid)
        category = string_field(obj, "category", file=path, line=line)
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
        max_price = number_field(raw.get("max_price_usd"), file=path, line=line,
                            field_name="filters.max_price_usd", allow_none=True)
        queries.append(
            Query(
                id=qid,
                text=string_field(obj, "text", file=path, line=line),
                category=category,
                filters=Filters(
                    network=string_field(raw, "network", file=path, line=line, prefix="filters.",
                                    required=False),
                    asset=string_field(raw, "asset", file=path, line=line, prefix="filters.",
                                  required=False),
                    max_price_usd=float(max_price) if max_price is not None else None,
                ),
                intent=string_field(obj, "intent", file=path, line=line, required=False) or "",
                persona=string_field(obj, "persona", file=path, line=line, required=False) or "",
            )
        )
    if not queries:
        raise InputError("the file lists no query", file=path)
    return queries


def _golden_list(path: Path) -> tuple[list, str | None]:
    """The queries of a golden query file: a JSON list, or a sampled file `{"sample": provenance,
    "queries": [...]}` (`searcheval queries sample`; its line numbers are not tracked: None)."""
    data, text = read_json(path)
    if isinstance(data, dict) and isinstance(data.get("queries"), list):
        return data["queries"], None
    if not isinstance(data, list):
        raise InputError("expected a JSON list of objects at the top level (or an object with "
                         "a `queries` list)", file=path)
    return data, text


def queries_sample(path: str | Path) -> dict | None:
    """The sampling provenance of a golden query file written by `searcheval queries sample`."""
    data, _ = read_json(Path(path))
    sample = data.get("sample") if isinstance(data, dict) else None
    return sample if isinstance(sample, dict) else None


def describe_sample(sample: dict) -> str:
    """One line for the run's notes: how the golden queries were sampled."""
    counts = sample.get("counts") or {}
    window = (sample.get("window") or {}).get("traces") or {}
    return (f"golden queries sampled from production traces ({sample.get('source')}): method "
            f"{sample.get('method')}, seed {sample.get('seed')}, stratified by "
            f"{sample.get('stratify') or 'nothing'}, {counts.get('sampled')} of "
            f"{counts.get('candidates')} candidate queries over {counts.get('traces')} traces "
            f"from {window.get('first')} to {window.get('last')}")


JUDGMENT_COLUMNS = ("query_id", "resource_id", "grade", "judged_at", "judge")


def load_judgments(
    path: str | Path,
    *,
    grade_scale: tuple[int, int] = FIXTURE_GRADES,
    query_ids: set[str] | None = None,
) -> list[Judgment]:
    """`judgments.csv`: `query_id,resource_id,grade,judged_at,judge`, one row per judgment."""
    path = Path(path)
    rows = iter_delimited(path, ",")  # UTF-8 with or without a BOM; a line ends only at "\n"
    first = next((row for row in rows if any(c.strip() for c in row[1])), None)
    if first is None:
        raise InputError("the file is empty", file=path)
    header = [h.strip() for h in first[1]]
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
    for line_no, row in rows:
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise InputError(f"expected {len(header)} columns, got {len(row)}", file=path,
                             line=line_no)
        row = [csv_value(cell) for cell in row]  # a cell `judgments export` neutralised
        qid = row[col["query_id"]].strip()
        doc = row[col["resource_id"]].strip()
        if not qid:
            raise InputError("expected a query id", file=path, line=line_no, field="query_id")
        if not doc:
            raise InputError("expected a resource id", file=path, line=line_no, field="resource_id")
        for name, value in (("query_id", qid), ("resource_id", doc),
                            ("judge", row[col["judge"]])):
            problem = control_problem(value, identifier=name != "judge")
            if problem:
                raise InputError(problem, file=path, line=line_no, field=name)
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


FILES = ("catalog.json", "golden_queries.json", "judgments.csv")


def is_fixtures(directory: str | Path) -> bool:
    """The fixtures' layout: golden_queries.json and judgments.csv, and catalog.json unless the
    search engine holds the documents itself (an http, python or trec configuration)."""
    return all((Path(directory) / name).is_file() for name in FILES[1:])


def load_fixtures(directory: str | Path, *, grade_scale: tuple[int, int] | None = None) -> Collection:
    """The seed fixtures: `catalog.json`, `golden_queries.json`, `judgments.csv`, and an optional
    `searcheval.yaml` of conventions. The grade scale is 0..3 unless `grade_scale` (a run
    parameter) or the folder's settings say otherwise."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError("expected a folder with catalog.json, golden_queries.json, judgments.csv",
                         file=directory)
    sources = {
        "catalog": directory / "catalog.json",
        "queries": directory / "golden_queries.json",
        "judgments": directory / "judgments.csv",
    }
    settings = load_settings(directory)
    if grade_scale is not None:
        scale, where = check_setting("grade_scale", grade_scale), "run parameter grade_scale"
    elif settings.grade_scale is not None:
        scale, where = settings.grade_scale, f"dataset setting in {settings.source}"
    else:
        scale, where = FIXTURE_GRADES, "default: the fixtures' scale"
    if settings.source is not None:
        sources["settings"] = Path(settings.source)
    notes = []
    if sources["catalog"].is_file():
        resources = load_catalog(sources["catalog"])
    else:
        del sources["catalog"]
        resources = []
        notes.append("no catalog.json: the documents are the search engine's own; only "
                     "configurations that hold their documents (http, python, trec) can run")
    queries = load_queries(sources["queries"])
    provenance = {"grade_scale": where}
    sample = queries_sample(sources["queries"])
    if sample is not None:  # the golden queries were sampled from traces (issue 25)
        notes.append(describe_sample(sample))
        provenance["queries_sample"] = json.dumps(sample, sort_keys=True)
    judgments = load_judgments(sources["judgments"], grade_scale=scale,
                               query_ids={q.id for q in queries})
    return Collection(name=directory.name, resources=resources, queries=queries,
                      judgments=judgments, grade_scale=scale, sources=sources, settings=settings,
                      categories=CATEGORIES, provenance=provenance, notes=notes,
                      has_catalog=bool(resources) or "catalog" in sources)

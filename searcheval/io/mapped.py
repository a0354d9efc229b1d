"""A collection described by a small YAML mapping of columns over the tables a team already has:
CSV, TSV, JSONL or Parquet files, or SQL queries over the project's Postgres.

    name: shop                      # optional; default: the mapping file's name
    documents:
      file: products.parquet        # relative to the mapping file; .csv .tsv .jsonl .parquet
      id: product_id                # (or `format: csv | tsv | jsonl | parquet`)
      title: product_name           # optional
      body: [product_description]   # optional: a column, or columns joined by a newline
      tags: product_class           # optional: a column split at `tags_separator` (default "|")
      fields: [rating_count]        # optional: kept on the document, not searched
    queries:
      sql: SELECT qid, text, segment FROM golden_queries   # a read-only query instead of a file
      id: qid
      text: text
      category: segment             # optional, and so are intent, persona, query_class
    judgments:
      file: grades.csv
      query_id: qid
      doc_id: product_id
      grade: label                  # whole numbers, or text labels through settings.grade_map
    settings:                       # optional: the dataset's conventions (searcheval.io.settings)
      grade_map: {Exact: 3, Partial: 1, Irrelevant: 0}
      relevance_level: 2

Every refusal names the file (the data file, or the mapping and its `sql`), the line (or row) and
the column: a mapped column the table does not have, a missing value, a duplicate id or judgment,
a grade outside the map or the scale, a judgment of a query the queries table lacks, an empty table.
Files are streamed row by row; Parquet is read column-wise with pyarrow (only the mapped columns).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searcheval.errors import InputError
from searcheval.io.files import iter_delimited, iter_jsonl, read_yaml_mapping
from searcheval.io.settings import check_setting, settings_from
from searcheval.types import (
    DATA_CATEGORIES,
    UNCLASSIFIED,
    Collection,
    Judgment,
    Query,
    Resource,
)

FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
           ".parquet": "parquet", ".pq": "parquet"}
SOURCE_KEYS = ("file", "sql", "format")
# section -> (required columns, optional columns); a column key maps to one column name, except
# `body` and `fields`, which may list several
SECTIONS = {
    "documents": (("id",), ("title", "body", "tags", "fields")),
    "queries": (("id", "text"), ("category", "intent", "persona", "query_class")),
    "judgments": (("query_id", "doc_id", "grade"), ()),
}
EXTRA_KEYS = {"documents": ("tags_separator",)}
TOP_KEYS = ("name", "documents", "queries", "judgments", "settings")
MANY = ("body", "fields")


@dataclass
class Where:
    """Where a row came from, for messages: a data file and its line (or row), or a mapping's SQL."""

    file: str
    unit: str  # "line" | "row"
    prefix: str = ""  # e.g. "documents.sql: "

    def error(self, message: str, position: int | None, column: str | None = None) -> InputError:
        if self.unit == "line":
            return InputError(message, file=self.file, line=position, field=column)
        at = f"row {position}: " if position is not None else ""
        return InputError(f"{self.prefix}{at}{message}", file=self.file, field=column)


class Table:
    """The rows of one mapped table: `columns` (its header), then (position, {column: value})."""

    def __init__(self, section: str, spec: dict, mapping: Path, database_url: str | None) -> None:
        self.section = section
        self.mapping = mapping
        if "sql" in spec:
            self._sql(spec["sql"], database_url)
        else:
            self._file(spec)

    # -- sources

    def _file(self, spec: dict) -> None:
        path = (self.mapping.parent / str(spec["file"])).resolve() \
            if not Path(str(spec["file"])).is_absolute() else Path(str(spec["file"]))
        fmt = spec.get("format") or FORMATS.get(path.suffix.lower())
        if fmt not in ("csv", "tsv", "jsonl", "parquet"):
            raise InputError(f"cannot tell the format of {path.name}: name it .csv, .tsv, .jsonl "
                             "or .parquet, or set `format`", file=self.mapping,
                             field=f"{self.section}.format")
        if not path.is_file():
            raise InputError(f"file not found (named by {self.section}.file in {self.mapping})",
                             file=path)
        self.path = path
        self.where = Where(str(path), "row" if fmt == "parquet" else "line")
        self.format = fmt
        if fmt in ("csv", "tsv"):
            rows = iter_delimited(path, "," if fmt == "csv" else "\t")
            first = next(rows, None)
            if first is None or not any(c.strip() for c in first[1]):
                raise InputError("the file is empty; expected a header line naming the columns",
                                 file=path, line=1)
            self.columns = [c.strip() for c in first[1]]
            self._rows = self._delimited(rows)
        elif fmt == "jsonl":
            self.columns = None  # every object names its own keys
            self._rows = iter_jsonl(path)
        else:
            self._parquet(path)

    def _delimited(self, rows) -> Iterator[tuple[int, dict]]:
        width = len(self.columns)
        for line, cells in rows:
            if len(cells) == 1 and not cells[0].strip():
                continue
            if len(cells) != width:
                raise self.where.error(f"expected {width} columns as in the header, got "
                                       f"{len(cells)}", line)
            yield line, dict(zip(self.columns, cells))

    def _parquet(self, path: Path) -> None:
        import pyarrow.parquet as pq

        try:
            self._parquet_file = pq.ParquetFile(path)
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for a bad file
            raise InputError(f"not a readable Parquet file ({type(exc).__name__}: {exc})",
                             file=path) from None
        self.columns = list(self._parquet_file.schema_arrow.names)
        self._rows = None  # read with the needed columns only, in `rows`

    def _sql(self, statement: Any, database_url: str | None) -> None:
        if not isinstance(statement, str) or not statement.strip():
            raise InputError("expected a SELECT statement", file=self.mapping,
                             field=f"{self.section}.sql")
        from searcheval.store.tables import read_query

        self.where = Where(str(self.mapping), "row", prefix=f"{self.section}.sql: ")
        self.format = "sql"
        try:
            self.columns, rows = read_query(statement, database_url)
        except InputError as exc:
            raise InputError(exc.message, file=self.mapping, field=f"{self.section}.sql") from None
        digest = hashlib.sha256(statement.encode("utf-8"))
        for row in rows:
            digest.update(json.dumps(row, default=str, ensure_ascii=False).encode("utf-8"))
        self.digest = digest.hexdigest()  # the rows as read: the table's part of the fingerprint
        self._rows = ((i, dict(zip(self.columns, row))) for i, row in enumerate(rows, start=1))

    # -- rows

    def check_columns(self, wanted: dict[str, list[str]]) -> None:
        """Every mapped column exists in the table (JSONL: checked on every line instead)."""
        if self.columns is None:
            return
        for key, names in wanted.items():
            for name in names:
                if name not in self.columns:
                    raise self.where.error(
                        f"no column {name!r} (mapped as {self.section}.{key} in "
                        f"{self.mapping.name}); the columns are {', '.join(self.columns)}",
                        1 if self.where.unit == "line" else None, name)

    def rows(self, needed: list[str]) -> Iterator[tuple[int, dict]]:
        if self.format == "parquet":
            yield from self._parquet_rows(needed)
            return
        for position, row in self._rows:
            if self.columns is None:  # JSONL
                for name in needed:
                    if name not in row:
                        raise self.where.error(f"no key {name!r} on this line (mapped in "
                                               f"{self.section} of {self.mapping.name})",
                                               position, name)
            yield position, row

    def _parquet_rows(self, needed: list[str]) -> Iterator[tuple[int, dict]]:
        position = 0
        for batch in self._parquet_file.iter_batches(columns=list(dict.fromkeys(needed)),
                                                     batch_size=65536):
            columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
            for values in zip(*columns.values()):
                position += 1
                yield position, dict(zip(columns, values))


def _text(value: Any) -> str:
    """A cell as text: strings stripped, numbers as written (1, not 1.0), missing as ""."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if value.is_integer():
            return str(int(value))
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _spec(raw: Any, section: str, mapping: Path) -> dict:
    if not isinstance(raw, dict):
        raise InputError("expected a mapping with `file` (or `sql`) and its columns",
                         file=mapping, field=section)
    required, optional = SECTIONS[section]
    known = SOURCE_KEYS + required + optional + EXTRA_KEYS.get(section, ())
    unknown = [k for k in raw if k not in known]
    if unknown:
        raise InputError(f"unknown key {unknown[0]!r}; expected {', '.join(known)}",
                         file=mapping, field=f"{section}.{unknown[0]}")
    if ("file" in raw) == ("sql" in raw):
        raise InputError("expected exactly one of `file` or `sql`", file=mapping, field=section)
    for key in required:
        if key not in raw:
            raise InputError(f"missing; name the column that holds the {key.replace('_', ' ')}",
                             file=mapping, field=f"{section}.{key}")
    for key in required + optional:
        if key not in raw:
            continue
        value = raw[key]
        names = value if key in MANY and isinstance(value, list) else [value]
        if not names or not all(isinstance(n, str) and n.strip() for n in names):
            kind = "a column name or a list of them" if key in MANY else "a column name"
            raise InputError(f"expected {kind}, got {value!r}", file=mapping,
                             field=f"{section}.{key}")
    return raw


def _columns(spec: dict, section: str) -> dict[str, list[str]]:
    required, optional = SECTIONS[section]
    out = {}
    for key in required + optional:
        if key in spec:
            value = spec[key]
            out[key] = list(value) if isinstance(value, list) else [value]
    return out


def load_mapped(mapping: str | Path, *, grade_map: tuple[tuple[str, int], ...] | dict | None = None,
                grade_scale: tuple[int, int] | None = None, max_queries: int | None = None,
                database_url: str | None = None) -> Collection:
    """The collection a mapping file describes (see the module docstring).

    `grade_map` and `grade_scale` are run parameters: they override the mapping's `settings`.
    Grades are the grade column's whole numbers, or its labels through the grade map; the grade
    scale is the declared one, else the map's range, else 0..the largest grade in the data.
    `max_queries` keeps the first N queries and their judgments. `database_url` is the Postgres
    of `sql` tables (default: SEARCHEVAL_DATABASE_URL, else the embedded server)."""
    mapping = Path(mapping)
    document = read_yaml_mapping(mapping)
    unknown = [k for k in document if k not in TOP_KEYS]
    if unknown:
        raise InputError(f"unknown key {unknown[0]!r}; expected {', '.join(TOP_KEYS)}",
                         file=mapping, field=unknown[0])
    for section in SECTIONS:
        if section not in document:
            raise InputError(f"missing; expected the `{section}` table and its columns",
                             file=mapping, field=section)
    specs = {s: _spec(document[s], s, mapping) for s in SECTIONS}
    settings = settings_from(document.get("settings"), file=mapping, prefix="settings.")
    provenance: dict[str, str] = {}
    pairs = None
    if grade_map is not None:
        pairs = check_setting("grade_map", dict(grade_map))
        provenance["grade_map"] = "run parameter grade_map"
    elif settings.grade_map is not None:
        pairs = settings.grade_map
        provenance["grade_map"] = f"dataset setting in {mapping}"
    labels = dict(pairs) if pairs is not None else None
    if grade_scale is not None:
        scale = check_setting("grade_scale", grade_scale)
        provenance["grade_scale"] = "run parameter grade_scale"
    elif settings.grade_scale is not None:
        scale = settings.grade_scale
        provenance["grade_scale"] = f"dataset setting in {mapping}"
    elif labels is not None:
        scale = (0, max(max(labels.values()), 1))
        provenance["grade_scale"] = "the grade map's range"
    else:
        scale = None
        provenance["grade_scale"] = "inferred: 0..the largest grade in the judgments"
    if labels is not None and scale is not None:
        outside = [f"{k}={g}" for k, g in labels.items() if not scale[0] <= g <= scale[1]]
        if outside:
            raise InputError(f"the grade map gives {', '.join(outside)}, outside the grade "
                             f"scale {scale[0]}..{scale[1]}", file=mapping,
                             field="settings.grade_map")

    tables = {}
    for section in SECTIONS:
        table = Table(section, specs[section], mapping, database_url)
        table.check_columns(_columns(specs[section], section))
        tables[section] = table
    resources = _documents(tables["documents"], specs["documents"])
    queries = _queries(tables["queries"], specs["queries"])
    judgments, top = _judgments(tables["judgments"], specs["judgments"], labels, scale,
                                {q.id for q in queries})
    if scale is None:
        scale = (0, max(top, 1))
    if max_queries is not None:
        queries = queries[:max_queries]
        keep = {q.id for q in queries}
        judgments = [j for j in judgments if j.query_id in keep]
    sources: dict[str, Path] = {"mapping": mapping}
    for section, key in (("documents", "documents"), ("queries", "queries"),
                         ("judgments", "judgments")):
        if getattr(tables[section], "path", None) is not None:
            sources[key] = tables[section].path
    digests = {f"{section} (sql)": tables[section].digest for section in SECTIONS
               if getattr(tables[section], "digest", None) is not None}
    categorised = "category" in specs["queries"]
    name = document.get("name") or mapping.stem
    if not isinstance(name, str):
        raise InputError(f"expected a name, got {name!r}", file=mapping, field="name")
    return Collection(name=name, resources=resources, queries=queries, judgments=judgments,
                      grade_scale=scale, sources=sources, settings=settings,
                      categories=DATA_CATEGORIES if categorised else ("all",),
                      provenance=provenance,
                      grade_map=tuple(labels.items()) if labels is not None else None,
                      digests=digests)


def _documents(table: Table, spec: dict) -> list[Resource]:
    cols = _columns(spec, "documents")
    needed = [c for names in cols.values() for c in names]
    id_col = cols["id"][0]
    title = cols.get("title", [None])[0]
    body = cols.get("body", [])
    tags = cols.get("tags", [None])[0]
    kept = cols.get("fields", [])
    separator = spec.get("tags_separator", "|")
    if not isinstance(separator, str) or not separator:
        raise InputError(f"expected a separator string, got {separator!r}", file=table.mapping,
                         field="documents.tags_separator")
    resources: list[Resource] = []
    first: dict[str, int] = {}
    for position, row in table.rows(needed):
        doc_id = _text(row[id_col])
        if not doc_id:
            raise table.where.error("expected a document id", position, id_col)
        if doc_id in first:
            raise table.where.error(f"duplicate document id {doc_id!r}; first at "
                                    f"{table.where.unit} {first[doc_id]}", position, id_col)
        first[doc_id] = position
        resources.append(Resource(
            id=doc_id,
            name=_text(row[title]) if title else "",
            description="\n".join(t for t in (_text(row[c]) for c in body) if t),
            tags=tuple(t.strip() for t in _text(row[tags]).split(separator) if t.strip())
            if tags else (),
            fields=tuple((c, _text(row[c])) for c in kept if _text(row[c])),
        ))
    if not resources:
        raise table.where.error("the table holds no document", None)
    return resources


def _queries(table: Table, spec: dict) -> list[Query]:
    cols = _columns(spec, "queries")
    needed = [c for names in cols.values() for c in names]
    name = {key: names[0] for key, names in cols.items()}
    queries: list[Query] = []
    first: dict[str, int] = {}
    for position, row in table.rows(needed):
        qid = _text(row[name["id"]])
        if not qid:
            raise table.where.error("expected a query id", position, name["id"])
        if qid in first:
            raise table.where.error(f"duplicate query id {qid!r}; first at {table.where.unit} "
                                    f"{first[qid]}", position, name["id"])
        first[qid] = position
        text = _text(row[name["text"]])
        if not text:
            raise table.where.error("expected the query's text", position, name["text"])
        extra: dict[str, Any] = {}
        if "category" in name:
            extra["category"] = _text(row[name["category"]]) or UNCLASSIFIED
        for key in ("intent", "persona"):
            if key in name:
                extra[key] = _text(row[name[key]])
        if "query_class" in name:
            extra["query_class"] = _text(row[name["query_class"]]) or None
        queries.append(Query(id=qid, text=text, **extra))
    if not queries:
        raise table.where.error("the table holds no query", None)
    return queries


def _judgments(table: Table, spec: dict, labels: dict[str, int] | None,
               scale: tuple[int, int] | None, query_ids: set[str]) -> tuple[list[Judgment], int]:
    cols = _columns(spec, "judgments")
    q_col, d_col, g_col = cols["query_id"][0], cols["doc_id"][0], cols["grade"][0]
    lo, hi = scale if scale is not None else (0, None)
    expected = ", ".join(f"{k}={g}" for k, g in labels.items()) if labels else None
    judgments: list[Judgment] = []
    first: dict[tuple[str, str], int] = {}
    top = 0
    for position, row in table.rows([q_col, d_col, g_col]):
        qid, doc = _text(row[q_col]), _text(row[d_col])
        if not qid:
            raise table.where.error("expected a query id", position, q_col)
        if not doc:
            raise table.where.error("expected a document id", position, d_col)
        raw = row[g_col]
        if labels is not None:
            grade = labels.get(_text(raw))
            if grade is None:
                raise table.where.error(f"grade {_text(raw)!r} is not in the grade map "
                                        f"({expected})", position, g_col)
        else:
            grade = _whole_grade(raw)
            bounds = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            if grade is None:
                raise table.where.error(f"expected a whole grade ({bounds}), got "
                                        f"{_text(raw)!r}; for text labels declare "
                                        "settings.grade_map", position, g_col)
            if grade < lo or (hi is not None and grade > hi):
                raise table.where.error(f"grade {grade} is outside the grade scale {bounds}",
                                        position, g_col)
        key = (qid, doc)
        if key in first:
            raise table.where.error(f"duplicate judgment of ({qid}, {doc}); first at "
                                    f"{table.where.unit} {first[key]}", position)
        first[key] = position
        if qid not in query_ids:
            raise table.where.error(f"judgment of query {qid!r}, which the queries table does "
                                    "not list", position, q_col)
        top = max(top, grade)
        judgments.append(Judgment(query_id=qid, doc_id=doc, grade=grade,
                                  line=position if table.where.unit == "line" else None))
    if not judgments:
        raise table.where.error("the table holds no judgment", None)
    return judgments, top


def _whole_grade(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = _text(value)
    try:
        number = float(text)
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number.is_integer() else None

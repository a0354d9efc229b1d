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
from collections.abc import Callable, Iterator
from operator import itemgetter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searcheval.errors import InputError
from searcheval.io.files import iter_delimited, iter_jsonl, paused_gc, read_yaml_mapping
from searcheval.io.settings import check_setting, settings_from
from searcheval.types import (
    DATA_CATEGORIES,
    UNCLASSIFIED,
    Collection,
    Judgment,
    Query,
    Resource,
)

#: (statement, database URL) -> (column names, rows): how an `sql` table is read
QueryReader = Callable[[str, "str | None"], tuple[list[str], list[tuple]]]

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

    def __init__(self, section: str, spec: dict, mapping: Path, database_url: str | None,
                 read_query: QueryReader | None = None) -> None:
        self.section = section
        self.mapping = mapping
        if "sql" in spec:
            self._sql(spec["sql"], database_url, read_query)
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
            self._rows = rows
        elif fmt == "jsonl":
            self.columns = None  # every object names its own keys
            self._rows = iter_jsonl(path)
        else:
            self._parquet(path)


    def _parquet(self, path: Path) -> None:
        import pyarrow.parquet as pq

        try:
            self._parquet_file = pq.ParquetFile(path)
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for a bad file
            raise InputError(f"not a readable Parquet file ({type(exc).__name__}: {exc})",
                             file=path) from None
        self.columns = list(self._parquet_file.schema_arrow.names)
        self._rows = None  # read with the needed columns only, in `rows`

    def _sql(self, statement: Any, database_url: str | None,
             read_query: QueryReader | None) -> None:
        if not isinstance(statement, str) or not statement.strip():
            raise InputError("expected a SELECT statement", file=self.mapping,
                             field=f"{self.section}.sql")
        if read_query is None:  # io opens no database: the caller hands in the reader
            raise InputError("reads an SQL table: load this mapping with "
                             "searcheval.load_collection, which reads it from Postgres",
                             file=self.mapping, field=f"{self.section}.sql")
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
        self._rows = enumerate(rows, start=1)

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

    def rows(self, needed: list[str]) -> Iterator[tuple[int, tuple]]:
        """(line or row number, the values of the `needed` columns in that order) of every row."""
        if self.format == "parquet":
            yield from self._parquet_rows(needed)
        elif self.format == "jsonl":
            for position, row in self._rows:
                try:
                    yield position, tuple(row[name] for name in needed)
                except KeyError as exc:
                    raise self.where.error(f"no key {exc.args[0]!r} on this line (mapped in "
                                           f"{self.section} of {self.mapping.name})", position,
                                           exc.args[0]) from None
        elif self.format == "sql":
            pick = _picker([self.columns.index(name) for name in needed])
            for position, row in self._rows:
                yield position, pick(row)
        else:  # csv, tsv
            pick = _picker([self.columns.index(name) for name in needed])
            width = len(self.columns)
            for line, cells in self._rows:
                if len(cells) != width:
                    if len(cells) == 1 and not cells[0].strip():
                        continue  # a blank line
                    raise self.where.error(f"expected {width} columns as in the header, got "
                                           f"{len(cells)}", line)
                yield line, pick(cells)

    def _parquet_rows(self, needed: list[str]) -> Iterator[tuple[int, tuple]]:
        position = 0
        columns = list(dict.fromkeys(needed))
        for batch in self._parquet_file.iter_batches(columns=columns, batch_size=8192):
            values = {name: batch.column(name).to_pylist() for name in columns}
            for row in zip(*(values[name] for name in needed)):
                position += 1
                yield position, row


def _picker(indexes: list[int]):
    """A function from a row to the tuple of its values at `indexes`."""
    if len(indexes) == 1:
        (only,) = indexes
        return lambda row: (row[only],)
    return itemgetter(*indexes)


def _text(value: Any) -> str:
    """A cell as text: strings stripped, numbers as written (1, not 1.0), missing as ""."""
    if type(value) is str:
        return value.strip()
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
                database_url: str | None = None,
                read_query: QueryReader | None = None) -> Collection:
    """The collection a mapping file describes (see the module docstring).

    `grade_map` and `grade_scale` are run parameters: they override the mapping's `settings`.
    Grades are the grade column's whole numbers, or its labels through the grade map; the grade
    scale is the declared one, else the map's range, else 0..the largest grade in the data.
    `max_queries` keeps the first N queries and their judgments. `database_url` is the Postgres
    of `sql` tables (default: SEARCHEVAL_DATABASE_URL, else the embedded server), read by
    `read_query(statement, database_url)` (searcheval.store.tables.read_query: io opens no
    database itself)."""
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
        table = Table(section, specs[section], mapping, database_url, read_query)
        table.check_columns(_columns(specs[section], section))
        tables[section] = table
    with paused_gc():
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
    return Collection(name=name, declared_name=document.get("name"), resources=resources,
                      queries=queries, judgments=judgments,
                      grade_scale=scale, sources=sources, settings=settings,
                      categories=DATA_CATEGORIES if categorised else ("all",),
                      provenance=provenance,
                      grade_map=tuple(labels.items()) if labels is not None else None,
                      digests=digests)


def _documents(table: Table, spec: dict) -> list[Resource]:
    cols = _columns(spec, "documents")
    title = cols.get("title", [None])[0]
    body = cols.get("body", [])
    tags = cols.get("tags", [None])[0]
    kept = cols.get("fields", [])
    separator = spec.get("tags_separator", "|")
    if not isinstance(separator, str) or not separator:
        raise InputError(f"expected a separator string, got {separator!r}", file=table.mapping,
                         field="documents.tags_separator")
    id_col = cols["id"][0]
    needed = [id_col] + ([title] if title else []) + body + ([tags] if tags else []) + kept
    n_body, has_title, has_tags = len(body), title is not None, tags is not None
    resources: list[Resource] = []
    first: dict[str, int] = {}
    for position, values in table.rows(needed):
        doc_id = _text(values[0])
        if not doc_id:
            raise table.where.error("expected a document id", position, id_col)
        if first.setdefault(doc_id, position) != position:
            raise table.where.error(f"duplicate document id {doc_id!r}; first at "
                                    f"{table.where.unit} {first[doc_id]}", position, id_col)
        at = 1
        name = _text(values[at]) if has_title else ""
        at += has_title
        description = "\n".join(t for t in map(_text, values[at:at + n_body]) if t)
        at += n_body
        labels = tuple(t.strip() for t in _text(values[at]).split(separator) if t.strip()) \
            if has_tags else ()
        at += has_tags
        extra = tuple((c, v) for c, v in zip(kept, map(_text, values[at:])) if v)
        resources.append(Resource(doc_id, name, description, labels, fields=extra))
    if not resources:
        raise table.where.error("the table holds no document", None)
    return resources


def _queries(table: Table, spec: dict) -> list[Query]:
    cols = _columns(spec, "queries")
    keys = list(cols)  # id, text, then the optional ones the mapping names
    needed = [cols[k][0] for k in keys]
    queries: list[Query] = []
    first: dict[str, int] = {}
    for position, values in table.rows(needed):
        row = dict(zip(keys, map(_text, values)))
        qid = row["id"]
        if not qid:
            raise table.where.error("expected a query id", position, cols["id"][0])
        if first.setdefault(qid, position) != position:
            raise table.where.error(f"duplicate query id {qid!r}; first at {table.where.unit} "
                                    f"{first[qid]}", position, cols["id"][0])
        if not row["text"]:
            raise table.where.error("expected the query's text", position, cols["text"][0])
        extra: dict[str, Any] = {}
        if "category" in row:
            extra["category"] = row["category"] or UNCLASSIFIED
        for key in ("intent", "persona"):
            if key in row:
                extra[key] = row[key]
        if "query_class" in row:
            extra["query_class"] = row["query_class"] or None
        queries.append(Query(id=qid, text=row["text"], **extra))
    if not queries:
        raise table.where.error("the table holds no query", None)
    return queries


def _judgments(table: Table, spec: dict, labels: dict[str, int] | None,
               scale: tuple[int, int] | None, query_ids: set[str]) -> tuple[list[Judgment], int]:
    cols = _columns(spec, "judgments")
    q_col, d_col, g_col = cols["query_id"][0], cols["doc_id"][0], cols["grade"][0]
    lo, hi = scale if scale is not None else (0, None)
    judgments: list[Judgment] = []
    first: dict[tuple[str, str], int] = {}
    unit = table.where.unit
    top = 0
    # one string object per distinct id: a run keeps these judgments to its end, and a table of
    # labels repeats each query's id on every one of its rows
    same: dict[str, str] = {}
    for position, (raw_q, raw_d, raw) in table.rows([q_col, d_col, g_col]):
        qid, doc = _text(raw_q), _text(raw_d)
        qid, doc = same.setdefault(qid, qid), same.setdefault(doc, doc)
        grade = labels.get(_text(raw)) if labels is not None else _whole_grade(raw)
        if grade is None or not qid or not doc or grade < lo or (hi is not None and grade > hi) \
                or qid not in query_ids:
            _refuse_judgment(table, position, (q_col, d_col, g_col), (qid, doc, raw), labels,
                             (lo, hi), query_ids)
        if first.setdefault((qid, doc), position) != position:
            raise table.where.error(f"duplicate judgment of ({qid}, {doc}); first at {unit} "
                                    f"{first[(qid, doc)]}", position)
        if grade > top:
            top = grade
        judgments.append(Judgment(qid, doc, grade, None, None,
                                  position if unit == "line" else None))
    if not judgments:
        raise table.where.error("the table holds no judgment", None)
    return judgments, top


def _refuse_judgment(table: Table, position: int, columns: tuple[str, str, str], values: tuple,
                     labels: dict[str, int] | None, scale: tuple[int, int | None],
                     query_ids: set[str]) -> None:
    (q_col, d_col, g_col), (qid, doc, raw), (lo, hi) = columns, values, scale
    if not qid:
        raise table.where.error("expected a query id", position, q_col)
    if not doc:
        raise table.where.error("expected a document id", position, d_col)
    if labels is not None:
        grade = labels.get(_text(raw))
        if grade is None:
            expected = ", ".join(f"{k}={g}" for k, g in labels.items())
            raise table.where.error(f"grade {_text(raw)!r} is not in the grade map ({expected})",
                                    position, g_col)
    else:
        grade = _whole_grade(raw)
        bounds = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        if grade is None:
            raise table.where.error(f"expected a whole grade ({bounds}), got {_text(raw)!r}; for "
                                    "text labels declare settings.grade_map", position, g_col)
        if grade < lo or (hi is not None and grade > hi):
            raise table.where.error(f"grade {grade} is outside the grade scale {bounds}",
                                    position, g_col)
    raise table.where.error(f"judgment of query {qid!r}, which the queries table does not list",
                            position, q_col)


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

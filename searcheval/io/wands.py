"""WANDS, Wayfair's product-search collection, in its published layout: three tab-separated files
with a header line (github.com/wayfair/WANDS, dataset/):

- `product.csv`: product_id, product_name, product_class, category hierarchy, product_description,
  product_features, rating_count, average_rating, review_count (the README spells the fourth
  `category_hierarchy`; both spellings are read). A product becomes a document: name, description,
  and its classes (`|`-separated) as tags, which the rankers search; the category path, features
  and rating fields are kept as the document's fields.
- `query.csv`: query_id, query, query_class. The class is the query's category (an empty class is
  the category `unclassified`).
- `label.csv`: id, query_id, product_id, label. Labels become grades through a grade map (default
  Exact=3, Partial=1, Irrelevant=0, as the seed does; WANDS' paper uses 2/1/0).

The files are streamed row by row (42,994 products and 233,448 labels load in seconds, and memory
holds the documents, not the files twice). A `searcheval.yaml` beside them may declare the grade
map and the conventions (`searcheval.io.settings`). Every refusal names the file, the line and
the column: a missing column, an empty file, a duplicate id, a label outside the grade map, a
label of a query the queries file does not list, a rating that is not a number.
"""

from __future__ import annotations

import math
from pathlib import Path

from searcheval.defaults import WANDS_GRADE_MAP
from searcheval.errors import InputError
from searcheval.io.files import iter_delimited, paused_gc
from searcheval.io.settings import check_setting, load_settings
from searcheval.types import DATA_CATEGORIES, UNCLASSIFIED, Collection, Judgment, Query, Resource

FILES = ("product.csv", "query.csv", "label.csv")
PRODUCT_COLUMNS = ("product_id", "product_name", "product_class", "category hierarchy",
                   "product_description", "product_features", "rating_count", "average_rating",
                   "review_count")
QUERY_COLUMNS = ("query_id", "query", "query_class")
LABEL_COLUMNS = ("id", "query_id", "product_id", "label")
ALIASES = {"category_hierarchy": "category hierarchy"}  # the README's spelling
NUMBER_COLUMNS = ("rating_count", "average_rating", "review_count")


def is_wands(directory: str | Path) -> bool:
    """A folder holding WANDS' three files (directly, or in `dataset/` as the repository has them)."""
    return wands_folder(directory) is not None


def wands_folder(directory: str | Path) -> Path | None:
    directory = Path(directory)
    for folder in (directory, directory / "dataset"):
        if all((folder / name).is_file() for name in FILES):
            return folder
    return None


class _Table:
    """One tab-separated file: its header checked, then its rows as (line, cells by column)."""

    def __init__(self, path: Path, required: tuple[str, ...]) -> None:
        self.path = path
        self.rows = iter_delimited(path, "\t")
        first = next(self.rows, None)
        if first is None or not any(c.strip() for c in first[1]):
            raise InputError(f"the file is empty; expected the header {chr(9).join(required)!r}",
                             file=path, line=1)
        header = [ALIASES.get(h.strip(), h.strip()) for h in first[1]]
        missing = [c for c in required if c not in header]
        if missing:
            raise InputError(f"missing column(s) {', '.join(map(repr, missing))}; the header is "
                             f"{header!r}, expected the columns {', '.join(required)} "
                             "(tab-separated)", file=path, line=1)
        seen: set[str] = set()
        for name in header:
            if name in seen:
                raise InputError(f"column {name!r} appears twice in the header", file=path,
                                 line=1, field=name)
            seen.add(name)
        self.header = header
        self.index = {name: i for i, name in enumerate(header)}

    def __iter__(self):
        width = len(self.header)
        for line, cells in self.rows:
            if len(cells) == 1 and not cells[0].strip():
                continue  # a blank line
            if len(cells) != width:
                raise InputError(f"expected {width} tab-separated columns, got {len(cells)}",
                                 file=self.path, line=line)
            yield line, cells

    def cell(self, cells: list[str], name: str) -> str:
        return cells[self.index[name]]

    def required(self, cells: list[str], name: str, line: int) -> str:
        value = cells[self.index[name]].strip()
        if not value:
            raise InputError("expected a value", file=self.path, line=line, field=name)
        return value


def load_products(path: str | Path) -> list[Resource]:
    path = Path(path)
    table = _Table(path, ("product_id", "product_name"))
    kept = [c for c in table.header if c not in ("product_id", "product_name", "product_description")]
    numbers = [c for c in NUMBER_COLUMNS if c in table.index]
    has_class = "product_class" in table.index
    has_description = "product_description" in table.index
    resources: list[Resource] = []
    first: dict[str, int] = {}
    # one object per distinct class list and (column, value) pair: a run keeps every product to
    # its end, and most of these repeat (a few hundred classes and categories, small counts)
    class_tags: dict[str, tuple[str, ...]] = {}
    field_pairs: dict[tuple[str, str], tuple[str, str]] = {}
    for line, cells in table:
        pid = table.required(cells, "product_id", line)
        if pid in first:
            raise InputError(f"duplicate product id {pid!r}; first at line {first[pid]}",
                             file=path, line=line, field="product_id")
        first[pid] = line
        for name in numbers:
            _number(cells[table.index[name]], path, line, name)
        classes = table.cell(cells, "product_class") if has_class else ""
        tags = class_tags.get(classes)
        if tags is None:
            tags = class_tags[classes] = tuple(c.strip() for c in classes.split("|") if c.strip())
        resources.append(Resource(
            id=pid,
            name=table.cell(cells, "product_name").strip(),
            description=table.cell(cells, "product_description").strip() if has_description else "",
            tags=tags,
            fields=tuple(field_pairs.setdefault(pair, pair) for pair in
                         ((name, cells[table.index[name]].strip()) for name in kept)
                         if pair[1]),
        ))
    if not resources:
        raise InputError("the file lists no product", file=path)
    return resources


def _number(raw: str, path: Path, line: int, name: str) -> None:
    text = raw.strip()
    if not text:
        return
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise InputError(f"expected a number or nothing, got {text!r}", file=path, line=line,
                         field=name)


def load_wands_queries(path: str | Path) -> list[Query]:
    path = Path(path)
    table = _Table(path, QUERY_COLUMNS)
    queries: list[Query] = []
    first: dict[str, int] = {}
    for line, cells in table:
        qid = table.required(cells, "query_id", line)
        if qid in first:
            raise InputError(f"duplicate query id {qid!r}; first at line {first[qid]}",
                             file=path, line=line, field="query_id")
        first[qid] = line
        text = table.required(cells, "query", line)
        category = table.cell(cells, "query_class").strip() or UNCLASSIFIED
        queries.append(Query(id=qid, text=text, category=category))
    if not queries:
        raise InputError("the file lists no query", file=path)
    return queries


def load_labels(path: str | Path, grade_map: dict[str, int], query_ids: set[str]) -> list[Judgment]:
    path = Path(path)
    table = _Table(path, LABEL_COLUMNS)
    expected = ", ".join(f"{label}={grade}" for label, grade in grade_map.items())
    i_id, i_q, i_p, i_l = (table.index[c] for c in LABEL_COLUMNS)
    judgments: list[Judgment] = []
    ids: dict[str, int] = {}
    pairs: dict[tuple[str, str], int] = {}
    # one string object per distinct id: a run keeps these judgments to its end, and WANDS'
    # 233k labels name 480 queries and 43k products (~20 MiB of repeated strings otherwise)
    same: dict[str, str] = {}
    for line, cells in table:  # a quarter of a million rows: one tight loop, errors out of line
        lid, qid, pid = cells[i_id].strip(), cells[i_q].strip(), cells[i_p].strip()
        qid, pid = same.setdefault(qid, qid), same.setdefault(pid, pid)
        grade = grade_map.get(cells[i_l].strip())
        if grade is None or not (lid and qid and pid) or qid not in query_ids:
            _refuse_label(table, cells, line, grade_map, expected, query_ids)
        if ids.setdefault(lid, line) != line:
            raise InputError(f"duplicate label id {lid!r}; first at line {ids[lid]}", file=path,
                             line=line, field="id")
        if pairs.setdefault((qid, pid), line) != line:
            raise InputError(f"duplicate label of ({qid}, {pid}); first at line "
                             f"{pairs[(qid, pid)]}", file=path, line=line)
        judgments.append(Judgment(qid, pid, grade, None, None, line))
    if not judgments:
        raise InputError("the file holds no label", file=path)
    return judgments


def _refuse_label(table: _Table, cells: list[str], line: int, grade_map: dict[str, int],
                  expected: str, query_ids: set[str]) -> None:
    for name in ("id", "query_id", "product_id"):
        table.required(cells, name, line)
    label = table.cell(cells, "label").strip()
    if label not in grade_map:
        raise InputError(f"label {label!r} is not in the grade map ({expected})", file=table.path,
                         line=line, field="label")
    qid = table.cell(cells, "query_id").strip()
    raise InputError(f"label of query {qid!r}, which query.csv does not list", file=table.path,
                     line=line, field="query_id")


def load_wands(directory: str | Path, *, grade_map: tuple[tuple[str, int], ...] | dict | None = None,
               grade_scale: tuple[int, int] | None = None,
               max_queries: int | None = None) -> Collection:
    """WANDS (or any collection in its layout) as a Collection.

    `grade_map` (label -> grade) and `grade_scale` are run parameters: they override the folder's
    `searcheval.yaml`, which overrides the default map (Exact=3, Partial=1, Irrelevant=0). The
    grade scale is 0..the map's top grade unless declared. `max_queries` keeps the first N queries
    (in file order) and their labels."""
    folder = wands_folder(directory)
    if folder is None:
        missing = [n for n in FILES if not (Path(directory) / n).is_file()]
        raise InputError(f"expected WANDS' files {', '.join(FILES)} (missing: "
                         f"{', '.join(missing)})", file=directory)
    settings = load_settings(folder)
    provenance = {}
    if grade_map is not None:
        pairs = check_setting("grade_map", dict(grade_map))
        provenance["grade_map"] = "run parameter grade_map"
    elif settings.grade_map is not None:
        pairs = settings.grade_map
        provenance["grade_map"] = f"dataset setting in {settings.source}"
    else:
        pairs = WANDS_GRADE_MAP
        provenance["grade_map"] = "default: WANDS as the seed maps it"
    mapping = dict(pairs)
    top = max(mapping.values())
    if grade_scale is not None:
        scale = check_setting("grade_scale", grade_scale)
        provenance["grade_scale"] = "run parameter grade_scale"
    elif settings.grade_scale is not None:
        scale = settings.grade_scale
        provenance["grade_scale"] = f"dataset setting in {settings.source}"
    else:
        scale = (0, max(top, 1))
        provenance["grade_scale"] = "the grade map's range"
    outside = [f"{label}={g}" for label, g in mapping.items() if not scale[0] <= g <= scale[1]]
    if outside:
        raise InputError(f"the grade map gives {', '.join(outside)}, outside the grade scale "
                         f"{scale[0]}..{scale[1]}", field="grade_map")
    sources = {"products": folder / "product.csv", "queries": folder / "query.csv",
               "labels": folder / "label.csv"}
    with paused_gc():
        resources = load_products(sources["products"])
        queries = load_wands_queries(sources["queries"])
        judgments = load_labels(sources["labels"], mapping, {q.id for q in queries})
    if max_queries is not None:
        queries = queries[:max_queries]
        keep = {q.id for q in queries}
        judgments = [j for j in judgments if j.query_id in keep]
    if settings.source is not None:
        sources["settings"] = Path(settings.source)
    return Collection(name=Path(directory).name, resources=resources, queries=queries,
                      judgments=judgments, grade_scale=scale, sources=sources, settings=settings,
                      categories=DATA_CATEGORIES, provenance=provenance,
                      grade_map=tuple(mapping.items()))

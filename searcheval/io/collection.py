"""One entry point for every kind of input collection: the seed fixtures, a dataset folder whose
layout is told by its files (BEIR, WANDS, or the fixtures' own), or a table mapping."""

from __future__ import annotations

from pathlib import Path

from searcheval.errors import InputError
from searcheval.io.beir import is_beir, load_beir
from searcheval.io.fixtures import FILES as FIXTURE_FILES
from searcheval.io.files import control_problem, input_hashes
from searcheval.io.fixtures import is_fixtures, load_fixtures
from searcheval.io.mapped import QueryReader, load_mapped
from searcheval.io.wands import FILES as WANDS_FILES
from searcheval.io.wands import is_wands, load_wands
from searcheval.types import Collection, resources_fingerprint

LAYOUTS = ("beir", "wands", "fixtures")


def dataset_layout(directory: str | Path) -> str:
    """`beir` (corpus.jsonl, queries.jsonl), `wands` (product.csv, query.csv, label.csv, also
    under dataset/) or `fixtures` (catalog.json, golden_queries.json, judgments.csv)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError("expected a dataset folder", file=directory, field="dataset")
    if is_beir(directory):
        return "beir"
    if is_wands(directory):
        return "wands"
    if is_fixtures(directory):
        return "fixtures"
    raise InputError("not a dataset layout searcheval knows: expected BEIR (corpus.jsonl, "
                     f"queries.jsonl, qrels/<split>.tsv), WANDS ({', '.join(WANDS_FILES)}) or "
                     f"the fixtures' ({', '.join(FIXTURE_FILES)}); for other tables write a "
                     "mapping (`mapping`)", file=directory, field="dataset")


def load_collection(*, fixtures: str | Path | None = None, dataset: str | Path | None = None,
                    mapping: str | Path | None = None, split: str = "test",
                    max_queries: int | None = None,
                    grade_map: tuple[tuple[str, int], ...] | dict | None = None,
                    grade_scale: tuple[int, int] | list[int] | None = None,
                    database_url: str | None = None, name: str | None = None,
                    read_query: QueryReader | None = None) -> Collection:
    """Exactly one of: the seed fixtures' folder, a dataset folder (layout detected:
    `dataset_layout`) or a mapping file (`searcheval.io.mapped`).

    `split` is the BEIR qrels split; `max_queries` keeps the first N queries (BEIR, WANDS, mapped);
    `grade_map` (text label -> grade: WANDS, mapped) and `grade_scale` ([lowest, highest]) override
    the dataset's settings; `database_url` is where a mapping's SQL tables live, read by
    `read_query` (searcheval.load_collection hands in searcheval.store.tables.read_query); `name`
    is the dataset's identity when it declares none (a project names its datasets:
    searcheval.project)."""
    given = [name for name, value in (("fixtures", fixtures), ("dataset", dataset),
                                      ("mapping", mapping)) if value is not None]
    if len(given) != 1:
        raise InputError("expected exactly one of `fixtures` (a folder), `dataset` (a BEIR, WANDS "
                         "or fixtures folder) or `mapping` (a table mapping file)"
                         + (f"; got {', '.join(given)}" if given else ""),
                         field=given[-1] if given else "fixtures")
    for folder in (fixtures, dataset):
        if folder is not None:
            refuse_outside_links(Path(folder))
    collection = check_storable(_load(fixtures=fixtures, dataset=dataset, mapping=mapping,
                                      split=split, max_queries=max_queries, grade_map=grade_map,
                                      grade_scale=grade_scale, database_url=database_url,
                                      read_query=read_query))
    # the catalog's identity in Postgres: a declared name, else the content's fingerprint
    collection.declared_name = collection.declared_name or collection.settings.name or name
    collection.fingerprint = resources_fingerprint(collection.resources)
    return collection


def refuse_outside_links(folder: Path) -> None:
    """Refuse a dataset folder holding a symbolic link to anything outside it (a link would make
    a run read, and a refusal quote, a file the dataset's owner never put there). Links inside
    the folder are fine. Nothing of the link's target is read or named."""
    import os

    if not folder.is_dir():
        return
    root = folder.resolve()
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = Path(top) / name
            if not path.is_symlink():
                continue
            target = path.resolve()
            if target != root and root not in target.parents:
                raise InputError("a symbolic link to a file outside the dataset folder: refused "
                                 "(copy the file into the folder)", file=path)


def check_storable(collection: Collection) -> Collection:
    """Refuse text the database or the output formats cannot carry, whatever loader read it: a
    NUL in any text (Postgres), a control character in an id (TREC and CSV files). The error
    names the file and the field (with the id: which resource, query or judgment)."""
    sources = collection.sources

    def where(kind: str):
        return sources.get(kind) or sources.get("corpus" if kind == "catalog" else kind)

    for r in collection.resources:
        values = [("id", r.id, True), ("name", r.name, False), ("description", r.description, False),
                  ("network", r.network, False), ("asset", r.asset, False)]
        values += [("tags", t, False) for t in r.tags]
        values += [(f"fields.{k}", v, False) for k, v in r.fields]
        _refuse_controls(values, where("catalog"), f"resource {r.id!r}")
    for q in collection.queries:
        _refuse_controls([("id", q.id, True), ("text", q.text, False),
                          ("category", q.category, False), ("intent", q.intent, False),
                          ("persona", q.persona, False)], where("queries"), f"query {q.id!r}")
    for j in collection.judgments:
        _refuse_controls([("query_id", j.query_id, True), ("doc_id", j.doc_id, True),
                          ("judge", j.judge, False)], where("judgments"), None, j.line)
    return collection


def _refuse_controls(values, file, what: str | None, line: int | None = None) -> None:
    for name, value, identifier in values:
        if isinstance(value, str):
            problem = control_problem(value, identifier=identifier)
            if problem:
                raise InputError(f"{what} {problem}" if what else problem, file=file, line=line,
                                 field=name)


def _load(*, fixtures, dataset, mapping, split, max_queries, grade_map, grade_scale,
          database_url, read_query) -> Collection:
    scale = tuple(grade_scale) if grade_scale is not None else None
    if mapping is not None:
        return load_mapped(mapping, grade_map=grade_map, grade_scale=scale,
                           max_queries=max_queries, database_url=database_url,
                           read_query=read_query)
    if fixtures is not None:
        _no_grade_map(grade_map, "the fixtures")
        return load_fixtures(fixtures, grade_scale=scale)
    layout = dataset_layout(dataset)
    if layout == "beir":
        _no_grade_map(grade_map, "a BEIR collection")
        return load_beir(dataset, split, max_queries=max_queries, grade_scale=scale)
    if layout == "wands":
        return load_wands(dataset, grade_map=grade_map, grade_scale=scale, max_queries=max_queries)
    _no_grade_map(grade_map, "the fixtures")
    return load_fixtures(dataset, grade_scale=scale)


def collection_hashes(collection: Collection) -> dict[str, str]:
    """The fingerprint of everything a collection was read from: sha256 of each source file, and
    of the rows of each table that is no file (a mapping's SQL)."""
    return {**input_hashes(collection.sources), **collection.digests}


def _no_grade_map(grade_map, what: str) -> None:
    if grade_map is not None:
        raise InputError(f"{what} hold whole-number grades: a grade map applies to text labels "
                         "(WANDS, mapped tables)", field="grade_map")

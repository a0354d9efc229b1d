"""Test collections in BEIR layout: `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl`
(`_id`, `text`) and `qrels/<split>.tsv` (`query-id corpus-id score`, tab-separated)."""

from __future__ import annotations

from pathlib import Path

from searcheval.errors import InputError
from searcheval.io.files import add_grade, parse_grade, read_jsonl, read_text
from searcheval.io.settings import check_setting, load_settings
from searcheval.types import DATA_CATEGORIES, Collection, Judgment, Qrels, Query, Resource


BEIR_HEADER = ("query-id", "corpus-id", "score")


def load_beir_qrels(path: str | Path, *, max_grade: int | None = None, min_grade: int = 0,
                    notes: list[str] | None = None) -> tuple[Qrels, int]:
    """BEIR qrels tsv: `query-id corpus-id score`, tab-separated, with that header line or without
    one (many BEIR exports have none; the file is then read from its first line, and a note saying
    so is appended to `notes`).

    Returns the qrels and the top of the grade scale: `max_grade` when given, else the largest grade
    in the file (BEIR declares no scale). Grades below `min_grade` (0) are refused.
    """
    path = Path(path)
    text = read_text(path)
    lines = text.split("\n")  # a line ends only at "\n"
    first = [h.strip() for h in lines[0].split("\t")]
    start = 1
    if tuple(first) != BEIR_HEADER:
        if first[0].lower() in ("query-id", "query_id", "qid", "query"):
            raise InputError("expected the header 'query-id<TAB>corpus-id<TAB>score', got "
                             f"{lines[0].strip()!r}", file=path, line=1)
        if len(first) != 3:
            raise InputError(f"expected the header 'query-id<TAB>corpus-id<TAB>score' or a first "
                             f"line of 3 tab-separated columns, got {lines[0].strip()!r}",
                             file=path, line=1)
        start = 0
        if notes is not None:
            notes.append(f"{path.name} has no header line: read as query-id, corpus-id, score "
                         "from its first line")
    hi = max_grade if max_grade is not None else 10**9
    qrels: Qrels = {}
    for line_no, line in enumerate(lines[start:], start=start + 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise InputError(f"expected 3 tab-separated columns, got {len(parts)}", file=path,
                             line=line_no)
        qid, doc, raw = (p.strip() for p in parts)
        add_grade(qrels, qid, doc,
                  parse_grade(raw, min_grade, hi, file=path, line=line_no, field_name="score"),
                  path=path, line=line_no)
    top = max_grade if max_grade is not None else max(
        (g for docs in qrels.values() for g in docs.values()), default=1)
    return qrels, max(top, 1)


def is_beir(directory: str | Path) -> bool:
    directory = Path(directory)
    return (directory / "corpus.jsonl").is_file() and (directory / "queries.jsonl").is_file()


def load_beir(directory: str | Path, split: str = "test", *, max_grade: int | None = None,
              max_queries: int | None = None,
              grade_scale: tuple[int, int] | None = None) -> Collection:
    """A test collection in BEIR layout. Only queries judged in `split` are evaluated.

    The grade scale is `grade_scale` (a run parameter), else the folder's `searcheval.yaml`'s,
    else 0..max_grade (the largest grade in the qrels when not given); BEIR documents have no
    commerce fields, so filters and the settlement prior have nothing to act on. `max_queries`
    keeps the first N judged queries (in file order), for quick runs. A query's optional
    `metadata` object may carry `intent`, `persona` and `category`.
    """
    directory = Path(directory)
    settings = load_settings(directory)
    provenance: dict[str, str] = {}
    if grade_scale is not None:
        declared = check_setting("grade_scale", grade_scale)
        provenance["grade_scale"] = "run parameter grade_scale"
    elif settings.grade_scale is not None:
        declared = settings.grade_scale
        provenance["grade_scale"] = f"dataset setting in {settings.source}"
    else:
        declared = None
        provenance["grade_scale"] = ("run parameter max_grade" if max_grade is not None
                                     else "inferred: 0..the largest grade in the qrels")
    if declared is not None:
        max_grade = declared[1]
    notes: list[str] = []
    corpus_path = directory / "corpus.jsonl"
    queries_path = directory / "queries.jsonl"
    qrels_path = directory / "qrels" / f"{split}.tsv"
    for p in (corpus_path, queries_path, qrels_path):
        if not p.exists():
            raise InputError("file not found (expected BEIR layout: corpus.jsonl, queries.jsonl, "
                             f"qrels/{split}.tsv)", file=p)
    resources = []
    seen: set[str] = set()
    for line_no, obj in read_jsonl(corpus_path):
        doc_id = obj.get("_id")
        if not isinstance(doc_id, str) or not doc_id:
            raise InputError("expected a string _id", file=corpus_path, line=line_no, field="_id")
        if doc_id in seen:
            raise InputError(f"duplicate document id {doc_id!r}", file=corpus_path, line=line_no,
                             field="_id")
        seen.add(doc_id)
        resources.append(Resource(id=doc_id, name=str(obj.get("title") or ""),
                                  description=str(obj.get("text") or "")))
    qrels, scale_max = load_beir_qrels(qrels_path, max_grade=max_grade,
                                       min_grade=declared[0] if declared else 0, notes=notes)
    texts: dict[str, str] = {}
    extras: dict[str, dict[str, str]] = {}
    for line_no, obj in read_jsonl(queries_path):
        qid = obj.get("_id")
        if not isinstance(qid, str) or not qid:
            raise InputError("expected a string _id", file=queries_path, line=line_no, field="_id")
        texts[qid] = str(obj.get("text") or "")
        extras[qid] = _query_metadata(obj, queries_path, line_no)
    unknown = [q for q in qrels if q not in texts]
    if unknown:
        raise InputError(f"qrels name {len(unknown)} queries absent from queries.jsonl "
                         f"(first: {unknown[0]!r})", file=qrels_path)
    query_ids = list(qrels)
    if max_queries is not None:
        query_ids = query_ids[:max_queries]
    queries = [Query(id=q, text=texts[q], **extras[q]) for q in query_ids]
    categorised = any(q.category != "all" for q in queries)
    keep = set(query_ids)
    judgments = [Judgment(query_id=q, doc_id=d, grade=g)
                 for q, docs in qrels.items() if q in keep for d, g in docs.items()]
    sources = {"corpus": corpus_path, "queries": queries_path, "qrels": qrels_path}
    if settings.source is not None:
        sources["settings"] = Path(settings.source)
    return Collection(name=directory.name, resources=resources, queries=queries,
                      judgments=judgments,
                      grade_scale=declared if declared else (0, scale_max),
                      sources=sources, settings=settings, notes=notes,
                      categories=DATA_CATEGORIES if categorised else ("all",),
                      provenance=provenance)


def _query_metadata(obj: dict, path: Path, line: int) -> dict[str, str]:
    """`category`, `intent`, `persona` and `query_class` of a BEIR query, from its `metadata`
    object (BEIR's place for anything beyond `_id` and `text`); absent ones are left out."""
    metadata = obj.get("metadata")
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InputError("expected an object", file=path, line=line, field="metadata")
    out: dict[str, str] = {}
    for key in ("category", "intent", "persona", "query_class"):
        value = metadata.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise InputError(f"expected a string, got {value!r}", file=path, line=line,
                             field=f"metadata.{key}")
        out[key] = value
    return out

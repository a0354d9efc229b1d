"""Test collections in BEIR layout: `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl`
(`_id`, `text`) and `qrels/<split>.tsv` (`query-id corpus-id score`, tab-separated)."""

from __future__ import annotations

from pathlib import Path

from searcheval.errors import InputError
from searcheval.io.files import add_grade, parse_grade, read_jsonl, read_text
from searcheval.types import Collection, Judgment, Qrels, Query, Resource


def load_beir_qrels(path: str | Path, *, max_grade: int | None = None) -> tuple[Qrels, int]:
    """BEIR qrels tsv with the header `query-id corpus-id score`.

    Returns the qrels and the top of the grade scale: `max_grade` when given, else the largest grade
    in the file (BEIR declares no scale). Negative grades are refused.
    """
    path = Path(path)
    text = read_text(path)
    lines = text.splitlines()
    header = [h.strip() for h in lines[0].split("\t")]
    if header != ["query-id", "corpus-id", "score"]:
        raise InputError(f"expected the header 'query-id<TAB>corpus-id<TAB>score', got {lines[0]!r}",
                         file=path, line=1)
    hi = max_grade if max_grade is not None else 10**9
    qrels: Qrels = {}
    for line_no, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise InputError(f"expected 3 tab-separated columns, got {len(parts)}", file=path,
                             line=line_no)
        qid, doc, raw = (p.strip() for p in parts)
        add_grade(qrels, qid, doc, parse_grade(raw, 0, hi, file=path, line=line_no, field_name="score"),
             path=path, line=line_no)
    top = max_grade if max_grade is not None else max(
        (g for docs in qrels.values() for g in docs.values()), default=1)
    return qrels, max(top, 1)



def load_beir(directory: str | Path, split: str = "test", *, max_grade: int | None = None,
              max_queries: int | None = None) -> Collection:
    """A test collection in BEIR layout. Only queries judged in `split` are evaluated.

    The grade scale is 0..max_grade (the largest grade in the qrels when not given); BEIR
    documents have no commerce fields, so filters and the settlement prior have nothing to act on.
    `max_queries` keeps the first N judged queries (in file order), for quick runs.
    """
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
    qrels, scale_max = load_beir_qrels(qrels_path, max_grade=max_grade)
    texts: dict[str, str] = {}
    for line_no, obj in read_jsonl(queries_path):
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

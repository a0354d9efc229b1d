"""Judgment files: TREC qrels (`qid 0 docid grade`) and BEIR qrels (`query-id corpus-id score`, tsv).

Both load to `dict[query_id, dict[doc_id, grade]]`. A grade outside the scale, a duplicate
(query, doc) and an unreadable line are refused with the file and line.
"""

from __future__ import annotations

from pathlib import Path

from searcheval.catalog import parse_grade, read_text
from searcheval.errors import InputError
from searcheval.runs import Qrels

DEFAULT_MAX_GRADE = 3


def load_trec_qrels(path: str | Path, *, max_grade: int = DEFAULT_MAX_GRADE) -> Qrels:
    """TREC qrels: `qid iteration docid grade`, whitespace separated, grades 0..max_grade."""
    path = Path(path)
    text = read_text(path)
    qrels: Qrels = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4:
            raise InputError(f"expected 4 columns 'qid 0 docid grade', got {len(parts)}",
                             file=path, line=line_no)
        qid, _, doc, raw = parts
        _add(qrels, qid, doc, parse_grade(raw, 0, max_grade, file=path, line=line_no),
             path=path, line=line_no)
    return qrels


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
        _add(qrels, qid, doc, parse_grade(raw, 0, hi, file=path, line=line_no, field_name="score"),
             path=path, line=line_no)
    top = max_grade if max_grade is not None else max(
        (g for docs in qrels.values() for g in docs.values()), default=1)
    return qrels, max(top, 1)


def load_qrels(path: str | Path, *, max_grade: int | None = None) -> Qrels:
    """Either format, told apart by the BEIR header line."""
    path = Path(path)
    first = read_text(path).splitlines()[0]
    if first.startswith("query-id"):
        return load_beir_qrels(path, max_grade=max_grade)[0]
    return load_trec_qrels(path, max_grade=DEFAULT_MAX_GRADE if max_grade is None else max_grade)


def _add(qrels: Qrels, qid: str, doc: str, grade: int, *, path: Path, line: int) -> None:
    docs = qrels.setdefault(qid, {})
    if doc in docs:
        raise InputError(f"duplicate judgment of ({qid}, {doc})", file=path, line=line)
    docs[doc] = grade

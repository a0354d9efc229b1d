"""TREC files: qrels (`qid 0 docid grade`) and runs (`qid Q0 docid rank score tag`), read and written.

Qrels load to `dict[query_id, dict[doc_id, grade]]`, runs to `dict[query_id, dict[doc_id, score]]`.
A grade outside the scale, a duplicate (query, doc), a bad score and an unreadable line are refused
with the file and line. `load_qrels` also reads BEIR qrels (told apart by their header line).
"""

from __future__ import annotations

import math
from pathlib import Path

from searcheval.defaults import MAX_GRADE
from searcheval.errors import InputError
from searcheval.io.beir import load_beir_qrels
from searcheval.io.files import add_grade, parse_grade, read_text
from searcheval.types import Qrels, RankedRun, Run


def load_trec_qrels(path: str | Path, *, max_grade: int = MAX_GRADE) -> Qrels:
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
        add_grade(qrels, qid, doc, parse_grade(raw, 0, max_grade, file=path, line=line_no),
             path=path, line=line_no)
    return qrels


def load_qrels(path: str | Path, *, max_grade: int | None = None) -> Qrels:
    """Either format, told apart by the BEIR header line, or (BEIR without a header) by a first
    line of three tab-separated columns where TREC has four."""
    path = Path(path)
    first = read_text(path).split("\n")[0]
    if first.startswith("query-id") or len(first.rstrip("\r").split("\t")) == 3:
        return load_beir_qrels(path, max_grade=max_grade)[0]
    return load_trec_qrels(path, max_grade=MAX_GRADE if max_grade is None else max_grade)



def write_trec_run(run: RankedRun, path: str | Path, tag: str | None = None) -> Path:
    """TREC run format: `qid Q0 docid rank score tag`, rank from 1, best first.

    Scores are written at full precision (the shortest text that reads back as the same float),
    so trec_eval, which orders by score and breaks ties by document id, ranks the file exactly as
    the scores were ranked here: rounding would turn near-ties into ties and reorder them."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = tag or run.configuration
    with open(path, "w", encoding="utf-8") as fh:
        for qid in sorted(run.results):
            for rank, (doc, score) in enumerate(run.results[qid], start=1):
                fh.write(f"{qid} Q0 {doc} {rank} {float(score)!r} {tag}\n")
    return path


def load_trec_run(path: str | Path) -> Run:
    """A TREC run file (`qid Q0 docid rank score tag`, whitespace separated).

    Ranks in the file are ignored, as trec_eval ignores them: order comes from the scores.
    """
    path = Path(path)
    text = read_text(path)
    run: Run = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise InputError(f"expected 6 columns 'qid Q0 docid rank score tag', got {len(parts)}",
                             file=path, line=line_no)
        qid, _, doc, _, raw_score, _ = parts
        try:
            score = float(raw_score)
        except ValueError:
            raise InputError(f"expected a numeric score, got {raw_score!r}", file=path,
                             line=line_no, field="score") from None
        if not math.isfinite(score):
            raise InputError(f"expected a finite score, got {raw_score!r}", file=path,
                             line=line_no, field="score")
        docs = run.setdefault(qid, {})
        if doc in docs:
            raise InputError(f"duplicate document {doc!r} in the ranking of query {qid!r}",
                             file=path, line=line_no, field="docid")
        docs[doc] = score
    return run

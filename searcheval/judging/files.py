"""Judgment files in and out: CSV (the fixtures' `judgments.csv` columns), TREC qrels, BEIR qrels
tsv and JSONL, read as `JudgmentRow`s of one import; effective grades or every row written as CSV,
TREC qrels or JSONL.

An import refuses, naming file and line, a grade outside the collection's scale, a query that is
not a golden query, a document the catalog does not hold (when the dataset has a catalog: without
one the search engine holds the documents), and the same (query, document, judge)
twice in one file. Nothing of a refused file is written.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone
from pathlib import Path

from searcheval.errors import InputError
from searcheval.io.beir import load_beir_qrels
from searcheval.io.escape import csv_row, csv_value
from searcheval.io.files import (
    control_problem,
    csv_problem,
    parse_grade,
    parse_time,
    read_jsonl,
    read_text,
)
from searcheval.judging.judgments import Effective, JudgmentRow, check_judge, check_source
from searcheval.types import Collection

IMPORT_FORMATS = ("csv", "trec", "beir", "jsonl")
EXPORT_FORMATS = ("csv", "trec", "jsonl")
CSV_REQUIRED = ("query_id", "resource_id", "grade")
CSV_OPTIONAL = ("judged_at", "judge", "note", "guideline", "doc_id")


def import_format(path: Path, given: str | None = None) -> str:
    """The format `given`, else told by the file's name: .csv, .jsonl, .tsv (BEIR), else TREC."""
    if given is not None:
        if given not in IMPORT_FORMATS:
            raise InputError(f"expected a format {', '.join(IMPORT_FORMATS)}; got {given!r}",
                             field="format")
        return given
    suffix = path.suffix.lower()
    return {".csv": "csv", ".jsonl": "jsonl", ".tsv": "beir"}.get(suffix, "trec")


def read_judgment_file(path: str | Path, collection: Collection, *, judge: str | None = None,
                       source: str = "import", guideline: str | None = None,
                       fmt: str | None = None, now: datetime | None = None) -> list[JudgmentRow]:
    """The rows of one file for `searcheval judgments import`.

    `judge` names the judge of every row; without it each row must name its own (CSV and JSONL
    `judge`). A row without a time is dated `now` (the import's time), so that a new import
    counts as newer than what was there."""
    path = Path(path)
    check_source(source)
    if judge is not None:
        judge = check_judge(judge)
    now = now or datetime.now(timezone.utc)
    fmt = import_format(path, fmt)
    lo, hi = collection.grade_scale
    raw: list[tuple[int, dict]] = []  # (line, fields)
    if fmt == "csv":
        raw = _csv_rows(path)
    elif fmt == "jsonl":
        raw = _jsonl_rows(path)
    elif fmt == "trec":
        text = read_text(path)
        for line_no, line in enumerate(text.split("\n"), start=1):  # a line ends only at "\n"
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 4:
                raise InputError(f"expected 4 columns 'qid 0 docid grade', got {len(parts)}",
                                 file=path, line=line_no)
            raw.append((line_no, {"query_id": parts[0], "doc_id": parts[2], "grade": parts[3]}))
    else:  # beir
        qrels, _ = load_beir_qrels(path, max_grade=hi, min_grade=lo)  # checked line by line there
        raw = [(0, {"query_id": qid, "doc_id": doc, "grade": str(grade)})
               for qid, docs in qrels.items() for doc, grade in docs.items()]
    if not raw:
        raise InputError("the file holds no judgment", file=path)
    queries = {q.id for q in collection.queries}
    resources = {r.id for r in collection.resources}
    rows: list[JudgmentRow] = []
    seen: dict[tuple[str, str, str], int] = {}
    for line_no, fields in raw:
        line = line_no or None
        for name in ("query_id", "doc_id", "judge", "note", "guideline", "judged_at"):
            value = fields.get(name)
            problem = control_problem(value, identifier=name in ("query_id", "doc_id", "judge")) \
                if isinstance(value, str) else None
            if problem:
                raise InputError(f"the value {problem}", file=path, line=line, field=name)
        qid = str(fields.get("query_id") or "").strip()
        doc = str(fields.get("doc_id") or "").strip()
        if not qid:
            raise InputError("expected a query id", file=path, line=line, field="query_id")
        if not doc:
            raise InputError("expected a document id", file=path, line=line, field="doc_id")
        if qid not in queries:
            raise InputError(f"query {qid!r} is not a golden query of {collection.name}",
                             file=path, line=line, field="query_id")
        if collection.has_catalog and doc not in resources:  # else the engine holds them
            raise InputError(f"document {doc!r} is not in the catalog of {collection.name}",
                             file=path, line=line, field="doc_id")
        grade_text = fields.get("grade")
        if isinstance(grade_text, bool) or grade_text is None:
            raise InputError(f"expected a whole grade in {lo}..{hi}", file=path, line=line,
                             field="grade")
        grade = parse_grade(str(grade_text), lo, hi, file=path, line=line or 0)
        who = judge or str(fields.get("judge") or "").strip()
        if not who:
            raise InputError("expected a judge: this row names none; pass --judge NAME",
                             file=path, line=line, field="judge")
        who = check_judge(who)
        key = (qid, doc, who)
        if key in seen:
            raise InputError(f"({qid}, {doc}) is graded twice by {who} in this file (first at "
                             f"line {seen[key]}); a re-judgment is a later import",
                             file=path, line=line)
        seen[key] = line_no
        when = fields.get("judged_at")
        judged_at = parse_time(when, file=path, line=line, field_name="judged_at") \
            if isinstance(when, str) and when.strip() else now
        if when is not None and not isinstance(when, str):
            raise InputError("expected an ISO 8601 timestamp", file=path, line=line,
                             field="judged_at")
        note = fields.get("note")
        if note is not None and not isinstance(note, str):
            raise InputError("expected a string", file=path, line=line, field="note")
        rows.append(JudgmentRow(query_id=qid, doc_id=doc, grade=grade, judge=who,
                                judged_at=judged_at, source=source,
                                guideline=str(fields.get("guideline") or guideline or "") or None,
                                note=(note or None), origin=f"{path.name}:{line_no}"
                                if line_no else path.name))
    return rows


def _csv_rows(path: Path) -> list[tuple[int, dict]]:
    text = read_text(path)
    # a StringIO, not splitlines(): a newline inside a quoted cell stays in the cell (and an id
    # holding one is refused as a control character), never silently joined to the next line
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise InputError("the file is empty", file=path) from None
    except csv.Error as exc:
        raise InputError(csv_problem(exc, "CSV"), file=path, line=reader.line_num) from None
    if "doc_id" in header and "resource_id" not in header:
        header = ["resource_id" if h == "doc_id" else h for h in header]
    missing = [c for c in CSV_REQUIRED if c not in header]
    unknown = [c for c in header if c not in CSV_REQUIRED + CSV_OPTIONAL]
    if missing or unknown:
        detail = []
        if missing:
            detail.append(f"missing column(s) {', '.join(missing)}")
        if unknown:
            detail.append(f"unknown column(s) {', '.join(unknown)}")
        raise InputError(f"{'; '.join(detail)}; expected the columns "
                         f"{','.join(CSV_REQUIRED)} and any of judged_at,judge,note,guideline",
                         file=path, line=1)
    out = []
    while True:
        line_no = reader.line_num + 1  # the line the row starts on
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise InputError(csv_problem(exc, "CSV"), file=path, line=reader.line_num) from None
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise InputError(f"expected {len(header)} columns, got {len(row)}", file=path,
                             line=line_no)
        fields = dict(zip(header, map(csv_value, row)))  # a cell export neutralised, read back
        fields["doc_id"] = fields.pop("resource_id")
        out.append((line_no, fields))
    return out


def _jsonl_rows(path: Path) -> list[tuple[int, dict]]:
    out = []
    for line_no, obj in read_jsonl(path):  # io's reader: one object per line, lines end at \n
        if "resource_id" in obj and "doc_id" not in obj:
            obj["doc_id"] = obj.pop("resource_id")
        unknown = sorted(set(obj) - {"query_id", "doc_id", "grade", "judge", "judged_at", "note",
                                     "guideline"})
        if unknown:
            raise InputError(f"unknown key(s) {', '.join(unknown)}", file=path, line=line_no)
        for key in ("query_id", "doc_id"):
            if not isinstance(obj.get(key), str):
                raise InputError("expected a string", file=path, line=line_no, field=key)
        grade = obj.get("grade")
        if isinstance(grade, bool) or not isinstance(grade, (int, float, str)):
            raise InputError("expected a whole grade", file=path, line=line_no, field="grade")
        obj["grade"] = str(grade)
        out.append((line_no, obj))
    return out


# --------------------------------------------------------------------------- export


def export_effective(effective: Effective, fmt: str) -> str:
    """The effective grades (fresh ones and stale-only pairs alike, as validation sees them):
    CSV in the fixtures' columns (it loads back as a `judgments.csv`), TREC qrels, or JSONL."""
    _check_export(fmt)
    judgments = sorted(effective.judgments, key=lambda j: (j.query_id, j.doc_id))
    out = io.StringIO()
    if fmt == "trec":
        for j in judgments:
            out.write(f"{j.query_id} 0 {j.doc_id} {j.grade}\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["query_id", "resource_id", "grade", "judged_at", "judge"])
        for j in judgments:
            writer.writerow(csv_row([j.query_id, j.doc_id, j.grade, _time(j.judged_at),
                                     j.judge or ""]))
    else:
        for j in judgments:
            out.write(json.dumps({"query_id": j.query_id, "doc_id": j.doc_id, "grade": j.grade,
                                  "judged_at": _time(j.judged_at) or None,
                                  "judges": (j.judge or "").split(",") if j.judge else [],
                                  "rule": effective.rule.name,
                                  "stale": (j.query_id, j.doc_id) in effective.stale_pairs})
                      + "\n")
    return out.getvalue()


ALL_COLUMNS = ("query_id", "resource_id", "grade", "judged_at", "judge", "source", "guideline",
               "note", "origin", "retracted_at", "judge_hash", "prompt_version", "rationale",
               "content_hash")


def export_rows(rows: list[JudgmentRow], fmt: str) -> str:
    """Every row (re-judgments and retracted rows included): CSV or JSONL. TREC qrels hold one
    grade per pair, so `--all` refuses them."""
    _check_export(fmt)
    if fmt == "trec":
        raise InputError("TREC qrels hold one grade per (query, document); export every row as "
                         "csv or jsonl", field="format")
    out = io.StringIO()
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(ALL_COLUMNS)
        for r in rows:
            writer.writerow(csv_row([r.query_id, r.doc_id, r.grade, _time(r.judged_at), r.judge,
                                     r.source, r.guideline or "", r.note or "",
                                     r.origin or "", _time(r.retracted_at), r.judge_hash or "",
                                     r.prompt_version or "", r.rationale or "",
                                     r.content_hash or ""]))
    else:
        for r in rows:
            out.write(json.dumps({**r.to_dict(), "origin": r.origin,
                                  "retracted_at": _time(r.retracted_at) or None}) + "\n")
    return out.getvalue()


def _check_export(fmt: str) -> None:
    if fmt not in EXPORT_FORMATS:
        raise InputError(f"expected a format {', '.join(EXPORT_FORMATS)}; got {fmt!r}",
                         field="format")


def _time(ts: datetime | None) -> str:
    if ts is None:
        return ""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return ts.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")

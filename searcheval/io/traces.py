"""Recorded production traces: what the search service returned for one request, and its labels.

A trace is `{trace_id, ts, query, query_id?, segment, configuration?, retrieved_ids: [ordered],
relevant_ids?: [...], relevance_scores?: {doc_id: grade}}`, and optionally what users did with
the results (`shown_ids`, `clicks`, `feedback`, `session_id`, `user_id`, `configuration_version`:
`searcheval.io.behaviour`, kept in `TraceTable.behaviour`); other fields are ignored. A JSONL file
holds one trace per line.

Every source of traces goes through the same two steps: `parse_trace` validates one record (a dict)
into a `Trace`, and `TraceTable.from_traces` (or the `TraceBuilder` under it) packs Trace objects
into columns. `read_traces` is the JSONL source (`iter_trace_file` streams its valid traces, for
`searcheval traces load`); the database source (`searcheval.store.load_trace_table`) passes its
rows through `iter_trace_records`, which applies the same bad-record rule. `select_traces` keeps a
time window and a segment of a table.

A `TraceTable` is columnar so that a million traces fit in memory: document ids, segments, query
texts and configurations are interned into integer codes, and the ragged lists (`retrieved_ids`,
the trace's own labels) are flat int32 arrays with offsets.

Bad lines (malformed JSON, a missing or invalid field, a grade outside the scale, a duplicate id in
`retrieved_ids` or `relevant_ids`, a repeated `trace_id`) are recorded with their line number and
skipped while their share of the file's non-blank lines is at most `max_bad_share`; above it the
file is refused with one `InputError` naming the file, the count and the first bad line's reason.

A trace's own labels: `relevance_scores` when present and non-empty (graded), otherwise
`relevant_ids` (grade 1 each). Labels joined from judgments and stale-label dropping happen later,
in `searcheval.replay.resolve_labels`.
"""

from __future__ import annotations

import json
import math
from array import array
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from searcheval.errors import InputError
from searcheval.io import behaviour as _behaviour
from searcheval.io.behaviour import (Behaviour, BehaviourBuilder, Click, Feedback,
                                     behaviour_dict, parse_behaviour)

DEFAULT_GRADE_SCALE = (0, 3)
DEFAULT_MAX_BAD_SHARE = 0.01
KEEP_BAD_LINES = 5  # bad lines listed in reports (all are counted)

# label_source codes
NO_LABELS, FROM_SCORES, FROM_IDS = 0, 1, 2
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class Trace:
    """One recorded search request and what the service returned, best first."""

    trace_id: str
    ts: datetime
    query: str
    segment: str
    retrieved_ids: tuple[str, ...]
    query_id: str | None = None
    configuration: str | None = None
    relevant_ids: tuple[str, ...] | None = None
    relevance_scores: Mapping[str, int] | None = None
    # what users did (searcheval.io.behaviour): every field optional
    shown_ids: tuple[str, ...] | None = None
    clicks: tuple[Click, ...] | None = None
    feedback: tuple[Feedback, ...] | None = None
    session_id: str | None = None
    user_id: str | None = None
    configuration_version: str | None = None

    def labels(self) -> dict[str, int]:
        """The trace's own labels: relevance_scores when non-empty, else relevant_ids at grade 1."""
        if self.relevance_scores:
            return dict(self.relevance_scores)
        return {d: 1 for d in self.relevant_ids or ()}


class TraceError(ValueError):
    """One record that is not a valid trace: which field and what was expected (no location)."""

    def __init__(self, field_name: str | None, message: str) -> None:
        self.field = field_name
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"field '{self.field}': {self.message}" if self.field else self.message


_behaviour._Errors.cls = TraceError  # the behaviour fields' bad values are bad trace fields


@dataclass(frozen=True)
class BadLine:
    line: int
    reason: str


@dataclass
class BadLines:
    """Bad lines of one source: all counted, the first few kept with their reasons."""

    count: int = 0
    lines: int = 0  # non-blank lines read (the denominator of the share)
    max_share: float = DEFAULT_MAX_BAD_SHARE
    first: list[BadLine] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.count / self.lines if self.lines else 0.0

    def add(self, line: int, reason: str) -> None:
        self.count += 1
        if len(self.first) < KEEP_BAD_LINES:
            self.first.append(BadLine(line, reason))

    def to_dict(self) -> dict:
        return {"count": self.count, "lines": self.lines, "share": self.share,
                "max_share": self.max_share,
                "first": [{"line": b.line, "reason": b.reason} for b in self.first]}


# --------------------------------------------------------------------------- validation


def parse_trace(obj: Any, *, grade_scale: tuple[int, int] = DEFAULT_GRADE_SCALE) -> Trace:
    """Validate one record into a Trace; raises TraceError naming the field."""
    if not isinstance(obj, dict):
        raise TraceError(None, f"expected a JSON object per line, got {type(obj).__name__}")
    trace_id = obj.get("trace_id")
    if isinstance(trace_id, int) and not isinstance(trace_id, bool):
        trace_id = str(trace_id)
    if not isinstance(trace_id, str) or not trace_id.strip():
        raise TraceError("trace_id", f"expected a non-empty string, got {trace_id!r}")
    ts = _timestamp(obj.get("ts"))
    query = _text(obj, "query")
    segment = _text(obj, "segment")
    query_id = _text(obj, "query_id", required=False)
    configuration = _text(obj, "configuration", required=False)
    if "retrieved_ids" not in obj:
        raise TraceError("retrieved_ids", "missing; expected the ordered list of returned ids")
    retrieved = _ids(obj["retrieved_ids"], "retrieved_ids")
    relevant = obj.get("relevant_ids")
    relevant = None if relevant is None else _ids(relevant, "relevant_ids")
    scores = obj.get("relevance_scores")
    if scores is not None:
        scores = _grades(scores, grade_scale)
    return Trace(trace_id=trace_id, ts=ts, query=query, segment=segment,
                 retrieved_ids=retrieved, query_id=query_id, configuration=configuration,
                 relevant_ids=relevant, relevance_scores=scores,
                 **parse_behaviour(obj, retrieved, grade_scale, _ids))


def _text(obj: dict, key: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise TraceError(key, f"expected a non-empty string, got {value!r}")
    return value


def _timestamp(value: Any) -> datetime:
    if isinstance(value, datetime):  # a database row's timestamptz
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not isinstance(value, str) or not value.strip():
        raise TraceError("ts", f"expected an ISO 8601 timestamp, got {value!r}")
    try:
        ts = datetime.fromisoformat(value.strip())
    except ValueError:
        raise TraceError("ts", f"expected an ISO 8601 timestamp, got {value!r}") from None
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


def _ids(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise TraceError(key, f"expected a list of document ids, got {type(value).__name__}")
    for doc in value:
        if not isinstance(doc, str) or not doc:
            raise TraceError(key, f"expected non-empty string ids, got {doc!r}")
    ids = tuple(value)
    if len(set(ids)) != len(ids):
        first: dict[str, int] = {}
        for position, doc in enumerate(ids, start=1):
            if doc in first:
                raise TraceError(key, f"duplicate id {doc!r} at positions {first[doc]} and "
                                      f"{position}")
            first[doc] = position
    return ids


def _grades(value: Any, scale: tuple[int, int]) -> dict[str, int]:
    if not isinstance(value, dict):
        raise TraceError("relevance_scores",
                         f"expected an object {{doc_id: grade}}, got {type(value).__name__}")
    lo, hi = scale
    out: dict[str, int] = {}
    for doc, grade in value.items():
        if not doc:
            raise TraceError("relevance_scores", "expected non-empty document ids")
        ok = (isinstance(grade, (int, float)) and not isinstance(grade, bool)
              and math.isfinite(grade) and float(grade).is_integer() and lo <= grade <= hi)
        if not ok:
            raise TraceError(f"relevance_scores.{doc}",
                             f"expected a whole grade in {lo}..{hi}, got {grade!r}")
        out[doc] = int(grade)
    return out


# --------------------------------------------------------------------------- the columnar table


class _Interner:
    """Strings to dense integer codes, first seen first (a dict keeps insertion order, so the
    names are its keys)."""

    __slots__ = ("index", "_names")

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.index: dict[str, int] = {}
        self._names: list[str] = []
        for name in names:
            self.code(name)

    def code(self, name: str) -> int:
        index = self.index
        return index.setdefault(name, len(index))

    def codes(self, names: Iterable[str]) -> list[int]:
        index = self.index
        setdefault = index.setdefault
        return [setdefault(name, len(index)) for name in names]

    def get(self, name: str, default: int = -1) -> int:
        return self.index.get(name, default)

    @property
    def names(self) -> list[str]:
        if len(self._names) != len(self.index):
            self._names.extend(islice(self.index, len(self._names), None))
        return self._names


@dataclass
class TraceTable:
    """Traces in columns; row i is the i-th valid trace of the source, in source order.

    Codes index the vocabularies (`segments`, `queries`, `query_ids`, `configurations`, `docs`);
    -1 means absent. `retrieved[retrieved_offsets[i]:retrieved_offsets[i + 1]]` are trace i's
    returned documents best first; `label_docs` / `label_grades` between `label_offsets` its own
    labels, and `label_source[i]` says where they came from (NO_LABELS, FROM_SCORES, FROM_IDS).
    """

    source: str
    trace_ids: list[str]
    lines: np.ndarray  # int64: line (or record) number in the source
    ts: np.ndarray  # float64: seconds since the epoch, UTC
    segment: np.ndarray  # int32 codes into segments
    query: np.ndarray  # int32 codes into queries
    query_id: np.ndarray  # int32 codes into query_ids, -1 when absent
    configuration: np.ndarray  # int32 codes into configurations, -1 when absent
    retrieved: np.ndarray  # int32 doc codes
    retrieved_offsets: np.ndarray  # int64, len n + 1
    label_docs: np.ndarray  # int32 doc codes
    label_grades: np.ndarray  # int32
    label_offsets: np.ndarray  # int64, len n + 1
    label_source: np.ndarray  # int8
    segments: list[str]
    queries: list[str]
    query_ids: list[str]
    configurations: list[str]
    doc_vocab: _Interner
    bad: BadLines = field(default_factory=BadLines)
    behaviour: Behaviour | None = None  # None: no trace of the source had a behaviour field

    def __len__(self) -> int:
        return len(self.trace_ids)

    @property
    def docs(self) -> list[str]:
        return self.doc_vocab.names

    def intern_doc(self, doc: str) -> int:
        """The code of a document id, adding it to the vocabulary (existing codes never change)."""
        return self.doc_vocab.code(doc)

    def __iter__(self) -> Iterator[Trace]:
        return (self.trace(i) for i in range(len(self)))

    def trace(self, i: int) -> Trace:
        docs = self.docs
        ret = tuple(docs[c] for c in self.retrieved[self.retrieved_offsets[i]:
                                                   self.retrieved_offsets[i + 1]].tolist())
        a, b = self.label_offsets[i], self.label_offsets[i + 1]
        labels = dict(zip((docs[c] for c in self.label_docs[a:b].tolist()),
                          self.label_grades[a:b].tolist()))
        source = int(self.label_source[i])
        qid, conf = int(self.query_id[i]), int(self.configuration[i])
        return Trace(
            trace_id=self.trace_ids[i],
            ts=datetime.fromtimestamp(float(self.ts[i]), tz=timezone.utc),
            query=self.queries[self.query[i]],
            segment=self.segments[self.segment[i]],
            retrieved_ids=ret,
            query_id=self.query_ids[qid] if qid >= 0 else None,
            configuration=self.configurations[conf] if conf >= 0 else None,
            relevant_ids=tuple(labels) if source == FROM_IDS else None,
            relevance_scores=labels if source == FROM_SCORES else None,
            **(self.behaviour.fields(i, docs) if self.behaviour is not None else {}),
        )

    def select(self, rows: np.ndarray) -> "TraceTable":
        """A table of the given rows (indices or a boolean mask), sharing the vocabularies."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        retrieved, r_off = take_ragged(self.retrieved, self.retrieved_offsets, rows)
        idx, l_off = ragged_index(self.label_offsets, rows)
        ids = self.trace_ids
        return TraceTable(
            source=self.source, trace_ids=[ids[i] for i in rows.tolist()],
            lines=self.lines[rows], ts=self.ts[rows], segment=self.segment[rows],
            query=self.query[rows], query_id=self.query_id[rows],
            configuration=self.configuration[rows], retrieved=retrieved, retrieved_offsets=r_off,
            label_docs=self.label_docs[idx], label_grades=self.label_grades[idx],
            label_offsets=l_off, label_source=self.label_source[rows], segments=self.segments,
            queries=self.queries, query_ids=self.query_ids, configurations=self.configurations,
            doc_vocab=self.doc_vocab, bad=self.bad,
            behaviour=self.behaviour.select(rows) if self.behaviour is not None else None)

    @classmethod
    def from_traces(cls, traces: Iterable[Trace], source: str = "<traces>", *,
                    bad: BadLines | None = None) -> "TraceTable":
        """Pack validated traces (from any source) into a table. Repeated trace ids are refused.

        `bad` is the source's bad-record count (e.g. from `iter_trace_records`), kept on the
        table for reports; it is read after `traces` is exhausted."""
        builder = TraceBuilder(source)
        if bad is not None:
            builder.bad = bad
        for number, trace in enumerate(traces, start=1):
            first = builder.first_line_of(trace.trace_id)
            if first is not None:
                raise InputError(f"duplicate trace_id {trace.trace_id!r} (first at record {first})",
                                 file=source, line=number, field="trace_id")
            builder.add(trace, number)
        return builder.build()


class TraceBuilder:
    """Appends Trace objects to compact columns; `build()` returns the TraceTable."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.trace_ids: list[str] = []
        self._seen: dict[str, int] = {}
        self._lines = array("q")
        self._ts = array("d")
        self._segment = array("i")
        self._query = array("i")
        self._query_id = array("i")
        self._configuration = array("i")
        self._retrieved = array("i")
        self._r_count = array("q")
        self._label_docs = array("i")
        self._label_grades = array("i")
        self._l_count = array("q")
        self._label_source = array("b")
        self._segments = _Interner()
        self._queries = _Interner()
        self._query_ids = _Interner()
        self._configurations = _Interner()
        self._docs = _Interner()
        self.bad = BadLines()
        self._behaviour = BehaviourBuilder(self._docs.codes, _Interner)

    def first_line_of(self, trace_id: str) -> int | None:
        return self._seen.get(trace_id)

    def add(self, trace: Trace, line: int) -> None:
        self._seen[trace.trace_id] = line
        self.trace_ids.append(trace.trace_id)
        self._lines.append(line)
        self._ts.append((trace.ts - _EPOCH).total_seconds())
        self._segment.append(self._segments.code(trace.segment))
        self._query.append(self._queries.code(trace.query))
        self._query_id.append(-1 if trace.query_id is None
                              else self._query_ids.code(trace.query_id))
        self._configuration.append(-1 if trace.configuration is None
                                   else self._configurations.code(trace.configuration))
        codes = self._docs.codes
        retrieved = codes(trace.retrieved_ids)
        self._retrieved.extend(retrieved)
        self._r_count.append(len(trace.retrieved_ids))
        if trace.relevance_scores:
            self._label_docs.extend(codes(trace.relevance_scores))
            self._label_grades.extend(trace.relevance_scores.values())
            self._l_count.append(len(trace.relevance_scores))
            self._label_source.append(FROM_SCORES)
        elif trace.relevant_ids:
            self._label_docs.extend(codes(trace.relevant_ids))
            self._label_grades.extend([1] * len(trace.relevant_ids))
            self._l_count.append(len(trace.relevant_ids))
            self._label_source.append(FROM_IDS)
        else:
            self._l_count.append(0)
            self._label_source.append(NO_LABELS)
        self._behaviour.add(trace, retrieved)

    def build(self) -> TraceTable:
        def arr(a: array, dtype) -> np.ndarray:
            return np.frombuffer(a, dtype=dtype).copy() if len(a) else np.zeros(0, dtype=dtype)

        def offsets(counts: array) -> np.ndarray:
            out = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(arr(counts, np.int64), out=out[1:])
            return out

        table = TraceTable(
            source=self.source, trace_ids=self.trace_ids, lines=arr(self._lines, np.int64),
            ts=arr(self._ts, np.float64), segment=arr(self._segment, np.int32),
            query=arr(self._query, np.int32), query_id=arr(self._query_id, np.int32),
            configuration=arr(self._configuration, np.int32),
            retrieved=arr(self._retrieved, np.int32), retrieved_offsets=offsets(self._r_count),
            label_docs=arr(self._label_docs, np.int32),
            label_grades=arr(self._label_grades, np.int32),
            label_offsets=offsets(self._l_count), label_source=arr(self._label_source, np.int8),
            segments=self._segments.names, queries=self._queries.names,
            query_ids=self._query_ids.names, configurations=self._configurations.names,
            doc_vocab=self._docs, bad=self.bad,
            behaviour=self._behaviour.build() if self._behaviour.any else None)
        self._seen = {}
        return table


# --------------------------------------------------------------------------- the JSONL source


def check_read_options(grade_scale: tuple[int, int], max_bad_share: float) -> None:
    if isinstance(max_bad_share, bool) or not isinstance(max_bad_share, (int, float)) \
            or not 0.0 <= max_bad_share <= 1.0:
        raise InputError(f"expected a share in [0, 1], got {max_bad_share}", field="max_bad_share")
    lo, hi = grade_scale
    if lo > hi:
        raise InputError(f"expected a grade scale lo..hi with lo <= hi, got {lo}..{hi}",
                         field="grade_scale")


def check_bad_share(bad: BadLines, source: str | Path, *, valid: int, unit: str = "lines",
                    empty: str = "the file holds no trace") -> None:
    """The bad-line rule, once a source is read: refuse it when it holds nothing, when its bad
    share is above `bad.max_share`, or when no valid trace is left."""
    if bad.lines == 0:
        raise InputError(empty, file=source)
    if bad.count and bad.share > bad.max_share:
        first = bad.first[0]
        raise InputError(
            f"{bad.count} of {bad.lines} {unit} are bad ({bad.share:.1%}, more than the "
            f"{bad.max_share:.1%} allowed); first, {unit[:-1]} {first.line}: {first.reason}",
            file=source)
    if not valid:
        raise InputError(f"{empty.replace('no trace', 'no valid trace')}", file=source)


def iter_trace_file(
    path: str | Path,
    *,
    grade_scale: tuple[int, int] = DEFAULT_GRADE_SCALE,
    max_bad_share: float = DEFAULT_MAX_BAD_SHARE,
    bad: BadLines | None = None,
    seen: dict[str, int] | None = None,
) -> Iterator[tuple[int, Trace]]:
    """The valid traces of a JSONL file with their line numbers, streamed.

    Bad lines (see the module docstring) are counted in `bad` and skipped; a repeated trace_id
    is a bad line (`seen` maps the ids yielded so far to their lines). The bad-line rule is
    applied when the file is exhausted: the last `next()` raises InputError if it is broken, so
    a consumer that writes as it reads (e.g. inside a transaction) can roll back. The options
    are checked and the file opened at once, before the first `next()`.
    """
    path = Path(path)
    check_read_options(grade_scale, max_bad_share)
    bad = bad if bad is not None else BadLines()
    bad.max_share = max_bad_share
    try:
        fh = open(path, "r", encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", file=path) from None
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.__class__.__name__}: {exc})",
                         file=path) from None
    return _scan_file(fh, path, grade_scale, bad, {} if seen is None else seen)


def _scan_file(fh, path: Path, grade_scale: tuple[int, int], bad: BadLines,
               seen: dict[str, int]) -> Iterator[tuple[int, Trace]]:
    loads = json.loads
    valid = 0
    with fh:
        line_no = 0
        try:
            for line_no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                bad.lines += 1
                if "\\u0000" in line or "\x00" in line:  # before it reaches Postgres
                    bad.add(line_no, "holds a NUL character (\\u0000), which Postgres text "
                                     "cannot carry")
                    continue
                try:
                    trace = parse_trace(loads(line.rstrip("\r\n")), grade_scale=grade_scale)
                except json.JSONDecodeError as exc:
                    bad.add(line_no, f"invalid JSON: {exc.msg} (column {exc.colno})")
                    continue
                except RecursionError:
                    bad.add(line_no, "invalid JSON: nested too deep")
                    continue
                except TraceError as exc:
                    bad.add(line_no, str(exc))
                    continue
                first = seen.get(trace.trace_id)
                if first is not None:
                    bad.add(line_no, f"field 'trace_id': duplicate {trace.trace_id!r} "
                                     f"(first at line {first})")
                    continue
                seen[trace.trace_id] = line_no
                valid += 1
                yield line_no, trace
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", file=path,
                             line=line_no + 1) from None
    check_bad_share(bad, path, valid=valid)


def read_traces(
    path: str | Path,
    *,
    grade_scale: tuple[int, int] = DEFAULT_GRADE_SCALE,
    max_bad_share: float = DEFAULT_MAX_BAD_SHARE,
) -> TraceTable:
    """A JSONL file of traces as a TraceTable (see the module docstring for bad lines).

    A clean file is read column-wise (`searcheval.io.trace_columns`, pyarrow); a file with
    anything to report, or fields that path does not read, is streamed line by line here, which
    names the file, line and field of every bad value."""
    check_read_options(grade_scale, max_bad_share)
    from searcheval.io.trace_columns import read_columns

    columns = read_columns(path)
    if columns is not None:
        docs = columns.pop("docs")
        return TraceTable(**columns, doc_vocab=_Interner(docs),
                          bad=BadLines(lines=len(columns["trace_ids"]), max_share=max_bad_share))
    builder = TraceBuilder(str(Path(path)))
    for line_no, trace in iter_trace_file(path, grade_scale=grade_scale,
                                          max_bad_share=max_bad_share, bad=builder.bad,
                                          seen=builder._seen):
        builder.add(trace, line_no)
    return builder.build()


def iter_trace_records(
    records: Iterable[Any],
    *,
    source: str,
    grade_scale: tuple[int, int] = DEFAULT_GRADE_SCALE,
    max_bad_share: float = DEFAULT_MAX_BAD_SHARE,
    bad: BadLines | None = None,
    empty: str = "no trace",
) -> Iterator[Trace]:
    """Records (dicts, e.g. database rows) validated through `parse_trace`, streamed.

    A record that is not a valid trace is a bad record, counted in `bad` by its number (1-based,
    in `records` order) with its trace_id, and skipped; the bad-line rule applies, with the
    message's unit 'records', when `records` is exhausted (so the last `next()` may raise).
    `empty` is the message when there is no record at all.
    """
    check_read_options(grade_scale, max_bad_share)
    bad = bad if bad is not None else BadLines()
    bad.max_share = max_bad_share
    return _scan_records(records, source, grade_scale, bad, empty)


def _scan_records(records: Iterable[Any], source: str, grade_scale: tuple[int, int],
                  bad: BadLines, empty: str) -> Iterator[Trace]:
    valid = 0
    for number, record in enumerate(records, start=1):
        bad.lines += 1
        try:
            trace = parse_trace(record, grade_scale=grade_scale)
        except TraceError as exc:
            tid = record.get("trace_id") if isinstance(record, dict) else None
            bad.add(number, f"trace_id {tid!r}: {exc}" if tid is not None else str(exc))
            continue
        valid += 1
        yield trace
    check_bad_share(bad, source, valid=valid, unit="records", empty=empty)


def parse_time_bound(value: str | datetime | None, field_name: str) -> datetime | None:
    """A --since / --until bound: an ISO 8601 timestamp (UTC when it names no zone), or None."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return _timestamp(value)
    except TraceError as exc:
        raise InputError(exc.message, field=field_name) from None


def select_traces(table: TraceTable, *, since: datetime | None = None,
                  until: datetime | None = None, segment: str | None = None) -> TraceTable:
    """The traces with since <= ts < until in `segment` (each bound optional); the table itself
    when nothing is asked. Refused when nothing is left."""
    if since is None and until is None and segment is None:
        return table
    keep = np.ones(len(table), dtype=bool)
    if since is not None:
        keep &= table.ts >= (since - _EPOCH).total_seconds()
    if until is not None:
        keep &= table.ts < (until - _EPOCH).total_seconds()
    if segment is not None:
        code = table.segments.index(segment) if segment in table.segments else -1
        keep &= table.segment == code
    if not keep.any():
        raise InputError(f"no trace matches {describe_selection(since, until, segment)}",
                         file=table.source)
    return table.select(keep)


def describe_selection(since: datetime | None, until: datetime | None,
                       segment: str | None) -> str:
    parts = []
    if since is not None:
        parts.append(f"ts >= {since.isoformat()}")
    if until is not None:
        parts.append(f"ts < {until.isoformat()}")
    if segment is not None:
        parts.append(f"segment = {segment!r}")
    return " and ".join(parts) or "every trace"


# --------------------------------------------------------------------------- ragged helpers


def ragged_index(offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat positions of the given rows' elements, and the offsets of the result."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = offsets[rows]
    counts = offsets[rows + 1] - starts
    out = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    idx = np.repeat(starts - out[:-1], counts) + np.arange(out[-1], dtype=np.int64)
    return idx, out


def take_ragged(values: np.ndarray, offsets: np.ndarray,
                rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The given rows of a ragged array (flat values + offsets), as a new ragged array."""
    idx, out = ragged_index(offsets, rows)
    return values[idx], out


def normalize_query(text: str) -> str:
    """Query text as matched across traces and golden queries: case-folded, single spaces."""
    return " ".join(text.casefold().split())


def as_dict(trace: Trace) -> dict:
    """The JSONL record of a trace (fields that are None are left out)."""
    out: dict[str, Any] = {"trace_id": trace.trace_id,
                           "ts": trace.ts.isoformat().replace("+00:00", "Z"),
                           "query": trace.query}
    if trace.query_id is not None:
        out["query_id"] = trace.query_id
    out["segment"] = trace.segment
    if trace.configuration is not None:
        out["configuration"] = trace.configuration
    out["retrieved_ids"] = list(trace.retrieved_ids)
    if trace.relevant_ids is not None:
        out["relevant_ids"] = list(trace.relevant_ids)
    if trace.relevance_scores is not None:
        out["relevance_scores"] = dict(trace.relevance_scores)
    out.update(behaviour_dict(trace))
    return out

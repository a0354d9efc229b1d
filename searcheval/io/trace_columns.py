"""The fast path of `read_traces`: a clean JSONL file of traces read column-wise with pyarrow.

`searcheval.io.traces` validates a trace file line by line in Python (about 20 us a line: 40 s
for the million traces of `searcheval benchmark traces`). Most files are clean, and a clean file
does not need its lines found: pyarrow's JSON reader parses the whole file in C into columns,
and every rule of `parse_trace` is checked over those columns at once (nulls, empty strings,
timestamps, duplicate ids, click positions). When every check passes, the columns are those
of the `TraceTable` the line-by-line reader would have built (the same codes, in the same
first-seen order: tests/unit/test_trace_columns.py compares the two).

When anything is off -- a malformed line, a value of another type, a field this path does not
read, blank lines, a NUL, a check that fails -- `read_columns` returns None and `read_traces` reads
the file line by line, which names the file, the line and the field of each bad value and
applies the bad-line share. So the error path is exactly the line reader's; only clean files
take this one. Read here: trace_id, ts, query, query_id, segment, configuration,
retrieved_ids, clicks, session_id, user_id, configuration_version. A file with relevant_ids,
relevance_scores, shown_ids or feedback (labelled and UBI traces) is read line by line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from searcheval.io.behaviour import MAX_ID_CHARS, Behaviour

#: a trace with any of these (not null): the file is read line by line (parsed here only to be
#: seen: an object as an empty struct, a list as a list of them)
LINE_BY_LINE_FIELDS = ("relevant_ids", "relevance_scores", "shown_ids", "feedback")
#: what `datetime.fromisoformat` reads the same as pandas' ISO 8601 parser; other forms (week
#: dates, seconds offsets, more than 6 decimals) go line by line
ISO_TS = (r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?"
          r"(Z|[+-]\d{2}:\d{2})?)?$")
ASCII_FIRST = r"^[!-~]"  # starts with a printable non-space ASCII character: strip() keeps it


def _schema():
    import pyarrow as pa

    text = pa.string()
    click = pa.struct([("position", pa.int64()), ("doc_id", text), ("dwell_s", pa.float64())])
    return pa.schema([("trace_id", text), ("ts", text), ("query", text), ("query_id", text),
                      ("segment", text), ("configuration", text),
                      ("retrieved_ids", pa.list_(text)), ("clicks", pa.list_(click)),
                      ("session_id", text), ("user_id", text),
                      ("configuration_version", text),
                      ("relevant_ids", pa.list_(text)), ("relevance_scores", pa.struct([])),
                      ("shown_ids", pa.list_(text)), ("feedback", pa.list_(pa.struct([])))])


def _nonblank(column, *, required: bool) -> bool:
    """Every value a string that `str.strip()` leaves non-empty (None allowed unless
    `required`): the fast ASCII test first, Python's own strip on the few others."""
    import pyarrow.compute as pc

    if column.null_count and required:
        return False
    plain = pc.match_substring_regex(column, ASCII_FIRST)
    rest = pc.filter(column, pc.invert(pc.fill_null(plain, True)))
    return all(s.strip() for s in rest.to_pylist() if s is not None)


def _plain_lines(path: Path, chunk: int = 1 << 24) -> int | None:
    """The number of lines of a file that is UTF-8 and holds no NUL (raw, or escaped as the
    line reader looks for it: such a line is refused there); None otherwise, or when it cannot
    be read (the line reader says why). Read in chunks: never the whole file in memory."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    newlines, tail, last = 0, b"", b""
    try:
        with open(path, "rb") as fh:
            while block := fh.read(chunk):
                if b"\x00" in block or b"\\u0000" in tail + block[:6] or b"\\u0000" in block:
                    return None
                decoder.decode(block)
                newlines += block.count(b"\n")
                tail, last = block[-6:], block[-1:]
            decoder.decode(b"", final=True)
    except (OSError, UnicodeDecodeError):
        return None
    if not last:
        return None  # an empty file
    return newlines + (0 if last == b"\n" else 1)


def _codes(column) -> tuple[np.ndarray, list[str]]:
    """Dictionary codes of a string column (first seen first, -1 for None) and the names."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column)
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
    return codes, encoded.dictionary.to_pylist()


def _offsets(lengths) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _duplicates_in_rows(codes: np.ndarray, offsets: np.ndarray) -> bool:
    """Whether some row repeats a code (a document returned twice)."""
    lengths = np.diff(offsets)
    if len(lengths) == 0 or len(codes) == 0:
        return False
    if (lengths == lengths[0]).all():  # the usual case: every list as long, sorted row-wise
        rows = np.sort(codes.reshape(len(lengths), int(lengths[0])), axis=1)
        return bool((rows[:, 1:] == rows[:, :-1]).any())
    row = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    keyed = np.sort(row * (int(codes.max()) + 1) + codes)
    return bool((keyed[1:] == keyed[:-1]).any())


def read_columns(path: str | Path) -> dict | None:
    """The columns of a clean trace file -- TraceTable's fields, with `docs` (the document ids,
    first seen first) for its `doc_vocab` -- or None when it must be read line by line (see the
    module docstring). No field read on this path holds a grade: no grade scale is needed."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    path = Path(path)
    lines = _plain_lines(path)
    if lines is None:
        return None
    try:
        table = pj.read_json(path, parse_options=pj.ParseOptions(
            explicit_schema=_schema(), unexpected_field_behavior="ignore"))
    except (pa.ArrowException, ValueError, OSError):
        return None
    n = table.num_rows
    if n != lines:  # blank lines, two objects on one line: line numbers would not match
        return None
    if any(table.column(name).null_count != n for name in LINE_BY_LINE_FIELDS):
        return None
    table = table.drop_columns(list(LINE_BY_LINE_FIELDS))
    col = {name: table.column(name).combine_chunks() for name in table.column_names}
    del table
    checks = (_nonblank(col["trace_id"], required=True)
              and _nonblank(col["query"], required=True)
              and _nonblank(col["segment"], required=True)
              and _nonblank(col["query_id"], required=False)
              and _nonblank(col["configuration"], required=False)
              and col["ts"].null_count == 0
              and pc.all(pc.match_substring_regex(col["ts"], ISO_TS)).as_py()
              and pc.count_distinct(col["trace_id"]).as_py() == n)
    if not checks:
        return None
    try:
        import pandas as pd

        stamps = pd.to_datetime(col["ts"].to_pandas(), format="ISO8601", utc=True)
    except (ValueError, OverflowError, pd.errors.OutOfBoundsDatetime):
        return None
    # seconds since the epoch as the line reader computes them: whole microseconds / 1e6
    micros = stamps.to_numpy(dtype="datetime64[us]").astype(np.int64)
    ts = micros.astype(np.float64) / 1e6

    retrieved = col["retrieved_ids"]
    if retrieved.null_count:
        return None
    flat_docs = retrieved.flatten()
    if flat_docs.null_count or (len(flat_docs) and pc.min(pc.utf8_length(flat_docs)).as_py() < 1):
        return None
    r_lengths = pc.list_value_length(retrieved).to_numpy(zero_copy_only=False).astype(np.int64)
    r_offsets = _offsets(r_lengths)
    doc_codes, docs = _codes(flat_docs)
    if _duplicates_in_rows(doc_codes, r_offsets):
        return None

    behaviour = _behaviour(col, doc_codes, docs, r_offsets, r_lengths, n)
    if behaviour is False:
        return None

    segment, segments = _codes(col["segment"])
    query, queries = _codes(col["query"])
    query_id, query_ids = _codes(col["query_id"])
    configuration, configurations = _codes(col["configuration"])
    columns = dict(
        source=str(path), trace_ids=col["trace_id"].to_pylist(),
        lines=np.arange(1, n + 1, dtype=np.int64), ts=ts, segment=segment, query=query,
        query_id=query_id, configuration=configuration, retrieved=doc_codes,
        retrieved_offsets=r_offsets, label_docs=np.zeros(0, dtype=np.int32),
        label_grades=np.zeros(0, dtype=np.int32), label_offsets=np.zeros(n + 1, dtype=np.int64),
        label_source=np.zeros(n, dtype=np.int8),  # no labels on this path (NO_LABELS)
        segments=segments, queries=queries, query_ids=query_ids, configurations=configurations,
        docs=docs, behaviour=behaviour)
    del col
    pa.default_memory_pool().release_unused()  # the parsed columns' memory back to the system
    return columns


def _short_ids(column) -> bool:
    """session_id, user_id, configuration_version: None, or 1..MAX_ID_CHARS characters that
    strip() leaves non-empty."""
    import pyarrow.compute as pc

    if column.null_count == len(column):
        return True
    return _nonblank(column, required=False) and \
        (pc.max(pc.utf8_length(column)).as_py() or 0) <= MAX_ID_CHARS


def _behaviour(col: dict, doc_codes: np.ndarray, docs: list[str], r_offsets: np.ndarray,
               r_lengths: np.ndarray, n: int):
    """The Behaviour columns (None: no trace has a behaviour field; False: a check failed)."""
    import pyarrow.compute as pc

    clicks = col["clicks"]
    short = ("session_id", "user_id", "configuration_version")
    if clicks.null_count == n and all(col[k].null_count == n for k in short):
        return None
    if not all(_short_ids(col[k]) for k in short):
        return False
    c_lengths = pc.list_value_length(clicks).fill_null(0).to_numpy(
        zero_copy_only=False).astype(np.int64)
    each = clicks.flatten()  # the clicks of the non-null lists, in order
    if each.null_count:
        return False  # a click that is not an object
    position = each.field("position")
    if position.null_count:
        return False  # a click named by its doc_id only: the line reader finds its position
    pos = position.to_numpy(zero_copy_only=False).astype(np.int64)
    shown = np.repeat(r_lengths, c_lengths)
    if len(pos) and ((pos < 1) | (pos > shown)).any():
        return False
    doc = each.field("doc_id")
    if doc.null_count != len(doc):  # a doc_id given must be the one shown at its position
        starts = np.repeat(r_offsets[:-1], c_lengths)
        at = doc_codes[starts + pos - 1]
        named, names = _codes(doc)
        given = np.flatnonzero(named >= 0)
        lookup = {name: code for code, name in enumerate(docs)}
        wanted = np.array([lookup.get(names[c], -2) for c in named[given]], dtype=np.int64)
        if (wanted != at[given]).any():
            return False
    dwell = each.field("dwell_s").to_numpy(zero_copy_only=False).astype(np.float64)
    given = ~np.isnan(dwell) if len(dwell) else np.zeros(0, dtype=bool)
    if each.field("dwell_s").null_count != int((~given).sum()):
        return False  # a NaN that was not a null
    if len(dwell) and (~np.isfinite(dwell[given]) | (dwell[given] < 0)).any():
        return False
    session, sessions = _codes(col["session_id"])
    user, users = _codes(col["user_id"])
    version, versions = _codes(col["configuration_version"])
    empty = np.zeros(0, dtype=np.int32)
    return Behaviour(
        shown=doc_codes.copy(), shown_offsets=r_offsets.copy(), has_shown=np.zeros(n, dtype=bool),
        click_pos=pos.astype(np.int32), click_dwell=dwell, click_offsets=_offsets(c_lengths),
        has_clicks=clicks.is_valid().to_numpy(zero_copy_only=False).astype(bool),
        fb_doc=empty, fb_grade=np.zeros(0, dtype=np.int16), fb_thumbs=np.zeros(0, dtype=np.int8),
        fb_offsets=np.zeros(n + 1, dtype=np.int64), session=session, user=user, version=version,
        sessions=sessions, users=users, versions=versions)

"""The column-wise reader of clean trace files (searcheval.io.trace_columns) builds the very table
the line-by-line reader builds, and hands every file with something to report to it, so the
errors still name the file, the line and the field."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from searcheval.errors import InputError
from searcheval.io.trace_columns import read_columns
from searcheval.io.traces import TraceBuilder, iter_trace_file, read_traces

BASE = {"trace_id": "t1", "ts": "2026-03-01T10:00:00Z", "query": "weather api",
        "segment": "web", "retrieved_ids": ["a", "b", "c"]}


def column_wise(path: Path):
    """read_traces' table when the column-wise path takes the file; None when that path hands
    it to the line reader."""
    return None if read_columns(path) is None else read_traces(path)


def line_by_line(path: Path, max_bad_share: float = 0.01):
    """What read_traces built before the column-wise path: every line through parse_trace."""
    builder = TraceBuilder(str(path))
    for line_no, trace in iter_trace_file(path, max_bad_share=max_bad_share, bad=builder.bad,
                                          seen=builder._seen):
        builder.add(trace, line_no)
    return builder.build()


def write(tmp_path: Path, records: list, name: str = "traces.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                            for r in records), encoding="utf-8")
    return path


def assert_same(a, b):
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "doc_vocab":
            assert x.names == y.names
        elif f.name == "behaviour":
            assert (x is None) == (y is None)
            if x is not None:
                for g in fields(x):
                    u, v = getattr(x, g.name), getattr(y, g.name)
                    if isinstance(u, np.ndarray):
                        assert u.dtype == v.dtype and np.array_equal(u, v, equal_nan=True), g.name
                    else:
                        assert u == v, g.name
        elif isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


CLEAN = [
    BASE,
    {**BASE, "trace_id": "t2", "ts": "2026-03-01 10:00:01.25+02:00", "query": "  Ünïcode ☃ ",
     "segment": "app", "query_id": "q7", "configuration": "fused",
     "retrieved_ids": ["c", "d"], "clicks": [{"position": 2}, {"position": 1, "dwell_s": 3}]},
    {**BASE, "trace_id": "t3", "ts": "2026-03-02", "retrieved_ids": [], "clicks": [],
     "query": "a\u001cb",
     "session_id": "s1", "user_id": "u9", "configuration_version": "v2", "extra": {"x": [1]}},
    {**BASE, "trace_id": "t4", "ts": "2026-03-02T00:00", "retrieved_ids": ["e", "a", "b", "f"],
     "clicks": [{"position": 3, "doc_id": "b", "dwell_s": 0.5}], "query": "weather api"},
]


def test_a_clean_file_read_column_wise_is_the_table_the_line_reader_builds(tmp_path):
    path = write(tmp_path, CLEAN)
    fast = column_wise(path)
    assert fast is not None  # this file takes the column-wise path
    assert_same(fast, line_by_line(path))
    assert fast.docs == ["a", "b", "c", "d", "e", "f"]  # first seen first
    assert [t.trace_id for t in fast] == ["t1", "t2", "t3", "t4"]
    assert fast.trace(1).ts.isoformat() == "2026-03-01T08:00:01.250000+00:00"
    assert fast.trace(1).clicks[0].doc_id == "d"  # position 2 of [c, d]


def test_traces_without_behaviour_have_none_either_way(tmp_path):
    path = write(tmp_path, [BASE, {**BASE, "trace_id": "t2"}])
    fast = column_wise(path)
    assert fast is not None and fast.behaviour is None
    assert_same(fast, line_by_line(path))


@pytest.mark.parametrize("bad, why", [
    ({**BASE, "trace_id": "t2", "query": "  "}, "a blank query"),
    ({**BASE, "trace_id": "t2", "query": None}, "a null query"),
    ({**BASE, "trace_id": "t2", "segment": 3}, "a number for a string"),
    ({**BASE, "trace_id": 2}, "an integer trace id (the line reader takes it as text)"),
    ({**BASE}, "a repeated trace id"),
    ({**BASE, "trace_id": "t2", "ts": "yesterday"}, "a timestamp that is not ISO 8601"),
    ({**BASE, "trace_id": "t2", "ts": "2026-13-01T00:00:00Z"}, "month 13"),
    ({**BASE, "trace_id": "t2", "retrieved_ids": ["a", "a"]}, "a duplicate result"),
    ({**BASE, "trace_id": "t2", "retrieved_ids": ["a", ""]}, "an empty id"),
    ({**BASE, "trace_id": "t2", "retrieved_ids": None}, "no results list"),
    ({**BASE, "trace_id": "t2", "clicks": [{"position": 4}]}, "a click below the list"),
    ({**BASE, "trace_id": "t2", "clicks": [{"position": 1, "doc_id": "b"}]}, "a wrong doc_id"),
    ({**BASE, "trace_id": "t2", "clicks": [{"doc_id": "b"}]}, "a click by doc_id only"),
    ({**BASE, "trace_id": "t2", "clicks": [{"position": 1, "dwell_s": -1}]}, "a negative dwell"),
    ({**BASE, "trace_id": "t2", "session_id": "x" * 201}, "a session id too long"),
    ({**BASE, "trace_id": "t2", "relevance_scores": {"a": 3}}, "labels: read line by line"),
    ({**BASE, "trace_id": "t2", "query": "\u001c"}, "a query of a control character strip() drops"),
    ({**BASE, "trace_id": "t2", "feedback": [{"grade": 1}]}, "feedback: read line by line"),
    ({**BASE, "trace_id": "t2", "shown_ids": ["a"]}, "shown ids: read line by line"),
    ({**BASE, "trace_id": "t2", "relevant_ids": ["a"]}, "relevant ids: read line by line"),
    ({**BASE, "trace_id": "t2", "extra": "\u0000"}, "a NUL anywhere in the line"),
    ("{not json", "a malformed line"),
    ("", "a blank line"),
])
def test_anything_to_report_goes_line_by_line(tmp_path, bad, why):
    path = write(tmp_path, [BASE, bad, {**BASE, "trace_id": "t3"}])
    assert column_wise(path) is None, why


def test_a_malformed_value_is_still_refused_with_file_line_and_field(tmp_path):
    records = [{**BASE, "trace_id": f"t{i}"} for i in range(10)]
    records[6] = {**records[6], "clicks": [{"position": 9}]}
    path = write(tmp_path, records)
    with pytest.raises(InputError) as caught:
        read_traces(path, max_bad_share=0.0)
    message = str(caught.value)
    assert str(path) in message and "line 7" in message and "clicks[0].position" in message
    # with a bad share allowed, the other nine are read (line by line) and the bad one counted
    table = read_traces(path, max_bad_share=0.5)
    assert len(table) == 9 and table.bad.count == 1 and table.bad.first[0].line == 7


def test_the_benchmark_simulation_takes_the_column_wise_path(tmp_path):
    from searcheval.bench.traces import write_simulated

    path = tmp_path / "sim.jsonl"
    write_simulated(path, 2_000, queries=50, seed=3)
    fast = column_wise(path)
    assert fast is not None and len(fast) == 2_000
    assert_same(fast, line_by_line(path))


def test_the_byte_scan_finds_a_nul_or_bad_utf8_across_its_chunks(tmp_path):
    from searcheval.io.trace_columns import _plain_lines

    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"q": "ab\\u0000"}\n{"q": "x"}')
    assert _plain_lines(path, chunk=7) is None  # the escape cut between two chunks
    path.write_bytes('{"q": "é"}\n{"q": "x"}\n'.encode())
    assert _plain_lines(path, chunk=8) == 2  # é's two bytes cut between two chunks: still UTF-8
    path.write_bytes(b'{"q": "\xff"}\n')
    assert _plain_lines(path, chunk=4) is None
    path.write_bytes(b"")
    assert _plain_lines(path) is None

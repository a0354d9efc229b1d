"""Traces: validation of one record, the JSONL reader's bad-line rule, the columnar table."""

import json
from datetime import datetime, timezone

import pytest

from searcheval.errors import InputError
from searcheval.io.traces import (
    FROM_IDS,
    FROM_SCORES,
    NO_LABELS,
    Trace,
    TraceError,
    TraceTable,
    as_dict,
    normalize_query,
    parse_trace,
    read_traces,
)


def record(**fields):
    base = {"trace_id": "t1", "ts": "2026-12-01T10:00:00Z", "query": "weather api",
            "segment": "web", "retrieved_ids": ["a", "b"]}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def write_lines(tmp_path, lines, name="traces.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def good_lines(n, start=0):
    return [json.dumps(record(trace_id=f"t{i}")) for i in range(start, start + n)]


# --------------------------------------------------------------------------- one record


def test_parse_trace_keeps_every_field():
    t = parse_trace(record(trace_id=17, query_id="q1", configuration="fused",
                           relevant_ids=["b"], relevance_scores={"a": 3, "b": 2.0},
                           latency_ms=12))
    assert t == Trace(trace_id="17", ts=datetime(2026, 12, 1, 10, tzinfo=timezone.utc),
                      query="weather api", segment="web", retrieved_ids=("a", "b"),
                      query_id="q1", configuration="fused", relevant_ids=("b",),
                      relevance_scores={"a": 3, "b": 2})


def test_naive_timestamp_is_utc():
    t = parse_trace(record(ts="2026-12-01T10:00:00"))
    assert t.ts == datetime(2026, 12, 1, 10, tzinfo=timezone.utc)


def test_labels_graded_scores_win_over_relevant_ids():
    t = parse_trace(record(relevant_ids=["b"], relevance_scores={"a": 2, "c": 0}))
    assert t.labels() == {"a": 2, "c": 0}
    assert parse_trace(record(relevant_ids=["b", "c"])).labels() == {"b": 1, "c": 1}
    assert parse_trace(record(relevance_scores={}, relevant_ids=["b"])).labels() == {"b": 1}
    assert parse_trace(record()).labels() == {}


@pytest.mark.parametrize("fields, message", [
    ({"retrieved_ids": None}, "field 'retrieved_ids': missing; expected the ordered list of "
                              "returned ids"),
    ({"retrieved_ids": "a,b"}, "field 'retrieved_ids': expected a list of document ids, got str"),
    ({"retrieved_ids": ["a", "b", "a"]}, "field 'retrieved_ids': duplicate id 'a' at positions "
                                         "1 and 3"),
    ({"retrieved_ids": ["a", 7]}, "field 'retrieved_ids': expected non-empty string ids, got 7"),
    ({"relevant_ids": ["x", "x"]}, "field 'relevant_ids': duplicate id 'x' at positions 1 and 2"),
    ({"relevance_scores": {"a": 4}}, "field 'relevance_scores.a': expected a whole grade in "
                                     "0..3, got 4"),
    ({"relevance_scores": {"a": -1}}, "field 'relevance_scores.a': expected a whole grade in "
                                      "0..3, got -1"),
    ({"relevance_scores": {"a": 1.5}}, "field 'relevance_scores.a': expected a whole grade in "
                                       "0..3, got 1.5"),
    ({"relevance_scores": {"a": True}}, "field 'relevance_scores.a': expected a whole grade in "
                                        "0..3, got True"),
    ({"relevance_scores": ["a"]}, "field 'relevance_scores': expected an object {doc_id: grade}, "
                                  "got list"),
    ({"segment": None}, "field 'segment': expected a non-empty string, got None"),
    ({"query": " "}, "field 'query': expected a non-empty string, got ' '"),
    ({"trace_id": None}, "field 'trace_id': expected a non-empty string, got None"),
    ({"ts": "yesterday"}, "field 'ts': expected an ISO 8601 timestamp, got 'yesterday'"),
    ({"query_id": 5}, "field 'query_id': expected a non-empty string, got 5"),
])
def test_parse_trace_refusals_name_the_field(fields, message):
    with pytest.raises(TraceError) as err:
        parse_trace(record(**fields))
    assert str(err.value) == message


def test_grade_scale_is_configurable():
    assert parse_trace(record(relevance_scores={"a": 4}), grade_scale=(0, 4)).labels() == {"a": 4}
    with pytest.raises(TraceError):
        parse_trace(record(relevance_scores={"a": 2}), grade_scale=(0, 1))


def test_not_an_object():
    with pytest.raises(TraceError, match="expected a JSON object per line, got list"):
        parse_trace([1, 2])


# --------------------------------------------------------------------------- the reader


def test_each_bad_line_is_reported_with_its_line_number(tmp_path):
    lines = good_lines(3) + [
        '{"trace_id": "x1", "ts": ',  # line 4
        json.dumps(record(trace_id="x2", retrieved_ids=None)),  # line 5
        json.dumps(record(trace_id="x3", relevance_scores={"a": 7})),  # line 6
        json.dumps(record(trace_id="x4", retrieved_ids=["a", "a"])),  # line 7
        json.dumps(record(trace_id="t0")),  # line 8: the trace id of line 1 again
    ]
    table = read_traces(write_lines(tmp_path, lines), max_bad_share=1.0)
    assert len(table) == 3
    assert table.bad.count == 5 and table.bad.lines == 8
    assert table.bad.share == 5 / 8
    assert [(b.line, b.reason) for b in table.bad.first] == [
        (4, "invalid JSON: Expecting value (column 26)"),
        (5, "field 'retrieved_ids': missing; expected the ordered list of returned ids"),
        (6, "field 'relevance_scores.a': expected a whole grade in 0..3, got 7"),
        (7, "field 'retrieved_ids': duplicate id 'a' at positions 1 and 2"),
        (8, "field 'trace_id': duplicate 't0' (first at line 1)"),
    ]


def test_bad_lines_up_to_the_share_are_skipped_and_counted(tmp_path):
    # 1 bad line of 100 non-blank lines = 1 %: exactly the default share, allowed
    lines = good_lines(50) + ["", "not json"] + good_lines(49, start=50)
    table = read_traces(write_lines(tmp_path, lines))
    assert len(table) == 99
    assert (table.bad.count, table.bad.lines) == (1, 100)
    assert table.bad.first[0].line == 52
    assert table.bad.to_dict() == {"count": 1, "lines": 100, "share": 1 / 100, "max_share": 0.01,
                                   "first": [{"line": 52, "reason": table.bad.first[0].reason}]}


def test_bad_lines_over_the_share_refuse_the_file(tmp_path):
    # 2 bad lines of 100 = 2 % > 1 %
    lines = good_lines(10) + [json.dumps(record(trace_id="x", retrieved_ids=None))] \
        + good_lines(88, start=10) + ["{"]
    path = write_lines(tmp_path, lines)
    with pytest.raises(InputError) as err:
        read_traces(path)
    assert str(err.value) == (
        f"{path}: 2 of 100 lines are bad (2.0%, more than the 1.0% allowed); first, line 11: "
        "field 'retrieved_ids': missing; expected the ordered list of returned ids")
    # and accepted when the share allows it
    assert len(read_traces(path, max_bad_share=0.02)) == 98


def test_only_bad_lines_or_nothing(tmp_path):
    with pytest.raises(InputError, match="the file holds no valid trace"):
        read_traces(write_lines(tmp_path, ["{", "{"]), max_bad_share=1.0)
    with pytest.raises(InputError, match="the file holds no trace"):
        read_traces(write_lines(tmp_path, ["", "  "]))
    with pytest.raises(InputError, match="file not found"):
        read_traces(tmp_path / "absent.jsonl")
    with pytest.raises(InputError, match="expected a share in"):
        read_traces(write_lines(tmp_path, good_lines(1)), max_bad_share=1.5)


# --------------------------------------------------------------------------- the table


def test_table_round_trips_traces_and_interns_codes():
    traces = [
        parse_trace(record(trace_id="t1", retrieved_ids=["a", "b"], relevance_scores={"b": 2})),
        parse_trace(record(trace_id="t2", retrieved_ids=["b", "c"], relevant_ids=["c"],
                           query_id="q9", configuration="fused", segment="app")),
        parse_trace(record(trace_id="t3", retrieved_ids=[])),
    ]
    table = TraceTable.from_traces(traces, source="mem")
    assert list(table) == traces
    assert table.docs == ["a", "b", "c"]
    assert table.retrieved.tolist() == [0, 1, 1, 2]
    assert table.retrieved_offsets.tolist() == [0, 2, 4, 4]
    assert table.label_source.tolist() == [FROM_SCORES, FROM_IDS, NO_LABELS]
    assert table.segments == ["web", "app"] and table.segment.tolist() == [0, 1, 0]
    assert table.query_id.tolist() == [-1, 0, -1]
    sub = table.select([2, 1])
    assert [t.trace_id for t in sub] == ["t3", "t2"]
    assert list(sub)[1] == traces[1]
    assert [as_dict(t) for t in TraceTable.from_traces(map(parse_trace, map(as_dict, traces)))] \
        == [as_dict(t) for t in traces]


def test_table_from_traces_refuses_a_repeated_trace_id():
    t = parse_trace(record())
    with pytest.raises(InputError) as err:
        TraceTable.from_traces([t, t], source="db")
    assert str(err.value) == "db:2 field 'trace_id': duplicate trace_id 't1' (first at record 1)"


def test_normalize_query():
    assert normalize_query("  Email   VALIDATION ") == "email validation"


# --------------------------------------------------------------------------- streamed sources


def test_the_file_stream_yields_as_it_reads_and_refuses_at_the_end(tmp_path):
    from searcheval.io.traces import BadLines, iter_trace_file

    path = write_lines(tmp_path, good_lines(2) + ["{"])  # 1 bad of 3 > 1 %
    bad = BadLines()
    stream = iter_trace_file(path, bad=bad)
    assert [(n, t.trace_id) for n, t in (next(stream), next(stream))] == [(1, "t0"), (2, "t1")]
    with pytest.raises(InputError, match=r"1 of 3 lines are bad \(33\.3%"):
        next(stream)
    assert (bad.count, bad.lines) == (1, 3)
    # the options and the file are checked before the first next()
    with pytest.raises(InputError, match="file not found"):
        iter_trace_file(tmp_path / "absent.jsonl")
    with pytest.raises(InputError, match="expected a share in"):
        iter_trace_file(path, max_bad_share=-0.1)


def test_records_are_validated_like_lines_with_their_trace_id():
    from searcheval.io.traces import BadLines, iter_trace_records

    records = [record(trace_id=f"t{i}") for i in range(3)] + [record(trace_id="x", query=" ")]
    bad = BadLines()
    with pytest.raises(InputError) as err:
        list(iter_trace_records(records, source="db", bad=bad))
    assert str(err.value) == ("db: 1 of 4 records are bad (25.0%, more than the 1.0% allowed); "
                              "first, record 4: trace_id 'x': field 'query': expected a "
                              "non-empty string, got ' '")
    bad = BadLines()
    kept = list(iter_trace_records(records, source="db", max_bad_share=0.25, bad=bad))
    assert [t.trace_id for t in kept] == ["t0", "t1", "t2"] and bad.share == 1 / 4
    # a datetime (a database row's timestamptz) is a timestamp too; naive means UTC
    ts = datetime(2026, 12, 1, 10, 0)
    assert parse_trace(record(ts=ts)).ts == ts.replace(tzinfo=timezone.utc)
    with pytest.raises(InputError, match="db: no trace matches segment = 'x'"):
        list(iter_trace_records([], source="db", empty="no trace matches segment = 'x'"))


def test_select_traces_by_time_and_segment():
    from searcheval.io.traces import parse_time_bound, select_traces

    traces = [parse_trace(record(trace_id=f"t{h}", ts=f"2026-12-01T{h:02d}:00:00Z",
                                 segment="web" if h % 2 else "app")) for h in range(8, 14)]
    table = TraceTable.from_traces(traces, source="mem")
    since = parse_time_bound("2026-12-01T09:00:00Z", "since")
    until = parse_time_bound("2026-12-01T13:00:00", "until")  # no zone: UTC
    assert until == datetime(2026, 12, 1, 13, tzinfo=timezone.utc)
    picked = select_traces(table, since=since, until=until)
    assert [t.trace_id for t in picked] == ["t9", "t10", "t11", "t12"]  # since in, until out
    picked = select_traces(table, since=since, until=until, segment="web")
    assert [t.trace_id for t in picked] == ["t9", "t11"]
    assert select_traces(table) is table
    assert parse_time_bound(None, "since") is None and parse_time_bound(" ", "since") is None
    with pytest.raises(InputError, match="mem: no trace matches segment = 'nope'"):
        select_traces(table, segment="nope")
    with pytest.raises(InputError, match="field 'until': expected an ISO 8601 timestamp"):
        parse_time_bound("soon", "until")

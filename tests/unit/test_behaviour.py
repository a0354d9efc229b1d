"""Richer traces (issue 25): shown ids, clicks, feedback, session, user, version; UBI input."""

import json

import pytest

from searcheval.errors import InputError
from searcheval.io.traces import TraceTable, as_dict, read_traces
from searcheval.io.ubi import read_ubi

BASE = {"trace_id": "t1", "ts": "2026-03-01T10:00:00Z", "query": "ocr api", "segment": "web",
        "retrieved_ids": ["a", "b", "c"]}
FULL = {**BASE, "shown_ids": ["a", "b"], "clicks": [{"position": 2, "dwell_s": 31.3},
                                                    {"doc_id": "a"}],
        "feedback": [{"doc_id": "b", "grade": 3}, {"thumbs": "down"}],
        "session_id": "s-1", "user_id": "u-7f3a", "configuration_version": "fused@v12"}


def write(tmp_path, records):
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_every_field_round_trips_through_the_columns(tmp_path):
    table = read_traces(write(tmp_path, [FULL, {**BASE, "trace_id": "t2"}]))
    first = as_dict(table.trace(0))
    assert first["clicks"] == [{"position": 2, "doc_id": "b", "dwell_s": 31.3},
                               {"position": 1, "doc_id": "a"}]
    assert first["feedback"] == [{"doc_id": "b", "grade": 3}, {"thumbs": "down"}]
    assert (first["shown_ids"], first["session_id"], first["user_id"],
            first["configuration_version"]) == (["a", "b"], "s-1", "u-7f3a", "fused@v12")
    # the trace without behaviour has none, also after a selection of rows
    assert as_dict(table.select([1]).trace(0)) == {**BASE, "trace_id": "t2"}
    assert as_dict(table.select([0]).trace(0)) == first
    assert table.trace(0).feedback[0].label() == 3 and table.trace(0).feedback[1].label() == 0


def test_a_source_without_behaviour_has_no_behaviour_columns(tmp_path):
    assert read_traces(write(tmp_path, [BASE])).behaviour is None


@pytest.mark.parametrize("bad, field", [
    ({"clicks": [{"position": 3}]}, "clicks[0].position"),  # 2 shown
    ({"clicks": [{"position": 1, "doc_id": "b"}]}, "clicks[0].doc_id"),
    ({"clicks": [{"doc_id": "c"}]}, "clicks[0].doc_id"),  # returned, not shown
    ({"clicks": [{"position": 1, "dwell_s": -2}]}, "clicks[0].dwell_s"),
    ({"clicks": [{}]}, "clicks[0].position"),
    ({"feedback": [{"doc_id": "a", "grade": 4}]}, "feedback[0].grade"),
    ({"feedback": [{"thumbs": "sideways"}]}, "feedback[0].thumbs"),
    ({"feedback": [{"doc_id": "a"}]}, "feedback[0]"),
    ({"shown_ids": ["a", "a"]}, "shown_ids"),
    ({"user_id": ""}, "user_id"),
])
def test_a_malformed_field_is_refused_with_file_line_and_field(tmp_path, bad, field):
    path = write(tmp_path, [{**FULL, **bad}])
    with pytest.raises(InputError) as err:
        read_traces(path, max_bad_share=0.0)
    message = str(err.value)
    assert str(path) in message and "line 1" in message and f"field '{field}'" in message


def test_ubi_queries_and_events_become_traces_with_clicks(tmp_path):
    queries = tmp_path / "ubi_queries.jsonl"
    events = tmp_path / "ubi_events.jsonl"
    queries.write_text(
        json.dumps({"query_id": "Q1", "timestamp": "2026-03-01T10:00:00Z", "user_query": "ocr",
                    "client_id": "c-9", "application": "shop",
                    "query_response_hit_ids": ["d1", "d2", "d3"],
                    "query_attributes": {"session_id": "s-2"}}) + "\n"
        + json.dumps({"_source": {"query_id": "Q2", "timestamp": "2026-03-01T10:01:00Z",
                                  "user_query": "pdf", "query_response_hit_ids": ["d2"]}}) + "\n")
    events.write_text(
        json.dumps({"action_name": "click", "query_id": "Q1",
                    "event_attributes": {"object": {"object_id": "d3"},
                                         "dwell_time": 12}}) + "\n"
        + json.dumps({"action_name": "impression", "query_id": "Q1"}) + "\n"
        + json.dumps({"action_name": "click", "query_id": "Q1",
                      "event_attributes": {"position": {"ordinal": 1}}}) + "\n")
    table = read_ubi(queries, events)
    q1, q2 = table.trace(0), table.trace(1)
    assert [(c.position, c.doc_id, c.dwell_s) for c in q1.clicks] == [(3, "d3", 12.0),
                                                                      (1, "d1", None)]
    assert (q1.segment, q1.user_id, q1.session_id, q2.segment, q2.clicks) == \
        ("shop", "c-9", "s-2", "ubi", None)


def test_a_malformed_ubi_event_names_file_line_and_field(tmp_path):
    queries = tmp_path / "q.jsonl"
    events = tmp_path / "e.jsonl"
    queries.write_text(json.dumps({"query_id": "Q1", "timestamp": "2026-03-01T10:00:00Z",
                                   "user_query": "ocr", "query_response_hit_ids": ["d1"]}) + "\n")
    events.write_text("\n" + json.dumps({"action_name": "click", "query_id": "Q1",
                                         "event_attributes": {"position": {"ordinal": "2"}}}))
    with pytest.raises(InputError, match=r"e\.jsonl:2 field 'event_attributes.position.ordinal'"):
        read_ubi(queries, events)
    events.write_text(json.dumps({"action_name": "click", "query_id": "Q1",
                                  "event_attributes": {"position": {"ordinal": 5}}}))
    with pytest.raises(InputError, match=r"q\.jsonl:1 field .*clicks\[0\]\.position"):
        read_ubi(queries, events)

"""OpenSearch User Behavior Insights (UBI 1.0) as a source of traces.

UBI writes two indexes; exported as JSONL (one document per line, or an OpenSearch hit with the
document under `_source`) they are read here:

- **queries** (`ubi_queries`): `query_id`, `timestamp`, `user_query`, `query_response_hit_ids`
  (the ids returned, best first), `client_id`, `application`, `query_attributes`;
- **events** (`ubi_events`): `action_name`, `query_id`, `timestamp`, `client_id`, `session_id`,
  `event_attributes.object.object_id` (the document acted on), `event_attributes.position.ordinal`,
  and, when the application records it, `event_attributes.dwell_time` (seconds).

Each UBI query is one trace: `trace_id` and `query_id` from `query_id`, `ts` from `timestamp`,
`query` from `user_query`, `segment` from `application` (default `ubi`), `retrieved_ids` from
`query_response_hit_ids`, `user_id` from `client_id` (UBI's pseudonymous client id), and
`session_id` / `configuration` / `configuration_version` from `query_attributes` when present.
Each event whose `action_name` is a click action (default `click`) is a click: its position is
the object's place among the hit ids, else `position.ordinal` (1-based, as the traces' positions).
Events of other actions (impressions, hovers, add-to-cart) are counted and not used; an event of
a query the queries file does not hold is counted as orphaned.

The reading is strict: a malformed document is refused with the file, its line and the field.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator

from searcheval.errors import InputError
from searcheval.io.traces import Trace, TraceError, TraceTable, parse_trace

CLICK_ACTIONS = ("click",)
DEFAULT_SEGMENT = "ubi"


def _documents(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        fh = open(path, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.__class__.__name__})", file=path) from None
    with fh:
        try:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=path,
                                     line=number) from None
                except RecursionError:
                    raise InputError("JSON nested too deeply", file=path, line=number) from None
                if isinstance(doc, dict) and isinstance(doc.get("_source"), dict):
                    doc = doc["_source"]
                if not isinstance(doc, dict):
                    raise InputError(f"expected a JSON object, got {type(doc).__name__}",
                                     file=path, line=number)
                yield number, doc
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", file=path) from None


def _string(doc: dict, key: str, path: Path, line: int, *, required: bool = True) -> str | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"expected a non-empty string, got {value!r:.60}", file=path, line=line,
                         field=key)
    return value


def _clicks_of(events: Path, click_actions: tuple[str, ...]) -> tuple[dict, dict]:
    """query_id -> [(line, object_id, ordinal, dwell)] of click events; and counts."""
    clicks: dict[str, list] = defaultdict(list)
    counts = {"events": 0, "clicks": 0, "other_actions": 0}
    for line, doc in _documents(events):
        counts["events"] += 1
        action = _string(doc, "action_name", events, line)
        if action not in click_actions:
            counts["other_actions"] += 1
            continue
        qid = _string(doc, "query_id", events, line)
        attrs = doc.get("event_attributes") or {}
        if not isinstance(attrs, dict):
            raise InputError("expected an object", file=events, line=line,
                             field="event_attributes")
        obj = attrs.get("object") or {}
        pos = attrs.get("position") or {}
        if not isinstance(obj, dict) or not isinstance(pos, dict):
            raise InputError("expected objects `object` and `position`", file=events, line=line,
                             field="event_attributes")
        object_id = obj.get("object_id")
        if object_id is not None and (not isinstance(object_id, (str, int))
                                      or isinstance(object_id, bool) or object_id == ""):
            raise InputError(f"expected a document id, got {object_id!r:.60}", file=events,
                             line=line, field="event_attributes.object.object_id")
        ordinal = pos.get("ordinal")
        if ordinal is not None and (isinstance(ordinal, bool) or not isinstance(ordinal, int)):
            raise InputError(f"expected a whole position, got {ordinal!r:.60}", file=events,
                             line=line, field="event_attributes.position.ordinal")
        if object_id is None and ordinal is None:
            raise InputError("a click names neither object.object_id nor position.ordinal",
                             file=events, line=line, field="event_attributes")
        dwell = attrs.get("dwell_time")
        clicks[qid].append((line, None if object_id is None else str(object_id), ordinal, dwell))
        counts["clicks"] += 1
    return clicks, counts


def iter_ubi_traces(queries: str | Path, events: str | Path | None = None, *,
                    click_actions: tuple[str, ...] = CLICK_ACTIONS,
                    grade_scale: tuple[int, int] = (0, 3),
                    counts: dict | None = None) -> Iterator[tuple[int, Trace]]:
    """(line of the query, Trace) per UBI query, with its clicks from `events` (see the module
    docstring). `counts`, when given, receives queries / events / clicks / other_actions /
    orphaned_clicks once the iteration ends."""
    queries, events = Path(queries), (Path(events) if events is not None else None)
    clicks, tally = _clicks_of(events, click_actions) if events is not None else \
        ({}, {"events": 0, "clicks": 0, "other_actions": 0})
    used: set[str] = set()
    n = 0
    for line, doc in _documents(queries):
        qid = _string(doc, "query_id", queries, line)
        hits = doc.get("query_response_hit_ids")
        if hits is None:
            hits = []
        if not isinstance(hits, list):
            raise InputError(f"expected a list of ids, got {type(hits).__name__}", file=queries,
                             line=line, field="query_response_hit_ids")
        hits = [str(h) if isinstance(h, int) and not isinstance(h, bool) else h for h in hits]
        attrs = doc.get("query_attributes") or {}
        if not isinstance(attrs, dict):
            raise InputError("expected an object", file=queries, line=line,
                             field="query_attributes")
        record: dict[str, Any] = {
            "trace_id": qid, "query_id": qid, "ts": doc.get("timestamp"),
            "query": doc.get("user_query"), "segment": doc.get("application") or DEFAULT_SEGMENT,
            "retrieved_ids": hits, "user_id": doc.get("client_id")}
        for key in ("session_id", "configuration", "configuration_version"):
            if attrs.get(key) is not None:
                record[key] = attrs[key]
        if qid in clicks:
            used.add(qid)
            record["clicks"] = []
            for event_line, object_id, ordinal, dwell in clicks[qid]:
                click: dict[str, Any] = {}
                if object_id is not None and object_id in hits:
                    click["position"] = hits.index(object_id) + 1
                elif ordinal is not None:
                    click["position"] = ordinal
                    if object_id is not None:
                        click["doc_id"] = object_id
                else:
                    raise InputError(f"clicked object {object_id!r:.60} is not among query "
                                     f"{qid!r:.60}'s hit ids", file=events, line=event_line,
                                     field="event_attributes.object.object_id")
                if dwell is not None:
                    click["dwell_s"] = dwell
                record["clicks"].append(click)
        try:
            trace = parse_trace(record, grade_scale=grade_scale)
        except TraceError as exc:
            field = {"ts": "timestamp", "query": "user_query", "segment": "application",
                     "retrieved_ids": "query_response_hit_ids",
                     "user_id": "client_id"}.get(exc.field or "", exc.field)
            if field and field.startswith("clicks"):
                field = f"(events of query {qid!r:.60}) {field}"
            raise InputError(exc.message, file=queries, line=line, field=field) from None
        n += 1
        yield line, trace
    if counts is not None:
        counts.update(tally, queries=n,
                      orphaned_clicks=sum(len(v) for k, v in clicks.items() if k not in used))


def read_ubi(queries: str | Path, events: str | Path | None = None, *,
             click_actions: tuple[str, ...] = CLICK_ACTIONS,
             grade_scale: tuple[int, int] = (0, 3)) -> TraceTable:
    """UBI queries (and events) as a TraceTable; refused when the queries file holds none."""
    table = TraceTable.from_traces(
        (t for _, t in iter_ubi_traces(queries, events, click_actions=click_actions,
                                       grade_scale=grade_scale)), str(queries))
    if not len(table):
        raise InputError("the file holds no UBI query", file=queries)
    return table

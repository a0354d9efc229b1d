"""Traces in Postgres: `searcheval traces load` (COPY + upsert, one transaction, the bad-line
rule), `searcheval replay --from-db` (server-side cursor, the same Trace objects and the same
replay JSON as the file), and the replay history tables. Real embedded Postgres."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from searcheval import store
from searcheval.cli import main
from searcheval.errors import InputError
from searcheval.io.traces import Trace, TraceTable, iter_trace_records, read_traces
from searcheval.store import database

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TRACES = FIXTURES / "traces.jsonl"
REFS = ["--thresholds", FIXTURES / "thresholds.json", "--catalog", FIXTURES / "catalog.json",
        "--judgments", FIXTURES / "judgments.csv", "--queries", FIXTURES / "golden_queries.json"]
FIXTURE_LINES = TRACES.read_text().splitlines()


@pytest.fixture
def url(new_database, request) -> str:
    """A fresh migrated database per test: the counts below are of this test's loads only."""
    url = new_database("traces")
    with database.connect(url) as conn:
        database.migrate(conn)
    return url


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def load(capsys, url, path, *extra) -> tuple[int, dict | None, str]:
    code, out, err = cli(capsys, "traces", "load", path, "--database-url", url, "--format",
                         "json", *extra)
    return code, (json.loads(out) if out else None), err


def counts(doc: dict) -> tuple:
    return tuple(doc[k] for k in ("traces", "inserted", "updated", "unchanged", "stored"))


def write(tmp_path, lines, name="t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def comparable(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("source", "timings_s")}


# --------------------------------------------------------------------------- traces load


def test_migration_002_creates_the_table_and_its_indexes(url):
    with database.connect(url) as conn:
        assert 2 in database.applied_migrations(conn)
        indexes = {r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'search_traces'").fetchall()}
    assert {"search_traces_pkey", "search_traces_ts", "search_traces_segment"} <= indexes


def test_load_counts_and_a_reload_changes_nothing(url, capsys):
    code, doc, _ = load(capsys, url, TRACES)
    assert code == 0
    assert counts(doc) == (40, 40, 0, 0, 40)
    assert doc["bad_lines"]["count"] == 0 and doc["bad_lines"]["lines"] == 40
    with database.connect(url) as conn:
        stamps = conn.execute("SELECT max(ingested_at) FROM search_traces").fetchone()
    code, doc, _ = load(capsys, url, TRACES)
    assert code == 0 and counts(doc) == (40, 0, 0, 40, 40)
    with database.connect(url) as conn:  # equal rows are left alone, ingested_at too
        assert conn.execute("SELECT max(ingested_at) FROM search_traces").fetchone() == stamps


def test_changed_traces_are_updated_and_new_ones_inserted(url, capsys, tmp_path):
    load(capsys, url, TRACES)
    first = json.loads(FIXTURE_LINES[0])
    first["retrieved_ids"] = list(reversed(first["retrieved_ids"]))
    new = {**json.loads(FIXTURE_LINES[1]), "trace_id": "tr-new"}
    path = write(tmp_path, [json.dumps(first), FIXTURE_LINES[2], json.dumps(new)])
    code, out, _ = cli(capsys, "traces", "load", path, "--database-url", url)
    assert code == 0
    assert out.splitlines() == [
        f"{path}: 3 traces loaded, 0 bad line(s) of 3 skipped",
        "inserted 1, updated 1, unchanged 1; search_traces holds 41 traces"]
    with database.connect(url) as conn:
        table = store.load_trace_table(conn)
    stored = {t.trace_id: t for t in table}
    assert stored[first["trace_id"]].retrieved_ids == tuple(first["retrieved_ids"])
    assert stored["tr-new"].query == new["query"]


def test_too_many_bad_lines_refuse_the_whole_file(url, capsys, tmp_path):
    load(capsys, url, TRACES)
    lines = [json.dumps({**json.loads(FIXTURE_LINES[0]), "trace_id": "tr-a"}), "{oops",
             json.dumps({**json.loads(FIXTURE_LINES[1]), "trace_id": "tr-b"})]
    path = write(tmp_path, lines)
    code, doc, err = load(capsys, url, path)
    assert code == 2 and doc is None
    assert err == (f"searcheval: {path}: 1 of 3 lines are bad (33.3%, more than the 1.0% "
                   "allowed); first, line 2: invalid JSON: Expecting property name enclosed in "
                   "double quotes (column 2)\n")
    with database.connect(url) as conn:  # the two good lines were streamed, then rolled back
        assert store.count_traces(conn) == 40
    code, doc, _ = load(capsys, url, path, "--max-bad-share", "0.5")
    assert code == 0 and counts(doc) == (2, 2, 0, 0, 42)
    assert doc["bad_lines"]["count"] == 1 and doc["bad_lines"]["first"][0]["line"] == 2


def test_a_database_failure_is_one_line_and_exit_3(capsys, monkeypatch):
    monkeypatch.setattr(database.time, "sleep", lambda seconds: None)  # no retry backoff
    code, _, err = cli(capsys, "traces", "load", TRACES, "--database-url",
                       "postgresql://nobody:secret-pw@/nodb?host=/tmp/se-no-such-dir")
    assert code == 3 and err.startswith("searcheval: cannot connect to the database ")
    assert "secret-pw" not in err and err.count("\n") == 1


# --------------------------------------------------------------------------- reading back


def test_every_field_round_trips(url):
    evil = "'); DROP TABLE search_traces; --"
    cet = timezone(timedelta(hours=1))
    traces = [
        Trace(trace_id="a", ts=datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=timezone.utc),
              query=evil, segment="web", retrieved_ids=("x", "y,z", 'q"uote'),
              query_id="q1", configuration="fused", relevant_ids=("y,z",),
              relevance_scores={"x": 0, "y,z": 3}),
        Trace(trace_id="b", ts=datetime(2026, 12, 1, 11, 0, tzinfo=cet), query="café ☕",
              segment="app", retrieved_ids=(), relevant_ids=(), relevance_scores={}),
        Trace(trace_id="c", ts=datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc), query="q",
              segment="app", retrieved_ids=("x",)),
    ]
    with database.connect(url) as conn:
        assert store.save_traces(conn, traces)["inserted"] == 3
        rows = {r["trace_id"]: r for r in store.iter_trace_rows(conn)}
        back = list(iter_trace_records(store.iter_trace_rows(conn), source="db"))
        table = store.load_trace_table(conn)
    # by ts: b (11:00+01:00 = 10:00:00Z) before a (10:00:00.123456Z) before c
    assert [t.trace_id for t in back] == list(rows) == ["b", "a", "c"]
    assert {t.trace_id: t for t in back} == {t.trace_id: t for t in traces}
    assert list(table) == list(TraceTable.from_traces([traces[1], traces[0], traces[2]]))
    # the table keeps empty labels apart from absent ones
    assert rows["b"]["relevant_ids"] == [] and rows["b"]["relevance_scores"] == {}
    assert rows["c"]["relevant_ids"] is None and rows["c"]["relevance_scores"] is None


def test_rows_stream_through_a_server_side_cursor_in_batches(url):
    with database.connect(url) as conn:
        store.ingest_traces(conn, TRACES)
        seen = []
        for row in store.iter_trace_rows(conn, batch_size=7):
            if not seen:
                cursors = conn.execute("SELECT name FROM pg_cursors").fetchall()
            seen.append(row["trace_id"])
        assert cursors == [("searcheval_traces",)]
        assert conn.execute("SELECT count(*) FROM pg_cursors").fetchone() == (0,)
    assert seen == [json.loads(line)["trace_id"] for line in FIXTURE_LINES]  # ts order


def test_the_table_holds_the_same_traces_as_the_file(url):
    with database.connect(url) as conn:
        store.ingest_traces(conn, TRACES)
        table = store.load_trace_table(conn)
    from_file = read_traces(TRACES)
    assert table.source == "search_traces"
    assert list(table) == list(from_file)
    assert table.bad.to_dict() == from_file.bad.to_dict()


@pytest.mark.parametrize("refs, code", [(REFS[:2], 1), (REFS, 0)],
                         ids=["own-labels-coverage-missed", "with-references-passed"])
def test_replay_from_db_gives_the_json_of_the_file(url, capsys, refs, code):
    load(capsys, url, TRACES)
    code_f, out_f, _ = cli(capsys, "replay", "--traces", TRACES, *refs, "--format", "json")
    code_d, out_d, _ = cli(capsys, "replay", "--from-db", "--database-url", url, *refs,
                           "--format", "json")
    file_doc, db_doc = json.loads(out_f), json.loads(out_d)
    assert code_d == code_f == code
    assert db_doc["coverage"]["share"] == (30 / 40 if code else 35 / 40)
    assert db_doc["source"] == "search_traces"
    assert comparable(db_doc) == comparable(file_doc)


def test_since_until_and_segment_select_the_same_traces_from_both_sources(url, capsys):
    load(capsys, url, TRACES)
    # both bounds are dashboard traces' own timestamps: since is inclusive, until exclusive
    since, until = "2026-12-01T10:13:07Z", "2026-12-01T11:02:38"  # no zone: UTC
    expected = [r for r in map(json.loads, FIXTURE_LINES)
                if since <= r["ts"] < "2026-12-01T11:02:38Z" and r["segment"] == "dashboard"]
    assert len(expected) == 7  # 10:13:07, 10:20:20, ..., 10:55:25
    select = ["--since", since, "--until", until, "--segment", "dashboard"]
    _, out_f, _ = cli(capsys, "replay", "--traces", TRACES, *select, "--format", "json")
    _, out_d, _ = cli(capsys, "replay", "--from-db", "--database-url", url, *select,
                      "--format", "json")
    file_doc, db_doc = json.loads(out_f), json.loads(out_d)
    assert db_doc["traces"] == file_doc["traces"] == 7
    assert comparable(db_doc) == {**comparable(file_doc), "bad_lines": db_doc["bad_lines"]}
    assert db_doc["bad_lines"]["lines"] == len(expected)  # rows read: only the selected ones
    code, _, err = cli(capsys, "replay", "--from-db", "--database-url", url, "--segment", "nope")
    assert code == 2 and err == "searcheval: search_traces: no trace matches segment = 'nope'\n"
    code, _, err = cli(capsys, "replay", "--traces", TRACES, "--since", "yesterday")
    assert code == 2 and err == ("searcheval: --since: expected an ISO 8601 timestamp, "
                                 "got 'yesterday'\n")


def test_rows_written_by_others_are_validated_like_lines(url):
    with database.connect(url) as conn:
        store.ingest_traces(conn, TRACES)
        # another writer: a duplicate retrieved id, and a grade outside 0..3
        conn.execute("INSERT INTO search_traces (trace_id, ts, query, segment, retrieved_ids) "
                     "VALUES ('zz-dup', '2026-12-02T00:00:00Z', 'q', 'web', '{a,b,a}')")
        conn.execute("INSERT INTO search_traces (trace_id, ts, query, segment, retrieved_ids, "
                     "relevance_scores) VALUES ('zz-grade', '2026-12-02T00:00:01Z', 'q', 'web', "
                     "'{a}', '{\"a\": 7}')")
        with pytest.raises(InputError) as refused:
            store.load_trace_table(conn)
        table = store.load_trace_table(conn, max_bad_share=0.05)
    assert str(refused.value) == (
        "search_traces: 2 of 42 records are bad (4.8%, more than the 1.0% allowed); first, "
        "record 41: trace_id 'zz-dup': field 'retrieved_ids': duplicate id 'a' at positions 1 "
        "and 3")
    assert len(table) == 40 and table.bad.count == 2
    assert table.bad.first[1].reason == ("trace_id 'zz-grade': field 'relevance_scores.a': "
                                         "expected a whole grade in 0..3, got 7")


def test_duplicate_ids_given_to_save_traces_write_nothing(url):
    t = Trace(trace_id="a", ts=datetime(2026, 12, 1, tzinfo=timezone.utc), query="q",
              segment="web", retrieved_ids=("x",))
    with database.connect(url) as conn:
        with pytest.raises(InputError, match="a trace_id occurs more than once"):
            store.save_traces(conn, [t, t])
        assert store.count_traces(conn) == 0
        with pytest.raises(InputError, match=r"field 'traces\[1\]': expected a Trace, got dict"):
            store.save_traces(conn, [t, {"trace_id": "b"}])
        assert store.count_traces(conn) == 0


# --------------------------------------------------------------------------- replay history


def test_replay_history_rows_round_trip(url):
    started = datetime(2026, 12, 2, 8, tzinfo=timezone.utc)
    run = {"run_id": "replay-1", "started_at": started, "source": "replay:db",
           "configuration": "fused", "traces": 40, "labelled": 30, "coverage": 30 / 40,
           "min_coverage": 0.8, "passed": False, "summary": {"label": "x"}}
    rows = [{"configuration": "fused", "segment": "web", "metric": "mrr", "value": 0.5, "n": 3,
             "threshold": 0.8},
            {"configuration": "fused", "segment": "web", "metric": "map", "value": None, "n": 0}]
    with database.connect(url) as conn:
        store.save_replay(conn, run, rows)
        with pytest.raises(InputError, match="duplicate row for replay run 'replay-1'"):
            store.save_replay(conn, run, [])
        with pytest.raises(InputError,
                           match=r"field 'metric_rows\[0\]\.n': expected a value for n"):
            store.save_replay(conn, {**run, "run_id": "replay-2"},
                              [{"configuration": "f", "segment": "s", "metric": "m"}])
        runs = store.last_replay_runs(conn, 10)
        metrics = store.replay_run_metrics(conn, "replay-1")
    assert [r["run_id"] for r in runs] == ["replay-1"]  # the refused ones wrote nothing
    assert runs[0]["summary"] == {"label": "x"} and runs[0]["input_hashes"] == {}
    assert [(m["metric"], m["value"], m["n"], m["threshold"]) for m in metrics] == [
        ("map", None, 0, None), ("mrr", 0.5, 3, 0.8)]

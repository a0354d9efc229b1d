"""Production data in Postgres (issue 25): traces with behaviour through search_traces, implicit
judgments with their provenance and the trust rule, and the live monitor's windows (restarts
where it stopped: no window scored twice, none skipped, empty windows recorded)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from searcheval.cli import main
from searcheval.io.traces import as_dict, parse_trace
from searcheval.judging.judgments import JudgmentRow
from searcheval.production.monitor import MonitorSettings, counted_judgments, run_monitor
from searcheval.production.simulate import simulate
from searcheval.store import database
from searcheval.store import judgments as jstore
from searcheval.store import live as lstore
from searcheval.store.traces import load_trace_table, save_traces

pytestmark = pytest.mark.slow
UTC = timezone.utc
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def url(new_database) -> str:
    url = new_database("production")
    with database.connect(url) as conn:
        database.migrate(conn)
    return url


def test_behaviour_round_trips_through_the_trace_table(url):
    record = {"trace_id": "t1", "ts": "2026-03-01T09:00:00Z", "query": "ocr", "segment": "web",
              "retrieved_ids": ["a", "b", "c"], "shown_ids": ["a", "b"],
              "clicks": [{"position": 2, "doc_id": "b", "dwell_s": 4.5}],
              "feedback": [{"doc_id": "a", "thumbs": "up"}, {"grade": 2}],
              "session_id": "s1", "user_id": "u1", "configuration_version": "v7"}
    plain = {"trace_id": "t2", "ts": "2026-03-01T09:01:00Z", "query": "pdf", "segment": "web",
             "retrieved_ids": ["c"]}
    with database.connect(url) as conn:
        counts = save_traces(conn, [parse_trace(record), parse_trace(plain)])
        assert counts["inserted"] == 2
        # the same traces again change nothing (the new columns are compared too)
        assert save_traces(conn, [parse_trace(record), parse_trace(plain)])["unchanged"] == 2
        changed = {**record, "clicks": []}
        assert save_traces(conn, [parse_trace(changed)])["updated"] == 1
        table = load_trace_table(conn)
    assert as_dict(table.trace(0)) == {**as_dict(parse_trace(record)), "clicks": []}
    assert as_dict(table.trace(1)) == plain


def test_implicit_judgments_carry_provenance_and_count_only_while_they_agree(url, tmp_path,
                                                                             capsys):
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in simulate(4000, queries=4, seed=3)))
    args = ["judgments", "implicit", "--traces", str(path), "--judgment-set", "prod",
            "--database-url", url, "--format", "json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["saved"] == first["graded"] == 40
    assert main(args) == 0  # the same window again adds nothing
    assert json.loads(capsys.readouterr().out)["saved"] == 0
    with database.connect(url) as conn:
        rows = jstore.load_implicit_judgments(conn, "prod")
        assert len(rows) == 40
        for r in rows:
            assert r.judge == "implicit:pbm" and r.provenance["model"] == "pbm"
            assert r.provenance["parameters"]["thresholds"] == [0.1, 0.3, 0.6]
            assert r.provenance["window"]["since"] == "2026-03-01T00:00:00+00:00"
            assert r.provenance["impressions"] >= 10
        # no human grade yet: agreement unmeasured, implicit grades do not count
        assert counted_judgments(conn, "prod") == {}
        # humans agree on every pair (they give the implicit grade): now they count, and the
        # trace labels of pairs humans never graded come from the clicks
        agreeing = [JudgmentRow(r.query_id, r.doc_id, r.grade, "ann", T0, source="human")
                    for r in rows[:20]]
        jstore.add_judgments(conn, "prod", agreeing)
        labels = counted_judgments(conn, "prod")
        assert sum(len(v) for v in labels.values()) == 40
        # a second human disagrees on every pair: the median is then the lower grade, kappa
        # drops below the floor and the implicit grades stop counting
        flipped = [JudgmentRow(r.query_id, r.doc_id, 3 - r.grade, "bob", T0, source="human")
                   for r in rows[:20]]
        jstore.add_judgments(conn, "prod", flipped)
        labels = counted_judgments(conn, "prod")
        assert sum(len(v) for v in labels.values()) == 20  # the human pairs only


def trace(k: int, ts: datetime, first_relevant: bool) -> dict:
    return {"trace_id": f"w{k}", "ts": ts.isoformat(), "query": "q", "segment": "web",
            "retrieved_ids": ["a", "b"], "relevant_ids": ["a" if first_relevant else "b"]}


def test_the_monitor_restarts_where_it_stopped(url):
    s = MonitorSettings(name="m", interval_minutes=15, min_labelled=1, warmup=2,
                        start=T0)
    # windows 09:00 and 09:15 have traces (MRR 1 and 1/2), 09:30 none, 09:45 one (MRR 1)
    records = [trace(0, T0 + timedelta(minutes=1), True),
               trace(1, T0 + timedelta(minutes=16), False),
               trace(2, T0 + timedelta(minutes=50), True)]
    with database.connect(url) as conn:
        save_traces(conn, [parse_trace(r) for r in records])
        first = run_monitor(conn, s, now=T0 + timedelta(minutes=40))  # 09:00, 09:15 complete
        assert [(w.start.strftime("%H:%M"), w.traces, w.metrics["mrr"]) for w in first] == \
            [("09:00", 1, 1.0), ("09:15", 1, 0.5)]
        assert run_monitor(conn, s, now=T0 + timedelta(minutes=44)) == []  # nothing new due
        later = run_monitor(conn, s, now=T0 + timedelta(minutes=70))  # up to 10:00
        assert [(w.start.strftime("%H:%M"), w.traces, w.metrics["mrr"]) for w in later] == \
            [("09:30", 0, None), ("09:45", 1, 1.0)]
        series = lstore.load_series(conn, "m")
        starts = [r["window_start"] for r in series]
        assert starts == [T0 + timedelta(minutes=15 * i) for i in range(4)]  # none twice, none skipped
        # the detector's state went on across the runs: target = (1 + 0.5) / 2 after warm-up
        assert series[-1]["detector"]["state"]["target"] == pytest.approx(0.75)
        # storing a window again is refused quietly
        assert not lstore.save_window(conn, later[0].to_row("m"))


def test_sampling_and_implicit_read_the_trace_table(url, capsys):
    with database.connect(url) as conn:
        save_traces(conn, [parse_trace(r) for r in simulate(3000, queries=5, seed=4)])
    assert main(["queries", "sample", "--from-db", "--database-url", url, "--n", "2",
                 "--method", "top", "--until", "2026-03-01T00:30:00Z"]) == 0
    sample = json.loads(capsys.readouterr().out)
    # the first 1800 traces (one a second) are in the window
    assert sample["sample"]["counts"]["traces"] == 1800 and len(sample["queries"]) == 2
    assert main(["judgments", "implicit", "--from-db", "--database-url", url,
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["pairs"] == 50


def test_live_run_exits_1_when_the_detector_fires_and_2_on_a_bad_metric(url, capsys):
    # 8 windows of 15 minutes with 10 labelled traces each: MRR 1 for 4 (the target), then 1/2:
    # S = 0.48, 0.96 > h = 0.9 -> fires in the 6th window (index 5), restarts at 0, and fires
    # again two windows later (index 7)
    records = [trace(100 * w + i, T0 + timedelta(minutes=15 * w, seconds=10 * i), w < 4)
               for w in range(8) for i in range(10)]
    with database.connect(url) as conn:
        save_traces(conn, [parse_trace(r) for r in records])
    base = ["live", "run", "--database-url", url, "--monitor", "cli", "--cusum-h", "0.9",
            "--start", T0.isoformat()]
    assert main(base + ["--metrics", "mrr,nonsense@x", "--now", "2026-03-01T11:00:00Z"]) == 2
    assert "metric" in capsys.readouterr().err
    assert main(base + ["--now", "2026-03-01T11:00:00Z", "--format", "json"]) == 1
    out = capsys.readouterr()
    windows = json.loads(out.out)
    assert [w["alerted"] for w in windows] == [False] * 5 + [True, False, True]
    assert "sustained drop of mrr" in out.err
    assert main(base + ["--now", "2026-03-01T11:10:00Z"]) == 0  # nothing new: no alert again
    assert capsys.readouterr().out == "no complete window since the last run\n"


def test_ubi_queries_and_events_load_into_the_trace_table(url, tmp_path, capsys):
    queries = tmp_path / "ubi_queries.jsonl"
    events = tmp_path / "ubi_events.jsonl"
    queries.write_text(json.dumps({"query_id": "Q1", "timestamp": "2026-03-01T10:00:00Z",
                                   "user_query": "ocr", "client_id": "c-1",
                                   "query_response_hit_ids": ["d1", "d2"]}) + "\n")
    events.write_text(json.dumps({"action_name": "click", "query_id": "Q1",
                                  "event_attributes": {"object": {"object_id": "d2"}}}) + "\n"
                      + json.dumps({"action_name": "click", "query_id": "Q9",
                                    "event_attributes": {"object": {"object_id": "x"}}}) + "\n")
    assert main(["traces", "load", str(queries), "--ubi", "--ubi-events", str(events),
                 "--database-url", url, "--format", "json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert (counts["inserted"], counts["ubi"]["clicks"], counts["ubi"]["orphaned_clicks"]) == \
        (1, 2, 1)
    with database.connect(url) as conn:
        [t] = list(load_trace_table(conn))
    assert (t.trace_id, t.user_id, [(c.position, c.doc_id) for c in t.clicks]) == \
        ("Q1", "c-1", [(2, "d2")])

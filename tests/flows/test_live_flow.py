"""The `searcheval-live` flow under Prefect: windows since the start scored and stored, the
series published as an artifact, one alert for a sustained drop, and a second run that scores no
window the first one did."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from flows.live import live
from searcheval.io.traces import parse_trace
from searcheval.production.monitor import floor_time
from searcheval.store import database
from searcheval.store import live as lstore
from searcheval.store.traces import save_traces


def test_a_sustained_drop_alerts_once_and_a_rerun_scores_nothing_twice(flow_env, webhook):
    now = datetime.now(timezone.utc)
    start = floor_time(now, timedelta(minutes=15)) - timedelta(minutes=15 * 10)
    # 10 complete windows of 20 traces each: 6 with MRR 1 (relevant first), then 4 with MRR
    # 1/2 (relevant second). Target = mean of the 4 warm-up windows = 1; each bad window adds
    # 1 - 0.5 - 0.02 = 0.48 to S, under h = 0.9; the 2nd bad window reaches 0.96 > 0.9 and
    # fires (index 7), S restarts at 0, and the 4th fires again (index 9)
    records = []
    for w in range(10):
        for i in range(20):
            ts = start + timedelta(minutes=15 * w, seconds=30 * i)
            records.append(parse_trace({
                "trace_id": f"w{w}-{i}", "ts": ts.isoformat(), "query": f"q{i}",
                "segment": "web", "retrieved_ids": ["a", "b"],
                "relevant_ids": ["a"] if w < 6 else ["b"]}))
    with database.connect(flow_env) as conn:
        save_traces(conn, records)
    result = live(monitor="flowtest", start=start, cusum_h=0.9, warmup=4)
    assert result["windows"][:10] == [(start + timedelta(minutes=15 * w)).isoformat()
                                      for w in range(10)]
    assert result["alerted"] == [(start + timedelta(minutes=15 * w)).isoformat()
                                 for w in (7, 9)]
    assert [r["mrr"] for r in result["series"][:10]] == [1.0] * 6 + [0.5] * 4
    body = webhook.wait_for(lambda b: b["run_id"].startswith("live:flowtest"), timeout=10)
    assert "sustained drop of mrr" in body["text"]
    again = live(monitor="flowtest", start=start, cusum_h=0.9, warmup=4)
    assert not set(again["windows"]) & set(result["windows"])
    with database.connect(flow_env) as conn:
        starts = [r["window_start"] for r in lstore.load_series(conn, "flowtest")]
    assert starts == sorted(set(starts)) and len(starts) >= 10

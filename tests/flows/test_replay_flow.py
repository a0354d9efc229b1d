"""The replay flow on the fixtures' traces: a coverage miss fails the run, alerts through the
webhook and still publishes; joined judgments make it pass; the database source gives the same
numbers; refused input writes nothing. Real embedded Postgres, the session's Prefect harness."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from flows.replay import replay
from searcheval import store
from searcheval.errors import InputError, ThresholdsMissed
from searcheval.replay.scoring import ALL
from searcheval.store import database

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TRACES = str(FIXTURES / "traces.jsonl")
THRESHOLDS = str(FIXTURES / "thresholds.json")
REFERENCES = dict(catalog=str(FIXTURES / "catalog.json"),
                  judgments=str(FIXTURES / "judgments.csv"),
                  queries=str(FIXTURES / "golden_queries.json"))


def artifacts_of(flow_run_id) -> dict[str, object]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    async def read():
        async with get_client() as client:
            return await client.read_artifacts(artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=["searcheval-replay-metrics",
                                            "searcheval-replay-report"]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))

    return {a.key: a for a in anyio.run(read)}


def flow_run_of(state):
    from prefect.client.orchestration import get_client

    async def read():
        async with get_client() as client:
            return await client.read_flow_run(state.state_details.flow_run_id)

    return anyio.run(read)


def history(url: str, run_id: str) -> tuple[list[dict], dict[tuple, dict]]:
    with database.connect(url) as conn:
        runs = [r for r in store.last_replay_runs(conn, 100) if r["run_id"] == run_id]
        rows = {(r["configuration"], r["segment"], r["metric"]): r
                for r in store.replay_run_metrics(conn, run_id)}
    return runs, rows


def test_coverage_under_the_minimum_fails_the_run_alerts_and_publishes(flow_env, webhook,
                                                                       tmp_path):
    out = tmp_path / "out"
    state = replay(traces=TRACES, thresholds=THRESHOLDS, output=str(out), return_state=True)
    assert state.is_failed()
    assert isinstance(state.result(raise_on_failure=False), ThresholdsMissed)
    # files: replay.json in the replay JSON shape, and report.md
    doc = json.loads((out / "replay.json").read_text())
    assert list(doc)[:5] == ["passed", "traces", "coverage", "segments", "failures"]
    assert doc["passed"] is False and doc["traces"] == 40
    # 19 traces carry relevance_scores, 11 relevant_ids, 10 nothing: 30 of 40 < 0.8
    assert doc["coverage"]["share"] == 30 / 40
    assert [(f["segment"], f["metric"]) for f in doc["failures"]] == [(ALL, "coverage")]
    assert "FAILED (1 miss(es))" in (out / "report.md").read_text()
    # the alert, through the nightly flow's channel
    alerts = [b for b in webhook.bodies if b["run_id"] == doc["run_id"]]
    assert len(alerts) == 1
    # the outcome is said as the nightly says it (flows/outcome.py): prefix and tags
    assert state.message.startswith("GATE TRIPPED: ")
    assert "coverage" in state.message
    tags = flow_run_of(state).tags
    assert "searcheval:verdict=tripped" in tags
    assert f"searcheval:run={doc['run_id']}" in tags
    reason = alerts[0]["reasons"][0]
    assert (reason["kind"], reason["segment"], reason["value"], reason["floor"]) == \
        ("coverage", ALL, 30 / 40, 0.8)
    assert "(30 of 40 traces labelled)" in reason["summary"]
    # history: the run, and per segment metrics with their floors
    runs, rows = history(flow_env, doc["run_id"])
    assert len(runs) == 1
    run = runs[0]
    assert (run["source"], run["configuration"], run["passed"]) == (f"replay:{TRACES}", "fused",
                                                                    False)
    assert (run["traces"], run["labelled"], run["coverage"]) == (40, 30, 30 / 40)
    assert rows[("fused", ALL, "coverage")]["threshold"] == 0.8
    assert rows[("fused", ALL, "coverage")]["n"] == 40
    mcp = rows[("fused", "mcp-tool", "ndcg@10")]
    assert mcp["value"] == pytest.approx(doc["segments"]["mcp-tool"]["ndcg@10"], abs=1e-12)
    assert mcp["threshold"] == 0.75  # the segment's own floor overrides the default 0.7
    assert rows[("fused", "dashboard", "ndcg@10")]["threshold"] == 0.7
    assert rows[("fused", "mcp-tool", "mrr")]["threshold"] == 0.8
    assert rows[("fused", "dashboard", "mrr")]["threshold"] is None
    assert rows[("fused", "mcp-tool", "coverage")]["n"] == 12
    # artifacts under the stable keys
    arts = artifacts_of(state.state_details.flow_run_id)
    assert set(arts) == {"searcheval-replay-metrics", "searcheval-replay-report"}
    table = arts["searcheval-replay-metrics"].data
    table = json.loads(table) if isinstance(table, str) else table
    assert [r["segment"] for r in table] == ["agent-api", "dashboard", "mcp-tool", ALL]
    assert table[-1]["status"] == "missed: coverage"
    assert "FAILED" in arts["searcheval-replay-report"].data


def test_joined_judgments_lift_coverage_and_the_run_passes(flow_env, webhook, tmp_path):
    state = replay(traces=TRACES, thresholds=THRESHOLDS, output=str(tmp_path), **REFERENCES,
                   return_state=True)
    assert state.is_completed()
    result = state.result()
    doc = result["replay"]
    # judgments label 6 of the 10 unlabelled traces; one trace loses its only (stale) label
    assert result["passed"] is True and doc["coverage"]["share"] == (30 + 6 - 1) / 40
    assert doc["stale_labels"] == {"dropped": 3, "traces": 3, "left_unlabelled": 1}
    assert [b for b in webhook.bodies if b["run_id"] == result["run_id"]] == []
    runs, rows = history(flow_env, result["run_id"])
    assert runs[0]["passed"] is True
    assert set(runs[0]["input_hashes"]) == {"thresholds", "catalog", "judgments", "queries"}
    assert rows[("fused", ALL, "coverage")]["value"] == 35 / 40
    assert json.loads((tmp_path / "replay.json").read_text())["run_id"] == result["run_id"]


def test_the_database_source_gives_the_numbers_of_the_file(flow_env, tmp_path):
    with database.connect(flow_env) as conn:
        store.ingest_traces(conn, TRACES)
    from_file = replay(traces=TRACES, thresholds=THRESHOLDS, output=None, **REFERENCES)
    from_db = replay(from_db=True, thresholds=THRESHOLDS, output=None, **REFERENCES)

    def comparable(doc):
        return {k: v for k, v in doc.items() if k not in ("source", "timings_s", "run_id")}

    assert from_db["replay"]["source"] == "search_traces"
    assert comparable(from_db["replay"]) == comparable(from_file["replay"])
    runs, _ = history(flow_env, from_db["run_id"])
    assert runs[0]["source"] == "replay:db"
    # a naive bound is UTC: until 12:00 leaves out the six mcp-tool traces from 12:05:35 on
    selection = dict(segment="mcp-tool", until="2026-12-01T12:00:00", output=None, **REFERENCES)
    only_db = replay(from_db=True, **selection)
    only_file = replay(traces=TRACES, **selection)
    assert only_db["replay"]["traces"] == only_file["replay"]["traces"] == 12 - 6
    assert list(only_db["replay"]["segments"]) == ["mcp-tool"]


def test_refused_input_alerts_and_writes_nothing(flow_env, webhook, tmp_path):
    with database.connect(flow_env) as conn:
        before = len(store.last_replay_runs(conn, 1000))
    state = replay(traces=str(tmp_path / "missing.jsonl"), output=str(tmp_path / "out"),
                   return_state=True)
    assert state.is_failed()
    exc = state.result(raise_on_failure=False)
    assert isinstance(exc, InputError) and "missing.jsonl: file not found" in str(exc)
    assert state.message.startswith("REFUSED: ")
    assert "searcheval:verdict=refused" in flow_run_of(state).tags
    assert [r["kind"] for b in webhook.bodies for r in b["reasons"]] == ["validation"]
    with database.connect(flow_env) as conn:
        assert len(store.last_replay_runs(conn, 1000)) == before
    assert not (tmp_path / "out").exists()
    state = replay(traces=TRACES, from_db=True, return_state=True)
    assert "expected `traces` (a file) or `from_db`, not both" in \
        str(state.result(raise_on_failure=False))

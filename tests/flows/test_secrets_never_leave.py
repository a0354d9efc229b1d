"""Issue 28, high 4: a secret the search service echoes never leaves. A token and a key are
planted in the environment, an `http` configuration sends them (a header and a query
parameter, both `{env:}`), the hostile service quotes both in a 401 body for one query, and a
real nightly (`searcheval run`, Prefect's test harness, the embedded Postgres) runs. Then every
output file, stdout and stderr, every Prefect log, artifact, flow and task run state and event
the API returns, and every row of every table of the database are searched for either value,
in the forms a text could carry it (as is, URL-encoded, base64)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml
from psycopg import sql

from hostile_service import hostile_service
from searcheval.cli import main
from searcheval.store import database

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tok-PLANTED-9c41e7b2d05f"
KEY = "key-PLANTED-3a9d17f0be"
WORD = "rain"  # q04 "is it going to rain tomorrow": the query the service answers with a 401


def forms(value: str) -> list[str]:
    return [value, quote(value, safe=""), base64.b64encode(value.encode()).decode().rstrip("=")]


def leaks(text: str) -> list[str]:
    return [f for secret in (TOKEN, KEY) for f in forms(secret) if f in text]


def every_row(url: str) -> str:
    out = []
    with database.connect(url) as conn, conn.cursor() as cur:
        cur.execute("SELECT table_schema, table_name FROM information_schema.tables "
                    "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') "
                    "AND table_type = 'BASE TABLE'")
        for schema, table in cur.fetchall():
            cur.execute(sql.SQL("SELECT t::text FROM {}.{} AS t").format(
                sql.Identifier(schema), sql.Identifier(table)))
            out.extend(f"{schema}.{table}: {row[0]}" for row in cur.fetchall())
    return "\n".join(out)


def everything_prefect_keeps() -> str:
    from prefect.client.orchestration import get_client

    out = []
    with get_client(sync_client=True) as client:
        offset = 0
        while True:
            logs = client.read_logs(limit=200, offset=offset)
            out.extend(log.message for log in logs)
            if len(logs) < 200:
                break
            offset += 200
        out.extend(json.dumps(a.model_dump(mode="json")) for a in client.read_artifacts())
        for run in client.read_flow_runs():
            out.append(json.dumps(run.model_dump(mode="json")))
            for state in client.read_flow_run_states(run.id):
                out.append(json.dumps(state.model_dump(mode="json", exclude={"data"})))
        out.extend(json.dumps(t.model_dump(mode="json")) for t in client.read_task_runs())
        page = client.request("POST", "/events/filter", json={"limit": 50}).json()
        for _ in range(200):  # every page of events
            out.append(json.dumps(page))
            if not page.get("next_page"):
                break
            import httpx

            page = httpx.get(page["next_page"], timeout=30).json()
    return "\n".join(out)


def test_a_secret_quoted_by_the_service_is_in_no_file_log_artifact_state_or_row(
        flow_env, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)
    monkeypatch.setenv("SEARCH_KEY", KEY)
    with hostile_service() as service:
        configurations = {"configurations": {"hostile": {
            "kind": "http", "served": True,
            "params": {"base_url": f"{service.url}/m/echo401_if/{WORD}", "url": "/search",
                       "query_params": {"q": "{text}", "api_key": {"env": "SEARCH_KEY"}},
                       "headers": {"Authorization": {"env": "SEARCH_TOKEN",
                                                     "prefix": "Bearer "}},
                       "id": "hits[*].id", "score": "hits[*].score", "retries": 0}}}}
        path = tmp_path / "configurations.yaml"
        path.write_text(yaml.safe_dump(configurations))
        out = tmp_path / "out"
        code = main(["run", "--fixtures", str(ROOT / "fixtures"), "--output", str(out),
                     "--configurations-file", str(path), "--no-baseline"])
        sent = [r for r in service.requests if WORD in r["path"]]
    captured = capfd.readouterr()
    # the attack happened: the service got both secrets and quoted them back
    assert sent and any(f"api_key={KEY}" in r["path"] for r in sent)
    assert any(r["headers"].get("Authorization") == f"Bearer {TOKEN}" for r in sent)
    assert code == 3  # one query failed: the run is incomplete, published, not gated (exit 3)
    metrics = json.loads((out / "metrics.json").read_text())
    failures = metrics["failures"]["configurations"]["hostile"]["errors"]
    assert len(failures) == 1
    (cause,) = [e["cause"] for e in failures.values()]
    assert cause.startswith("HTTP 401: unauthorized: the credential Bearer [redacted]"), cause
    # and nothing kept it
    files = sorted(p for p in out.rglob("*") if p.is_file())
    assert {"metrics.json", "report.md"} <= {p.name for p in files}
    for file in files:
        assert leaks(file.read_text(errors="replace")) == [], file
    assert leaks(captured.out) == [] and leaks(captured.err) == []
    assert leaks(everything_prefect_keeps()) == []
    rows = every_row(flow_env)
    assert "[redacted]" in rows  # the cause was stored, redacted
    assert leaks(rows) == []

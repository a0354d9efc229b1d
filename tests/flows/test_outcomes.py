"""Expected outcomes through the real CLI process and the real flow: a refusal is exit 2 with its
line last on stderr, a tripped gate exit 1 with the verdict, neither prints a traceback, and the
flow run still ends Failed with the message. An alert that cannot be delivered changes nothing.
The gate's status is always stated."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from searcheval import store
from searcheval.cli import main
from searcheval.store import database

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def run_count(url: str) -> int:
    with database.connect(url) as conn:
        return len(store.last_runs(conn, 1000))


def cli(args: list[str], env_extra: dict[str, str], *,
        ephemeral: bool = False) -> subprocess.CompletedProcess:
    """`searcheval run ...` in a process of its own, on this session's Prefect API (so its flow
    run can be read back), or with `ephemeral` on a temporary server of its own as a user's
    first run is; and the module's database."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "HF_HUB_OFFLINE": "1",
           **env_extra}
    if ephemeral:
        env.pop("PREFECT_API_URL")
    return subprocess.run([str(Path(sys.executable).parent / "searcheval"), "run", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


def tampered_baseline(tmp_path: Path, metric: str, value: float) -> Path:
    baseline = json.loads((ROOT / "baseline.json").read_text())
    baseline["metrics"][metric] = value
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(baseline))
    return path


def latest_flow_run():
    import anyio
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import FlowRunSort

    async def read():
        async with get_client() as client:
            runs = await client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=1)
            return runs[0]

    return anyio.run(read)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_tripped_gate_exits_1_with_the_verdict_last_and_no_traceback(flow_env, webhook,
                                                                       tmp_path):
    baseline = tampered_baseline(tmp_path, "mrr", 1.0)  # fused has 0.8: trips
    done = cli(["--baseline", str(baseline), "--output", str(tmp_path / "out")],
               {"SEARCHEVAL_DATABASE_URL": flow_env, "SEARCHEVAL_ALERT_WEBHOOK": webhook.url})
    err = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert err[-1].startswith("searcheval: gate tripped for fused: mrr")
    assert "gate: TRIPPED" in done.stdout
    doc = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert (doc["gate"]["status"], doc["gate"]["passed"]) == ("TRIPPED", False)
    assert doc["gate"]["reason"].startswith("mrr")
    assert "**TRIPPED**" in (tmp_path / "out" / "report.md").read_text()
    run = latest_flow_run()
    assert run.state.is_failed() and "gate tripped" in run.state.message
    # the flow run itself says which failure it was (issue 29): message prefix and tags
    assert run.state.message.startswith("GATE TRIPPED: gate tripped for fused: mrr")
    assert {"searcheval:verdict=tripped", f"searcheval:run={doc['run_id']}"} <= set(run.tags)


def test_a_refusal_found_inside_the_flow_exits_2_last_line_no_traceback_flow_run_failed(
        flow_env, webhook, tmp_path):
    """The CLI's own preflight cannot see whether a Prefect block exists; the flow's does."""
    before = run_count(flow_env)
    done = cli(["--output", str(tmp_path / "out"), "--alert-block", "slack-webhook/nobody"],
               {"SEARCHEVAL_DATABASE_URL": flow_env, "SEARCHEVAL_ALERT_WEBHOOK": webhook.url})
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert err[-1] == ("searcheval: --alert-block: no Prefect block 'slack-webhook/nobody': "
                       "create it (prefect block create) or name another")
    run = latest_flow_run()
    assert run.state.is_failed() and "slack-webhook/nobody" in run.state.message
    assert run.state.message.startswith("REFUSED: field 'alert_block': no Prefect block")
    assert "searcheval:verdict=refused" in run.tags
    assert run_count(flow_env) == before and not (tmp_path / "out").exists()
    assert webhook.bodies == []  # a manual run's refusal pages nobody


def test_an_unreachable_alert_endpoint_changes_neither_verdict_nor_exit_code(flow_env,
                                                                             monkeypatch,
                                                                             tmp_path):
    monkeypatch.setenv("SEARCHEVAL_ALERT_WEBHOOK", f"http://127.0.0.1:{free_port()}/down")
    baseline = tampered_baseline(tmp_path, "mrr", 1.0)
    before = run_count(flow_env)
    assert main(["run", "--baseline", str(baseline), "--output", str(tmp_path / "out")]) == 1
    assert run_count(flow_env) == before + 1
    doc = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert doc["gate"]["status"] == "TRIPPED"


def test_a_malformed_webhook_url_is_refused_before_any_work(flow_env, monkeypatch, tmp_path,
                                                            capsys):
    monkeypatch.setenv("SEARCHEVAL_ALERT_WEBHOOK", "127.0.0.1:9/hook?token=s3cret-token")
    before = run_count(flow_env)
    assert main(["run", "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("searcheval: field 'SEARCHEVAL_ALERT_WEBHOOK': expected an http")
    assert "s3cret" not in "\n".join(err)
    assert run_count(flow_env) == before and not (tmp_path / "out").exists()


def test_a_run_without_a_gate_on_purpose_says_not_gated_everywhere(flow_env, tmp_path, capsys):
    code = main(["run", "--no-baseline", "--configurations", "bm25", "--output",
                 str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 0
    assert "gate: NOT GATED (no baseline on purpose (no_baseline))" in captured.out
    # said once on stdout: in the verdict line under the table, which ends with the report
    assert captured.out.count("NOT GATED") == 1
    assert captured.out.rstrip().splitlines()[-1].startswith("gate: NOT GATED")
    doc = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert doc["gate"] == {"passed": None, "tripped": [], "status": "NOT GATED",
                           "reason": "no baseline on purpose (no_baseline)"}
    assert "**NOT GATED**" in (tmp_path / "out" / "report.md").read_text()
    run = latest_flow_run()
    assert run.state.is_completed() and run.state.message.startswith("gate: NOT GATED")
    assert {"searcheval:verdict=passed", f"searcheval:run={doc['run_id']}"} <= set(run.tags)


def test_the_flow_called_directly_refuses_nan_tolerance_and_ends_failed(flow_env, tmp_path):
    import importlib

    nightly = importlib.import_module("flows.nightly").nightly
    before = run_count(flow_env)
    state = nightly(fixtures=str(ROOT / "fixtures"), baseline=str(ROOT / "baseline.json"),
                    tolerance=float("nan"), output=str(tmp_path / "out"), return_state=True)
    assert state.is_failed()
    assert "tolerance" in state.message and state.message.startswith("REFUSED: ")
    assert run_count(flow_env) == before and not (tmp_path / "out").exists()
    # a baseline that gates a configuration the run leaves out: refused, never an open gate
    state = nightly(fixtures=str(ROOT / "fixtures"), baseline=str(ROOT / "baseline.json"),
                    configurations=["bm25"], output=str(tmp_path / "out"), return_state=True)
    assert state.is_failed() and "does not run" in state.message


def test_a_refused_scheduled_run_is_alerted_with_every_problem(flow_env, webhook, tmp_path):
    """A run the deployment's schedule created (the server's own scheduling, `auto_scheduled`)
    pages on-call when its input is refused, whichever input it was: here the baseline."""
    import importlib

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.flow_engine import run_flow

    nightly = importlib.import_module("flows.nightly").nightly
    broken = tmp_path / "baseline.json"
    broken.write_text('{"configuration": "fused", "metrics": {"mrr": NaN}}')
    parameters = {"fixtures": str(ROOT / "fixtures"), "baseline": str(broken),
                  "output": str(tmp_path / "out"), "tolerance": -1.0}
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name(nightly.name)
        deployment_id = client.create_deployment(
            flow_id=flow_id, name="scheduled-refusal", entrypoint="flows/nightly.py:nightly",
            parameters=parameters,
            schedules=[DeploymentScheduleCreate(schedule=CronSchedule(cron="* * * * *"),
                                                active=True)])
        # the scheduler's own call, for the minute just gone: a run due now (a future one
        # would make the engine wait for its time)
        now = datetime.now(timezone.utc)
        client._client.post(f"/deployments/{deployment_id}/schedule", json={
            "start_time": (now - timedelta(minutes=2)).isoformat(),
            "end_time": now.isoformat(), "max_runs": 1}).raise_for_status()
        runs = client.read_flow_runs(deployment_filter=DeploymentFilter(
            id=DeploymentFilterId(any_=[deployment_id])))
    assert len(runs) >= 1 and runs[0].auto_scheduled
    before = run_count(flow_env)
    state = run_flow(nightly, flow_run=runs[0], parameters=runs[0].parameters,
                     return_type="state")
    assert state.is_failed() and "tolerance" in state.message
    refused = [b for b in webhook.bodies if any(r["kind"] == "refused" for r in b["reasons"])]
    assert len(refused) == 1
    summaries = [r["summary"] for r in refused[0]["reasons"]]
    assert len(summaries) == 2  # the tolerance and the baseline, both named
    assert "tolerance" in summaries[0] and f"{broken} field 'metrics.mrr'" in summaries[1]
    assert run_count(flow_env) == before and not (tmp_path / "out").exists()


def table_rows(url: str) -> dict[str, tuple[int, str | None]]:
    """Every table of the database: (row count, md5 of all its rows): any changed row shows."""
    from psycopg import sql as pgsql

    with database.connect(url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")]
        return {t: conn.execute(pgsql.SQL(
            "SELECT count(*), md5(string_agg(x::text, ',' ORDER BY x::text)) FROM {} x"
        ).format(pgsql.Identifier(t))).fetchone() for t in tables}


@pytest.mark.parametrize("name,change,expect", [
    ("catalog.json", lambda text: text.replace('"description": "', '"description": "\\u0000', 1),
     "catalog.json:"),
    ("judgments.csv", lambda text: "\ufeff" + text, None),
])
def test_mutated_inputs_end_to_end_refused_or_run_never_a_crash(flow_env,
                                                               fixtures_copy, tmp_path, name,
                                                               change, expect):
    path = fixtures_copy / name
    path.write_text(change(path.read_text(encoding="utf-8")), encoding="utf-8")
    before = table_rows(flow_env)
    done = cli(["--fixtures", str(fixtures_copy), "--output", str(tmp_path / "out")],
               {"SEARCHEVAL_DATABASE_URL": flow_env})
    assert done.returncode in (0, 1, 2) and "Traceback" not in done.stderr, done.stderr
    if expect is None:  # a BOM is fine: the run goes ahead as without it
        assert done.returncode == 0, done.stderr
        assert json.loads((tmp_path / "out" / "metrics.json").read_text())["gate"]["status"] \
            == "PASSED"
    else:
        last = done.stderr.strip().splitlines()[-1]
        assert done.returncode == 2 and expect in last and "field 'description'" in last
        assert "NUL" in last
        assert table_rows(flow_env) == before and not (tmp_path / "out").exists()



def test_on_a_temporary_prefect_server_the_refusal_is_still_the_last_line(flow_env, tmp_path):
    """Prefect logs "Stopping temporary server" as the process exits, after the verdict: the
    refusal stays the last line."""
    done = cli(["--output", str(tmp_path / "out"), "--alert-block", "slack-webhook/nobody"],
               {"SEARCHEVAL_DATABASE_URL": flow_env,  # the session's PREFECT_HOME: migrated
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}, ephemeral=True)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(
        "searcheval: --alert-block: no Prefect block 'slack-webhook/nobody'")


def test_prefect_services_are_settled_before_the_results_are_printed():
    """`searcheval run` drains Prefect's event and API-log queues before it prints: left to
    Prefect's exit, a busy machine logged "Still processing items" after the verdict."""
    from prefect.events import emit_event
    from prefect.events.worker import EventsWorker

    from flows.prefect_api import settle_services

    emit_event(event="searcheval.test.settle", resource={"prefect.resource.id": "searcheval.test"})
    assert EventsWorker._instances  # the event is queued on a running worker
    settle_services(timeout=30)
    assert not EventsWorker._instances  # every worker drained and stopped: nothing left at exit

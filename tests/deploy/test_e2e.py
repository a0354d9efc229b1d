"""End to end on a real Prefect server: `prefect deploy` of deploy/prefect.yaml, a process worker,
a manual ranking-change run on the embedded Postgres, its artifacts read back through the API and
seen in the Prefect UI in headless Chromium, the automations firing into a loopback webhook, and
`searcheval serve` registering the same deployments.

Screenshots are kept in test-output/ui/ (gitignored).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pytest
from deploy_support import ROOT, UI_OUTPUT, VENV_BIN, PrefectServer, Process

from flows.serve import load_deployment_specs

pytestmark = pytest.mark.slow

PROJECT = ROOT  # where `prefect deploy` runs: the repository root
FLOW = "searcheval-nightly"
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
RUN_TIMEOUT_S = 180  # a run takes ~20 s on an idle machine; generous for a loaded one


@dataclass
class Stack:
    server: PrefectServer
    database_url: str
    worker: Process
    deployments: dict[str, dict]  # as registered by `prefect deploy`, read right after it
    automations: list[dict]
    started: float
    timings: dict[str, float] = field(default_factory=dict)
    tripped: tuple[str, Path] | None = None  # the run ranking_change_run starts after its own


def read_deployments(server: PrefectServer) -> dict[str, dict]:
    return {d["name"]: d for d in server.api("POST", "/deployments/filter", {})}


def start_run(server: PrefectServer, deployment: str, **params: str) -> str:
    """`prefect deployment run FLOW/DEPLOYMENT --param k=v ...`; returns the flow run id."""
    args = ["deployment", "run", f"{FLOW}/{deployment}"]
    for key, value in params.items():
        args += ["--param", f"{key}={value}"]
    out = server.cli(*args).stdout
    match = re.search(r"UUID: ([0-9a-f-]{36})", out)
    assert match, out
    return match.group(1)


def wait_final(server: PrefectServer, flow_run_id: str, *logs: Process) -> dict:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        run = server.api("GET", f"/flow_runs/{flow_run_id}")
        if run["state"] and run["state"]["type"] in FINAL:
            return run
        if time.monotonic() > deadline:
            pytest.fail(f"flow run {flow_run_id} still {(run['state'] or {}).get('type')} after "
                        f"{RUN_TIMEOUT_S} s:\n" + "\n".join(p.tail() for p in logs))
        time.sleep(0.5)


def artifacts_of(server: PrefectServer, flow_run_id: str) -> dict[str, dict]:
    found = server.api("POST", "/artifacts/filter",
                       {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}})
    return {a["key"]: a for a in found}


@pytest.fixture(scope="module")
def stack(prefect_server, new_database, receiver, tmp_path_factory):
    """The server with the searcheval process pool, the deployments of deploy/prefect.yaml, the
    automations (notifying the loopback receiver), and a worker in another directory, so the
    deployments' pull step is what brings the flow runs back to the project root."""
    started = time.monotonic()
    server = prefect_server
    database_url = new_database("deploy_e2e")
    server.cli("work-pool", "create", "searcheval", "--type", "process")
    # the worker and the automations start while `prefect deploy` runs: they need only the pool
    elsewhere = tmp_path_factory.mktemp("worker")
    worker = Process([str(VENV_BIN / "prefect"), "worker", "start", "--pool", "searcheval",
                      "--type", "process"], elsewhere / "worker.log",
                     server.env(SEARCHEVAL_DATABASE_URL=database_url), elsewhere)
    try:
        applying = subprocess.Popen([sys.executable, "deploy/automations.py", "apply"],
                                    cwd=PROJECT,
                                    env=server.env(SEARCHEVAL_ALERT_WEBHOOK=receiver.url),
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        server.cli("deploy", "--all", "--prefect-file", "deploy/prefect.yaml", cwd=PROJECT,
                   timeout=120)
        applied = applying.communicate(timeout=60)[0]
        assert applying.returncode == 0, applied
        yield Stack(server=server, database_url=database_url, worker=worker,
                    deployments=read_deployments(server),
                    automations=server.api("POST", "/automations/filter", {}), started=started,
                    timings={"deploy_s": time.monotonic() - started})
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def ranking_change_run(stack, tmp_path_factory):
    """One manual run of `ranking-change` labelled v2, as CI would trigger it after a change.

    When it is done, a second run with a baseline it cannot reach is started (`tripped_run`
    waits for it): it runs in the worker while the checks of the first run go on, and after the
    first, so that only the first fills the embedding cache."""
    output = tmp_path_factory.mktemp("ranking-change-out")
    started = time.monotonic()
    flow_run_id = start_run(stack.server, "ranking-change", label="v2", output=str(output))
    run = wait_final(stack.server, flow_run_id, stack.worker)
    stack.timings["ranking_change_run_s"] = time.monotonic() - started

    tripped = tmp_path_factory.mktemp("tripped")
    baseline = json.loads((ROOT / "baseline.json").read_text())
    baseline["metrics"]["ndcg@10"] = 1.5  # cannot be reached: the gate trips
    (tripped / "baseline.json").write_text(json.dumps(baseline))
    stack.tripped = (start_run(stack.server, "ranking-change", label="v3-regressed",
                               baseline=str(tripped / "baseline.json"),
                               output=str(tripped / "out")), tripped / "out")
    return run, output


@pytest.fixture(scope="module")
def tripped_run(stack, ranking_change_run):
    flow_run_id, output = stack.tripped
    return wait_final(stack.server, flow_run_id, stack.worker), output


def test_prefect_deploy_registers_the_three_deployments_as_the_file_says(stack):
    specs = {s.name: s for s in load_deployment_specs()}
    assert set(stack.deployments) == set(specs) == {"nightly", "ranking-change", "replay-nightly"}
    for name, deployment in stack.deployments.items():
        spec = specs[name]
        assert deployment["entrypoint"] == spec.entrypoint
        assert deployment["parameters"] == spec.parameters
        assert deployment["work_pool_name"] == "searcheval"
        assert deployment["pull_steps"] == [{"prefect.deployments.steps.set_working_directory":
                                             {"directory": str(PROJECT)}}]
        assert [(s["schedule"]["cron"], s["schedule"]["timezone"], s["active"])
                for s in deployment["schedules"]] == [(c.cron, c.timezone, c.active)
                                                      for c in spec.schedules]
    nightly = stack.deployments["nightly"]["schedules"]
    assert [s["schedule"]["cron"] for s in nightly] == ["0 3 * * *"]
    assert stack.deployments["ranking-change"]["schedules"] == []
    pool = stack.server.api("GET", "/work_pools/searcheval")
    assert pool["type"] == "process"


def test_the_automations_are_applied_once_each_and_notify_through_the_webhook_block(stack,
                                                                                 receiver):
    by_name = {a["name"]: a for a in stack.automations}
    assert sorted(by_name) == ["searcheval-gate-tripped", "searcheval-nightly-failed",
                               "searcheval-nightly-overdue"]
    assert len(stack.automations) == 3
    blocks = {a["actions"][0]["block_document_id"] for a in stack.automations}
    assert [a["actions"][0]["type"] for a in stack.automations] == ["send-notification"] * 3
    [block_id] = blocks
    block = stack.server.api("GET", f"/block_documents/{block_id}")
    assert block["name"] == "searcheval-alert"
    assert "s3cret-token" not in json.dumps(block)  # the URL is a secret, never shown
    # applying again updates in place: still three, same ids
    again = subprocess.run([sys.executable, "deploy/automations.py", "apply"], cwd=PROJECT,
                           env=stack.server.env(SEARCHEVAL_ALERT_WEBHOOK=receiver.url),
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("updated ") == 3
    after = stack.server.api("POST", "/automations/filter", {})
    assert sorted(a["id"] for a in after) == sorted(by_name[n]["id"] for n in by_name)


def test_a_manual_ranking_change_run_completes_and_publishes_both_artifacts(stack,
                                                                             ranking_change_run):
    run, output = ranking_change_run
    assert run["state"]["type"] == "COMPLETED", stack.worker.tail()
    assert run["parameters"]["label"] == "v2"
    deployment_id = stack.deployments["ranking-change"]["id"]
    assert run["deployment_id"] == deployment_id
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["label"] == "v2" and metrics["flow_run_id"] == run["id"]
    assert metrics["gate"]["passed"] is True
    assert metrics["embeddings"]["embedded"] == 18 + 15  # the test database was new

    artifacts = artifacts_of(stack.server, run["id"])
    # the latest run's table and report, what ran, and one series per dataset and per
    # configuration (the test database is new: no earlier run to diff against, so no diff artifact)
    assert set(artifacts) == {"searcheval-metrics", "searcheval-report", "searcheval-what-ran",
                              "searcheval-metrics-fixtures", "searcheval-metrics-fixtures-bm25",
                              "searcheval-metrics-fixtures-dense",
                              "searcheval-metrics-fixtures-fused"}
    what_ran = {r["configuration"]: r for r in json.loads(artifacts["searcheval-what-ran"]["data"])}
    assert {n: r["sha256"] for n, r in what_ran.items()} \
        == {n: c["sha256"] for n, c in metrics["what_ran"]["configurations"].items()}
    table = artifacts["searcheval-metrics"]
    assert table["type"] == "table"
    rows = {r["configuration"]: r for r in json.loads(table["data"])}
    assert set(rows) == {"bm25", "dense", "fused"}
    fused = metrics["configurations"]["fused"]["means"]
    assert rows["fused"]["ndcg@10"] == round(fused["ndcg@10"], 4)
    assert rows["fused"]["mrr"] == round(fused["mrr"], 4)
    assert rows["fused"]["gate"] == "PASSED"
    report = artifacts["searcheval-report"]
    assert report["type"] == "markdown"
    assert f"# searcheval run {metrics['run_id']}" in report["data"]
    assert "- label: v2" in report["data"]


def test_the_ui_shows_the_flow_run_and_its_metrics_table(stack, ranking_change_run, chromium):
    run, output = ranking_change_run
    metrics = json.loads((output / "metrics.json").read_text())
    server = stack.server
    started = time.monotonic()

    chromium.open(f"{server.url}/runs/flow-run/{run['id']}")
    chromium.wait_for_text(run["name"], "ranking-change", "Completed", "Artifacts")
    assert chromium.click_text("Artifacts")
    text = chromium.wait_for_text("searcheval-metrics", "searcheval-report",
                                  f"searcheval run {metrics['run_id']}")
    assert "gate: PASSED" in text  # the gate line every output states (evaluation/gate.py)
    time.sleep(0.5)  # let the cards finish rendering before the picture
    flow_run_png = chromium.screenshot(UI_OUTPUT / "flow-run.png")

    table = artifacts_of(server, run["id"])["searcheval-metrics"]
    chromium.open(f"{server.url}/artifacts/artifact/{table['id']}")
    fused = metrics["configurations"]["fused"]["means"]
    bm25 = metrics["configurations"]["bm25"]["means"]
    # the table as the UI renders it: one row per configuration with its rounded means
    text = chromium.wait_for_text("searcheval-metrics", run["name"], "fused", "dense", "bm25",
                                  f"{round(fused['ndcg@10'], 4):g}",
                                  f"{round(bm25['ndcg@10'], 4):g}")
    assert "gate: PASSED" in text  # the gate line every output states (evaluation/gate.py)
    artifact_png = chromium.screenshot(UI_OUTPUT / "metrics-artifact.png")
    stack.timings["ui_s"] = time.monotonic() - started

    for png in (flow_run_png, artifact_png):
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, png


def test_a_tripped_gate_fails_the_run_and_the_failed_automation_notifies(tripped_run, receiver):
    run, output = tripped_run
    assert run["state"]["type"] == "FAILED"
    assert run["parameters"]["label"] == "v3-regressed"
    assert json.loads((output / "metrics.json").read_text())["gate"]["passed"] is False
    body = receiver.wait_for(lambda b: b.get("source") == "prefect-automation"
                             and run["name"] in b["subject"], timeout=45)
    assert body is not None, receiver.bodies
    assert body["subject"] == f"searcheval: flow run {run['name']} ended Failed"
    assert "v3-regressed" in body["body"]  # the parameters are in the notification
    assert f"/runs/flow-run/{run['id']}" in body["body"]


def test_the_gate_event_reaches_the_gate_automation(stack, receiver):
    script = (
        "from types import SimpleNamespace\n"
        "from prefect.events.worker import EventsWorker\n"
        "from searcheval.evaluation.gate import GateResult, Trip\n"
        "from tasks.events import emit_gate_event\n"
        "gate = GateResult(False, 'fused', 0.02, 'baseline.json',\n"
        "                  [Trip('mrr', 0.9, 0.8, 0.8 - 0.9)], [], [], {})\n"
        "event = emit_gate_event(SimpleNamespace(run_id='e2e-gate', label='event-test',\n"
        "                                        flow_run_id=None, gate=gate))\n"
        "EventsWorker.drain_all()\n"
        "print(event.event, event.resource.id)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT, env=stack.server.env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["searcheval.gate.tripped", "searcheval.run.e2e-gate"]
    body = receiver.wait_for(lambda b: "(event-test)" in b.get("subject", ""), timeout=45)
    assert body is not None, receiver.bodies
    assert body["subject"] == "searcheval: gate tripped for fused (event-test)"
    assert "Run e2e-gate (label event-test)" in body["body"]
    assert "mrr: 0.800 vs baseline 0.900 (-0.100)" in body["body"]


def test_searcheval_serve_registers_the_same_deployments_and_polls_for_their_runs(stack,
                                                                                  tmp_path):
    """Last: serving re-registers the deployments under the same names, without pull steps (the
    runner starts flow runs in the project root itself), and polls for their runs."""
    specs = {s.name: s for s in load_deployment_specs()}
    stack.worker.stop()  # from now on only the runner of `searcheval serve` polls
    since = datetime.now(timezone.utc)
    started = time.monotonic()
    # started outside the project: SEARCHEVAL_PROJECT names it (flows/ and tasks/ are not installed)
    serve = Process([str(VENV_BIN / "searcheval"), "serve"], tmp_path / "serve.log",
                    stack.server.env(SEARCHEVAL_DATABASE_URL=stack.database_url,
                                     SEARCHEVAL_PROJECT=str(ROOT)), tmp_path)
    try:
        deadline = time.monotonic() + 90
        while True:
            deployments = read_deployments(stack.server)
            if all(d["pull_steps"] is None and d["last_polled"]
                   and datetime.fromisoformat(d["last_polled"]) > since
                   for d in deployments.values()):
                break
            if not serve.alive() or time.monotonic() > deadline:
                pytest.fail(f"searcheval serve did not register the deployments:\n{serve.tail()}")
            time.sleep(0.5)
        stack.timings["serve_registered_s"] = time.monotonic() - started
        assert set(deployments) == set(specs)
        for name, deployment in deployments.items():
            assert deployment["id"] == stack.deployments[name]["id"]  # same name, same deployment
            assert deployment["updated"] > stack.deployments[name]["updated"]
            assert deployment["status"] == "READY"
            assert deployment["entrypoint"] == specs[name].entrypoint
            assert deployment["parameters"] == specs[name].parameters
            assert [(s["schedule"]["cron"], s["schedule"]["timezone"], s["active"])
                    for s in deployment["schedules"]] == [(c.cron, c.timezone, c.active)
                                                          for c in specs[name].schedules]
        assert serve.alive()
    finally:
        serve.stop()
    stack.timings["module_s"] = time.monotonic() - stack.started  # from the server being up
    UI_OUTPUT.mkdir(parents=True, exist_ok=True)
    (UI_OUTPUT.parent / "deploy-e2e-timings.json").write_text(
        json.dumps({k: round(v, 1) for k, v in stack.timings.items()}, indent=2) + "\n")

"""End to end on a real Prefect server: `prefect deploy` of deploy/prefect.yaml, a process worker,
a manual ranking-change run on the embedded Postgres (`prefect deployment run --watch`, which
prints the verdict), a tripped run started by `searcheval run --deployment`, their artifacts read
back through the API and seen in the Prefect UI in headless Chromium (Playwright, the shared
`browser`), the automations firing into a loopback webhook, and `searcheval serve` registering
the same deployments.

Screenshots are kept in test-output/ui/ (gitignored).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pytest
from deploy_support import ROOT, UI_OUTPUT, VENV_BIN, PrefectServer, Process, close_process

from flows.serve import load_deployment_specs, project_parameters
from searcheval.store import database

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
    tripped: tuple[subprocess.Popen, Path] | None = None  # started after ranking_change_run


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
def ranking_change_run(stack, tmp_path_factory, request):
    """One manual run of `ranking-change` labelled v2, as CI would trigger it after a change, with
    `prefect deployment run --watch` (its output is kept: it must show the verdict).

    When it is done, a second run with a baseline it cannot reach is started with `searcheval run
    --deployment` (`tripped_run` waits for it): it runs in the worker while the checks of the
    first run go on, and after the first, so that only the first fills the embedding cache."""
    output = tmp_path_factory.mktemp("ranking-change-out")
    started = time.monotonic()
    watched = stack.server.cli("deployment", "run", f"{FLOW}/ranking-change", "--param",
                               "label=v2", "--param", f"output={output}", "--watch",
                               timeout=RUN_TIMEOUT_S)
    UI_OUTPUT.mkdir(parents=True, exist_ok=True)
    (UI_OUTPUT / "deployment-run-watch.txt").write_text(watched.stdout + watched.stderr)
    match = re.search(r"UUID: ([0-9a-f-]{36})", watched.stdout)
    assert match, watched.stdout
    run = wait_final(stack.server, match.group(1), stack.worker)
    stack.timings["ranking_change_run_s"] = time.monotonic() - started

    tripped = tmp_path_factory.mktemp("tripped")
    baseline = json.loads((ROOT / "baseline.json").read_text())
    baseline["metrics"]["ndcg@10"] = 1.5  # cannot be reached: the gate trips
    (tripped / "baseline.json").write_text(json.dumps(baseline))
    stack.tripped = (subprocess.Popen(
        [str(VENV_BIN / "searcheval"), "run", "--deployment", "ranking-change", "--label",
         "v3-regressed", "--baseline", str(tripped / "baseline.json"), "--output",
         str(tripped / "out")], cwd=PROJECT, env=stack.server.env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True), tripped / "out")
    request.addfinalizer(lambda: close_process(stack.tripped[0]))
    return run, output, watched.stdout


@pytest.fixture(scope="module")
def tripped_run(stack, ranking_change_run):
    """The tripped run, its output folder, and what `searcheval run --deployment` printed."""
    process, output = stack.tripped
    try:
        out, err = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"searcheval run --deployment still running:\n{stack.worker.tail()}")
    match = re.search(r"^flow run .+? \(([0-9a-f-]{36})\)", out)
    assert match, (out, err)
    run = wait_final(stack.server, match.group(1), stack.worker)
    return run, output, process.returncode, out, err


def test_prefect_deploy_registers_the_deployments_as_the_file_says(stack):
    specs = {s.name: s for s in load_deployment_specs()}
    assert set(stack.deployments) == set(specs) == {"nightly", "ranking-change", "replay-nightly",
                                                     "live"}
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
                               "searcheval-nightly-overdue", "searcheval-stuck-run"]
    assert len(stack.automations) == 4
    # the gate automation records the trip, the flow pages it (one page per trip)
    assert by_name["searcheval-gate-tripped"]["actions"][0]["type"] == "do-nothing"
    # the stuck-run automation marks the run Crashed and notifies nobody itself (issue 29)
    assert [a["type"] for a in by_name["searcheval-stuck-run"]["actions"]] == [
        "change-flow-run-state"]
    paging = [a for a in stack.automations
              if a["name"] not in ("searcheval-gate-tripped", "searcheval-stuck-run")]
    blocks = {a["actions"][0]["block_document_id"] for a in paging}
    assert [a["actions"][0]["type"] for a in paging] == ["send-notification"] * 2
    [block_id] = blocks
    block = stack.server.api("GET", f"/block_documents/{block_id}")
    assert block["name"] == "searcheval-alert"
    assert "s3cret-token" not in json.dumps(block)  # the URL is a secret, never shown
    # applying again updates in place: still four, same ids
    again = subprocess.run([sys.executable, "deploy/automations.py", "apply"], cwd=PROJECT,
                           env=stack.server.env(SEARCHEVAL_ALERT_WEBHOOK=receiver.url),
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("updated ") == 4
    after = stack.server.api("POST", "/automations/filter", {})
    assert sorted(a["id"] for a in after) == sorted(by_name[n]["id"] for n in by_name)


def test_a_manual_ranking_change_run_completes_and_publishes_both_artifacts(stack,
                                                                             ranking_change_run):
    run, output, watched = ranking_change_run
    assert run["state"]["type"] == "COMPLETED", stack.worker.tail()
    assert run["parameters"]["label"] == "v2"
    deployment_id = stack.deployments["ranking-change"]["id"]
    assert run["deployment_id"] == deployment_id
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["label"] == "v2" and metrics["flow_run_id"] == run["id"]
    assert metrics["gate"]["passed"] is True
    assert metrics["embeddings"]["embedded"] == 18 + 15  # the test database was new
    # `prefect deployment run --watch` and the final state name the verdict and the report
    verdict = (f"gate: PASSED (no gated metric of fused dropped by more than the tolerance "
               f"0.02, and no floor was missed); report: {output / metrics['run_id'] / 'report.md'}")
    assert verdict in watched
    assert run["state"]["message"] == verdict

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


def test_the_registered_run_form_describes_every_parameter_with_choices(stack):
    """What `prefect deploy` sent the server is what the UI's Run form renders."""
    schema = stack.deployments["ranking-change"]["parameter_openapi_schema"]["properties"]
    assert all(field.get("description") for field in schema.values()), sorted(
        name for name, field in schema.items() if not field.get("description"))
    assert {"bm25", "dense", "fused"} <= set(schema["configurations"]["anyOf"][0]["items"]["enum"])
    assert "ndcg@10" in schema["metrics"]["items"]["enum"]


@contextmanager
def ui_page(browser, width: int = 1280):
    context = browser.new_context(viewport={"width": width, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


def wait_for_text(page, *needles: str, timeout_s: float = 30) -> str:
    """The page's text once every needle is in it (the Prefect UI renders after loading)."""
    try:
        page.wait_for_function("needles => needles.every(n => document.body && "
                               "document.body.innerText.includes(n))", arg=list(needles),
                               timeout=timeout_s * 1000)
    except Exception:  # noqa: BLE001 - Playwright's TimeoutError: say what the page showed
        pytest.fail(f"the page never showed {needles}; it shows:\n{page.inner_text('body')[:3000]}")
    return page.inner_text("body")


def click_tab(page, label: str) -> None:
    page.locator("button, a, li, [role=tab]",
                 has_text=re.compile(rf"^\s*{re.escape(label)}\s*$")).first.click()


def horizontal_overflow(page) -> list[str]:
    """Every element that is wider than its box (a scrollbar, or the page scrolling sideways)."""
    return page.evaluate("""() => {
        const out = [];
        const root = document.scrollingElement;
        if (root.scrollWidth > root.clientWidth + 1)
            out.push(`page ${root.scrollWidth} > ${root.clientWidth}`);
        for (const e of document.querySelectorAll('main *, [class*=markdown] *')) {
            const style = getComputedStyle(e);
            if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1
                && ['auto', 'scroll'].includes(style.overflowX))
                out.push(`${e.tagName}.${e.className} ${e.scrollWidth} > ${e.clientWidth}`);
        }
        return out;
    }""")


def test_the_ui_shows_the_verdict_the_metrics_and_a_readable_report(stack, ranking_change_run,
                                                                    browser):
    run, output, _ = ranking_change_run
    metrics = json.loads((output / "metrics.json").read_text())
    server = stack.server
    started = time.monotonic()
    artifacts = artifacts_of(server, run["id"])
    with ui_page(browser) as page:
        # the flow run page: its name, state and the verdict (the flow's last log line)
        page.goto(f"{server.url}/runs/flow-run/{run['id']}")
        wait_for_text(page, run["name"], "ranking-change", "Completed",
                      "gate: PASSED (no gated metric of fused dropped by more than")
        page.screenshot(path=UI_OUTPUT / "flow-run.png", full_page=True)
        click_tab(page, "Artifacts")
        text = wait_for_text(page, "searcheval-metrics", "searcheval-report",
                             f"searcheval run {metrics['run_id']}")
        assert "gate: PASSED" in text

        # the metrics artifact: one row per configuration with its rounded means
        page.goto(f"{server.url}/artifacts/artifact/{artifacts['searcheval-metrics']['id']}")
        shown = {name: metrics["configurations"][name]["means"] for name in ("bm25", "fused")}
        text = wait_for_text(page, "searcheval-metrics", run["name"], "fused", "dense", "bm25",
                             *(f"{round(means[m], 4):g}" for means in shown.values()
                               for m in ("ndcg@10", "mrr")))
        assert "gate: PASSED" in text
        page.screenshot(path=UI_OUTPUT / "metrics-artifact.png", full_page=True)

        # the report: rendered markdown, readable at a laptop's width without scrolling sideways
        page.goto(f"{server.url}/artifacts/artifact/{artifacts['searcheval-report']['id']}")
        wait_for_text(page, f"searcheval run {metrics['run_id']}", "Metrics", "By category")
        page.wait_for_timeout(500)  # the tables finish their layout
        overflow = horizontal_overflow(page)
        assert not overflow, "\n".join(overflow)
        page.screenshot(path=UI_OUTPUT / "report-artifact.png", full_page=True)
    stack.timings["ui_s"] = time.monotonic() - started
    for name in ("flow-run", "metrics-artifact", "report-artifact"):
        data = (UI_OUTPUT / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, name


def test_a_tripped_gate_fails_its_task_and_the_run_and_the_failed_automation_notifies(
        stack, tripped_run, receiver, browser):
    run, output, code, out, err = tripped_run
    assert run["state"]["type"] == "FAILED"
    assert run["parameters"]["label"] == "v3-regressed"
    tripped = json.loads((output / "metrics.json").read_text())
    assert tripped["gate"]["passed"] is False
    # `searcheval run --deployment` printed the run, the verdict and the report, and exited 1
    assert code == 1, (out, err)
    lines = out.splitlines()
    assert lines[0].startswith(f"flow run {run['name']} ({run['id']}): failed")
    assert lines[1].startswith("gate tripped for fused: ndcg@10: ")
    assert lines[1].endswith(f"; report: {output / tripped['run_id'] / 'report.md'}")
    # the gate's task run is the one that failed; the steps around it completed
    tasks = {t["name"].rsplit("-", 1)[0]: t["state"]["type"] for t in stack.server.api(
        "POST", "/task_runs/filter", {"flow_runs": {"id": {"any_": [run["id"]]}}})}
    assert tasks["gate"] == "FAILED"
    assert tasks["score"] == tasks["publish"] == "COMPLETED"
    with ui_page(browser) as page:
        page.goto(f"{stack.server.url}/runs/flow-run/{run['id']}")
        wait_for_text(page, run["name"], "Failed", "gate: TRIPPED (ndcg@10: ")

    body = receiver.wait_for(lambda b: b.get("source") == "prefect-automation"
                             and run["name"] in b["subject"], timeout=45)
    assert body is not None, receiver.bodies
    assert body["subject"] == f"searcheval: flow run {run['name']} ended Failed"
    assert "v3-regressed" in body["body"]  # the parameters are in the notification
    assert f"/runs/flow-run/{run['id']}" in body["body"]


def test_the_gate_event_reaches_the_server_and_pages_nobody(stack, receiver):
    """The event is in the server's feed for automations to act on; the shipped gate automation
    only records it (the flow that tripped pages once, tests/deploy/test_pages.py)."""
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
    deadline, found = time.monotonic() + 30, []
    while not found and time.monotonic() < deadline:
        found = stack.server.api("POST", "/events/filter", {"filter": {
            "event": {"name": ["searcheval.gate.tripped"]},
            "resource": {"id": ["searcheval.run.e2e-gate"]}}})["events"]
        time.sleep(0.5)
    assert found and found[0]["payload"]["summary"] == "mrr: 0.800 vs baseline 0.900 (-0.100)"
    time.sleep(5)  # the automation had its chance to notify: it must not
    assert [b for b in receiver.bodies if "(event-test)" in b.get("subject", "")] == []


def test_searcheval_serve_refuses_pool_deployments_then_takes_them_over_and_polls(stack,
                                                                                   tmp_path):
    """Last: the deployments `prefect deploy` bound to the pool are refused by a plain `serve`
    (one line saying what to do); `serve --take-over` registers them again under the same names,
    without the pool and without pull steps (the runner starts flow runs in the project root
    itself, so no worker can pick them up and crash on `path: None`), and polls for their runs."""
    specs = {s.name: s for s in load_deployment_specs()}
    stack.worker.stop()  # from now on only the runner of `searcheval serve` polls
    env = stack.server.env(SEARCHEVAL_DATABASE_URL=stack.database_url,
                           SEARCHEVAL_PROJECT=str(ROOT))
    refused = subprocess.run([str(VENV_BIN / "searcheval"), "serve"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2, refused.stderr[-3000:]
    [line] = refused.stderr.splitlines()
    assert line.startswith("searcheval: --take-over: the deployments 'nightly', 'ranking-change', "
                           "'replay-nightly', 'live' are bound to the work pool searcheval")
    assert "searcheval serve --take-over" in line
    assert set(read_deployments(stack.server)) == set(specs)  # nothing was changed

    since = datetime.now(timezone.utc)
    started = time.monotonic()
    # started outside the project: SEARCHEVAL_PROJECT names it (flows/ and tasks/ are not installed)
    serve = Process([str(VENV_BIN / "searcheval"), "serve", "--take-over"],
                    tmp_path / "serve.log", env, tmp_path)
    try:
        deadline = time.monotonic() + 90
        while True:
            deployments = read_deployments(stack.server)
            if set(deployments) == set(specs) and all(not d["pull_steps"] and d["last_polled"]
                   and datetime.fromisoformat(d["last_polled"]) > since
                   for d in deployments.values()):
                break
            if not serve.alive() or time.monotonic() > deadline:
                pytest.fail(f"searcheval serve did not register the deployments:\n{serve.tail()}")
            time.sleep(0.5)
        stack.timings["serve_registered_s"] = time.monotonic() - started
        assert set(deployments) == set(specs)
        for name, deployment in deployments.items():
            assert deployment["id"] != stack.deployments[name]["id"]  # registered again
            assert deployment["work_pool_name"] is None  # no worker can take its runs
            assert deployment["status"] == "READY"
            # the project's code by module path, its input files by absolute path: a served run
            # runs in the directory serve was started from
            assert deployment["entrypoint"] == specs[name].module_entrypoint
            assert deployment["parameters"] == project_parameters(
                specs[name].parameters, ROOT, frozenset({"fixtures"}))  # a dataset's name stays
            assert [(s["schedule"]["cron"], s["schedule"]["timezone"], s["active"])
                    for s in deployment["schedules"]] == [(c.cron, c.timezone, c.active)
                                                          for c in specs[name].schedules]
        assert serve.alive()
        # a manual run of a taken-over deployment runs in the directory serve was started from:
        # its relative output lands there
        flow_run_id = start_run(stack.server, "ranking-change", label="served", output="served")
        run = wait_final(stack.server, flow_run_id, serve)
        assert run["state"]["type"] == "COMPLETED", serve.tail()
        assert json.loads((tmp_path / "served" / "metrics.json").read_text())["label"] == "served"
        assert not (ROOT / "served").exists()
    finally:
        serve.stop()
    stack.timings["module_s"] = time.monotonic() - stack.started  # from the server being up
    UI_OUTPUT.mkdir(parents=True, exist_ok=True)
    (UI_OUTPUT.parent / "deploy-e2e-timings.json").write_text(
        json.dumps({k: round(v, 1) for k, v in stack.timings.items()}, indent=2) + "\n")


#: what a project needs to be served: its flows and tasks, deployments, inputs (copied, small)
PROJECT_PARTS = ("flows", "tasks", "deploy", "fixtures", "configurations.yaml", "baseline.json",
                 "searcheval.yaml")


def test_serve_started_from_a_subfolder_runs_there_with_the_code_and_database_of_the_project(
        stack, tmp_path):
    """`searcheval serve` started in a subfolder of a project (found by walking up, no
    SEARCHEVAL_PROJECT, no database URL): a triggered run's relative output lands in the
    subfolder, its inputs are the project's, and its database is the embedded Postgres under the
    project folder, which serve starts (stopped here at the end)."""
    import shutil

    project = tmp_path / "project"
    for part in PROJECT_PARTS:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, project / part,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(source, project / part)
    start = project / "runs" / "nightly"
    start.mkdir(parents=True)
    stack.worker.stop()  # only serve polls (the previous test stopped it already when it ran)
    serve = Process([str(VENV_BIN / "searcheval"), "serve", "--take-over"],
                    tmp_path / "serve.log", stack.server.env(), start)
    try:
        since = datetime.now(timezone.utc)
        deadline = time.monotonic() + 90
        while True:
            deployments = read_deployments(stack.server)
            ranking = deployments.get("ranking-change") or {}
            if ranking.get("last_polled") and \
                    datetime.fromisoformat(ranking["last_polled"]) > since:
                break
            if not serve.alive() or time.monotonic() > deadline:
                pytest.fail(f"searcheval serve did not register the deployments:\n{serve.tail()}")
            time.sleep(0.5)
        # the project's dataset by name: the run reads the rest from the project's settings
        assert ranking["parameters"]["dataset"] == "fixtures"
        flow_run_id = start_run(stack.server, "ranking-change", label="subfolder",
                                output="out", configurations='["bm25"]', no_baseline="true")
        run = wait_final(stack.server, flow_run_id, serve)
        assert run["state"]["type"] == "COMPLETED", serve.tail()
        metrics = json.loads((start / "out" / "metrics.json").read_text())
        assert metrics["label"] == "subfolder"
        assert metrics["what_ran"]["code"]["directory"] == str(project)
        assert not (project / "out").exists()
        assert (project / database.EMBEDDED_PGDATA).is_dir()
        assert not (start / database.EMBEDDED_DIR).exists()
    finally:
        serve.stop()
        database.stop_embedded(project / database.EMBEDDED_PGDATA)

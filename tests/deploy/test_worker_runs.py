"""Issue 29 through a real Prefect server and a real process worker (`prefect worker start --pool
searcheval --type process`, one per module, restarted after each stop): no run is left Running,
and `searcheval run --deployment` exits as a local run does.

- A worker killed with its flow-run process (SIGKILL to both: a lost host, the OOM killer,
  systemd's SIGKILL after its stop timeout) leaves its flow run Running: nothing reports its end.
  The shipped `searcheval-stuck-run` automation marks it Crashed within 90 s of its last
  heartbeat (the deployments beat every 30 s), the failed-run automation pages once, and the
  waiting `searcheval run --deployment` exits 3 with the cause; the next run completes (exit 0).
- `searcheval runs crash ID` does the same at once by hand (exit 0; an unknown or finished run:
  exit 2, one line).
- Exit codes on the deployment path: a trip 1, a refusal the flow finds 2, a flag the worker
  decides 2 before any flow run exists; the flow run's message prefix and verdict tag say which.

Found while writing this (Prefect 3.9.1): a SIGTERM to the worker alone does not stop its run:
the worker turns it into a graceful shutdown that waits for the run, which completes. When the
flow-run process gets the SIGTERM too (systemd's stop, KillMode=control-group), the run is
orphaned, Running for ever without the automation, or, depending on the moment the signal lands
(seen inside a task), reported Crashed by Prefect's engine itself: the tests kill with SIGKILL so
that nothing can report, every time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from deploy_support import ROOT, VENV_BIN, PrefectServer, Process, close_process

pytestmark = pytest.mark.slow

FLOW = "searcheval-nightly"
DEPLOYMENT = "ranking-change"
STUCK_WITHIN_S = 90  # deploy/automations.yaml: searcheval-stuck-run's window
EVALUATION_SLACK_S = 30  # the server's proactive evaluation runs every 5 s; event lag on a busy box
RUN_TIMEOUT_S = 240


@dataclass
class WorkerStack:
    server: PrefectServer
    database_url: str
    folder: Path
    worker: Process | None = None
    starts: int = 0

    def start_worker(self) -> Process:
        """A process worker started outside the project (the deployment's pull step brings its
        runs back to the project root)."""
        self.starts += 1
        self.worker = Process([str(VENV_BIN / "prefect"), "worker", "start", "--pool",
                               "searcheval", "--type", "process"],
                              self.folder / f"worker-{self.starts}.log",
                              self.server.env(SEARCHEVAL_DATABASE_URL=self.database_url),
                              self.folder)
        return self.worker


def children(pid: int) -> list[int]:
    """Every descendant of `pid` (the worker's flow-run processes start sessions of their own,
    so they are not in its process group)."""
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry.name))
                frontier.append(int(entry.name))
    return found


def kill_worker_and_its_runs(worker: Process) -> list[int]:
    """What a lost host, the OOM killer or `systemctl kill -s KILL` does to a worker unit: SIGKILL
    to the worker, then to each of its flow-run processes, so that neither can report the run's
    end. (On systemd's SIGTERM, Prefect's engine may report the run Crashed itself, depending on
    the moment the signal lands: a test stopping it so would depend on that moment.)"""
    pids = [worker.popen.pid, *children(worker.popen.pid)]
    for pid in pids:  # the worker first: it would report a flow-run process that died before it
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    worker.popen.wait(15)
    worker.stop()  # closes its log
    return pids


@pytest.fixture(scope="module")
def stack(prefect_server, new_database, receiver, tmp_path_factory):
    """The pool, the ranking-change deployment of deploy/prefect.yaml, the shipped automations
    (notifying the loopback receiver) and a worker."""
    server = prefect_server
    stack = WorkerStack(server=server, database_url=new_database("worker_runs"),
                        folder=tmp_path_factory.mktemp("worker-runs"))
    server.cli("work-pool", "create", "searcheval", "--type", "process")
    applied = subprocess.run([str(VENV_BIN / "python"), "deploy/automations.py", "apply"],
                             cwd=ROOT, env=server.env(SEARCHEVAL_ALERT_WEBHOOK=receiver.url),
                             capture_output=True, text=True, timeout=90)
    assert applied.returncode == 0, applied.stderr
    assert "searcheval-stuck-run" in applied.stdout
    server.cli("deploy", "--name", DEPLOYMENT, "--prefect-file", "deploy/prefect.yaml",
               cwd=ROOT, timeout=120)
    stack.start_worker()
    try:
        yield stack
    finally:
        if stack.worker is not None:
            stack.worker.stop()


def run_deployment(stack: WorkerStack, *flags: str) -> subprocess.Popen:
    """`searcheval run --deployment ranking-change FLAGS`, started (not waited for)."""
    return subprocess.Popen([str(VENV_BIN / "searcheval"), "run", "--deployment", DEPLOYMENT,
                             *flags], cwd=ROOT, env=stack.server.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def restart_worker(stack: WorkerStack) -> None:
    """A new worker where the last one is gone, as systemd restarts a unit; none where it runs."""
    if not stack.worker.alive():
        stack.start_worker()


def finish(process: subprocess.Popen, stack: WorkerStack, timeout: float = RUN_TIMEOUT_S):
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail("searcheval run --deployment still waiting:\n" + stack.worker.tail())
    return process.returncode, out, err


def flow_run_labelled(stack: WorkerStack, label: str, state: str = "RUNNING",
                      timeout: float = RUN_TIMEOUT_S) -> dict:
    """The flow run whose `label` parameter is `label`, once it is in `state`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for run in stack.server.api("POST", "/flow_runs/filter", {}):
            if run["parameters"].get("label") == label and (run["state"] or {}).get(
                    "type") == state:
                return run
        time.sleep(0.3)
    pytest.fail(f"no {state} flow run labelled {label!r}:\n" + stack.worker.tail())


def heartbeats(stack: WorkerStack, flow_run_id: str) -> list[str]:
    events = stack.server.api("POST", "/events/filter", {
        "filter": {"event": {"name": ["prefect.flow-run.heartbeat"]},
                   "any_resource": {"id": [f"prefect.flow-run.{flow_run_id}"]}},
        "limit": 50})
    return sorted(e["occurred"] for e in events["events"])


def wait_first_heartbeat(stack: WorkerStack, flow_run_id: str) -> None:
    deadline = time.monotonic() + 30
    while not heartbeats(stack, flow_run_id):
        if time.monotonic() > deadline:
            pytest.fail("no heartbeat from the flow run:\n" + stack.worker.tail())
        time.sleep(0.3)


def state_of(stack: WorkerStack, flow_run_id: str) -> dict:
    return stack.server.api("GET", f"/flow_runs/{flow_run_id}")["state"]


def documented_crash() -> list[str]:
    """The `searcheval runs crash` command as README.md and docs/deployments-and-ui.md show it
    (its argument is the placeholder this test fills with a real flow run id)."""
    for page in ("README.md", "docs/deployments-and-ui.md"):
        shown = [line.split("#")[0].split() for line in (ROOT / page).read_text().splitlines()
                 if line.startswith("searcheval runs crash ")]
        assert shown and all(len(words) == 4 for words in shown), (page, shown)
    return ["searcheval", "runs", "crash"]


QUICK = ("--configurations", "bm25", "--no-baseline")  # no model: seconds per run


def test_a_worker_killed_mid_run_ends_crashed_by_the_automation_and_the_next_run_completes(
        stack, receiver, tmp_path):
    waiting = run_deployment(stack, *QUICK, "--label", "orphaned", "--output",
                             str(tmp_path / "orphaned"), "--timeout", "400")
    try:
        run = flow_run_labelled(stack, "orphaned")
        wait_first_heartbeat(stack, run["id"])
        stopped_at = time.monotonic()
        killed = kill_worker_and_its_runs(stack.worker)
        assert len(killed) >= 2, "the worker had no flow-run process to stop"
        # nothing reports the end: Running until the automation acts
        time.sleep(3)
        assert state_of(stack, run["id"])["type"] == "RUNNING"
        deadline = stopped_at + STUCK_WITHIN_S + 30 + EVALUATION_SLACK_S  # + one beat's gap
        while (state := state_of(stack, run["id"]))["type"] == "RUNNING":
            if time.monotonic() > deadline:
                pytest.fail(f"still Running {time.monotonic() - stopped_at:.0f} s after the stop")
            time.sleep(1)
        crashed_after = time.monotonic() - stopped_at
        assert state["type"] == "CRASHED", state
        assert state["message"].startswith("no heartbeat for 90 s")
        print(f"stopped -> Crashed in {crashed_after:.0f} s (last heartbeat "
              f"{heartbeats(stack, run['id'])[-1]})")
        # the waiting command returns with the cause and the exit code of a failure
        code, out, err = finish(waiting, stack, timeout=60)
        assert code == 3, (out, err)
        assert out.startswith(f"flow run {run['name']} ({run['id']}): crashed")
        assert err.strip().splitlines()[-1].startswith(
            "searcheval: the run ended CRASHED: no heartbeat for 90 s")
        # the failed-run automation pages the crash once; the stuck-run one pages nobody itself
        body = receiver.wait_for(lambda b: run["name"] in b.get("subject", ""), timeout=45)
        assert body is not None and "Crashed" in body["subject"], receiver.bodies
        time.sleep(3)
        assert sum(run["name"] in b.get("subject", "") for b in receiver.bodies) == 1
    finally:
        close_process(waiting)
        restart_worker(stack)  # systemd starts it again (also after a failure: the next test's)
    # the next run completes
    code, out, err = finish(run_deployment(stack, *QUICK, "--label", "after-restart",
                                           "--output", str(tmp_path / "next")), stack)
    assert code == 0, (out, err, stack.worker.tail())
    assert ": completed" in out.splitlines()[0]
    assert out.splitlines()[1].startswith("gate: NOT GATED")
    assert json.loads((tmp_path / "next" / "metrics.json").read_text())["label"] == "after-restart"


def test_runs_crash_marks_a_run_whose_worker_is_gone_crashed_at_once(stack, tmp_path):
    waiting = run_deployment(stack, *QUICK, "--label", "by-hand", "--output",
                             str(tmp_path / "by-hand"))
    try:
        run = flow_run_labelled(stack, "by-hand")
        kill_worker_and_its_runs(stack.worker)
        started = time.monotonic()
        command = documented_crash()
        crash = subprocess.run([str(VENV_BIN / command[0]), *command[1:], run["id"]],
                               cwd=ROOT, env=stack.server.env(), capture_output=True, text=True,
                               timeout=60)
        assert crash.returncode == 0, crash.stderr
        assert crash.stdout.startswith(f"flow run {run['name']} ({run['id']}): running -> "
                                       "crashed")
        assert state_of(stack, run["id"])["type"] == "CRASHED"
        code, out, err = finish(waiting, stack, timeout=60)
        assert code == 3, (out, err)
        assert "searcheval runs crash" in err.strip().splitlines()[-1]
        print(f"runs crash -> command returned in {time.monotonic() - started:.1f} s")
    finally:
        close_process(waiting)
        restart_worker(stack)
    # a run that already ended, and one that does not exist: refused in one line
    for flow_run_id, expected in ((run["id"], "already ended CRASHED: nothing to crash"),
                                  ("00000000-0000-4000-8000-000000000000", "no flow run ")):
        again = subprocess.run([str(VENV_BIN / "searcheval"), "runs", "crash", flow_run_id],
                               cwd=ROOT, env=stack.server.env(), capture_output=True,
                               text=True, timeout=60)
        assert again.returncode == 2, again.stderr
        [line] = again.stderr.strip().splitlines()
        assert expected in line


def test_exit_codes_on_the_deployment_path_are_a_local_runs(stack, tmp_path):
    runs_before = len(stack.server.api("POST", "/flow_runs/filter", {}))
    # a flag the worker decides: refused here, no flow run created
    refused = subprocess.run([str(VENV_BIN / "searcheval"), "run", "--deployment", DEPLOYMENT,
                              "--task-runner", "dask"], cwd=ROOT, env=stack.server.env(),
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1].startswith(
        "searcheval: --task-runner: not taken by --deployment")
    assert len(stack.server.api("POST", "/flow_runs/filter", {})) == runs_before

    # a trip (bm25 served, gated on an MRR of 1.0 it cannot reach) and a refusal only the flow
    # can see (a block that does not exist): in the worker, one after the other
    configs = tmp_path / "configurations.yaml"
    configs.write_text("configurations:\n  bm25:\n    kind: bm25\n    served: true\n"
                       "run: [bm25]\n")
    baseline = json.loads((ROOT / "baseline.json").read_text())
    baseline.update(configuration="bm25", metrics={"mrr": 1.0})
    baseline.pop("per_query")
    (tmp_path / "baseline.json").write_text(json.dumps(baseline))
    tripped = run_deployment(stack, "--configurations-file", str(configs), "--baseline",
                             str(tmp_path / "baseline.json"), "--label", "tripped",
                             "--output", str(tmp_path / "tripped"))
    code, out, err = finish(tripped, stack)
    assert code == 1, (out, err, stack.worker.tail())
    flow_run_id = re.search(r"\(([0-9a-f-]{36})\)", out)[1]
    run = stack.server.api("GET", f"/flow_runs/{flow_run_id}")
    assert run["state"]["message"].startswith("GATE TRIPPED: gate tripped for bm25: mrr: ")
    assert out.splitlines()[1].startswith("gate tripped for bm25: mrr: ")
    run_id = json.loads((tmp_path / "tripped" / "metrics.json").read_text())["run_id"]
    assert {"searcheval:verdict=tripped", f"searcheval:run={run_id}"} <= set(run["tags"])

    code, out, err = finish(run_deployment(stack, *QUICK, "--label", "refused",
                                           "--alert-block", "slack-webhook/nobody"), stack)
    assert code == 2, (out, err)
    assert err.strip().splitlines()[-1].startswith(
        "searcheval: the flow run refused its input: field 'alert_block': no Prefect block")
    flow_run_id = re.search(r"\(([0-9a-f-]{36})\)", out)[1]
    run = stack.server.api("GET", f"/flow_runs/{flow_run_id}")
    assert run["state"]["message"].startswith("REFUSED: ")
    assert "searcheval:verdict=refused" in run["tags"]


def test_run_deployment_stops_waiting_at_its_timeout_with_exit_3(stack, tmp_path):
    """The command never waits for ever: at --timeout it says where the run is and exits 3 (the
    run goes on in the worker)."""
    code, out, err = finish(run_deployment(stack, *QUICK, "--label", "impatient", "--timeout",
                                           "1", "--output", str(tmp_path / "impatient")), stack)
    assert code == 3, (out, err)
    assert out.splitlines()[1] == "(no verdict yet)"
    last = err.strip().splitlines()[-1]
    assert last.startswith("searcheval: stopped waiting after 1 s (--timeout): the flow run is "
                           "still ")
    assert "searcheval runs crash" in last

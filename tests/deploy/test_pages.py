"""Operating searcheval on a real Prefect server (`searcheval ui` on loopback, automation services
running): one page per trip whichever channels are configured, a database outage paged by the
flow itself, `deploy/automations.py apply` keeping the notification block in use, the database
password read from a Prefect Secret block (a password role on the embedded Postgres), and the
README's way of trying a schedule (docs/deployments-and-ui.md) run as written.

The flows run in subprocesses against the server, as a worker would run them; the webhook is the
loopback receiver (tests/webhook_receiver.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deploy_support import ROOT, VENV_BIN, PrefectServer, free_port
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from searcheval.store import database

pytestmark = pytest.mark.slow

FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
ALERTED = "(searcheval: alerted)"
QUIET_S = 12  # how long an automation gets to page (it fires within a second or two)
DOC = ROOT / "docs" / "deployments-and-ui.md"


def apply(server: PrefectServer, *args: str, webhook: str | None = None
          ) -> subprocess.CompletedProcess:
    env = server.env(**({"SEARCHEVAL_ALERT_WEBHOOK": webhook} if webhook else {}))
    done = subprocess.run([sys.executable, "deploy/automations.py", "apply", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    return done


def actions(server: PrefectServer) -> dict[str, dict]:
    """The first action of each automation that notifies (the stuck-run one changes a state)."""
    return {a["name"]: a["actions"][0] for a in server.api("POST", "/automations/filter", {})
            if a["actions"][0]["type"] != "change-flow-run-state"}


def run_flow(server: PrefectServer, env: dict[str, str], **parameters) -> tuple[dict, str]:
    """The nightly flow called in a subprocess against the server, as a worker runs it; returns
    its flow run (read back from the API) and the subprocess's output."""
    script = ("import json, sys\n"
              "from flows.nightly import nightly\n"
              "state = nightly(**json.loads(sys.argv[1]), return_state=True)\n"
              "print('FLOW_RUN', state.state_details.flow_run_id)\n")
    done = subprocess.run([sys.executable, "-c", script, json.dumps(parameters)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    match = re.search(r"^FLOW_RUN ([0-9a-f-]{36})$", done.stdout, re.M)
    assert match, done.stdout[-3000:] + done.stderr[-5000:]
    return server.api("GET", f"/flow_runs/{match.group(1)}"), done.stdout + done.stderr


def deliveries(receiver, predicate) -> list[dict]:
    with receiver.lock:
        return [b for b in receiver.bodies if predicate(b)]


def about(flow_run: dict):
    """A webhook body about this flow run: searcheval's own (its run id tag) or the
    automation's (the flow run's id in its body)."""
    tag = next((t for t in flow_run["tags"] if t.startswith("searcheval:run=")), "")
    run_id = tag.removeprefix("searcheval:run=")

    def predicate(body: dict) -> bool:
        return (run_id and body.get("run_id") == run_id) or flow_run["id"] in json.dumps(body)
    return predicate


@pytest.fixture(scope="module")
def server(prefect_server, receiver):
    """The server with the shipped automations notifying the loopback receiver."""
    apply(prefect_server, webhook=receiver.url)
    return prefect_server


def test_reapplying_without_the_webhook_variable_keeps_the_block_unless_told_none(server,
                                                                                  receiver):
    before = actions(server)
    block = before["searcheval-nightly-failed"]["block_document_id"]
    assert before["searcheval-nightly-failed"]["type"] == "send-notification" and block
    kept = apply(server)  # a shell without SEARCHEVAL_ALERT_WEBHOOK
    assert "kept" in kept.stdout and "notify nobody" not in kept.stderr
    assert actions(server) == before  # the same block, the same templates
    off = apply(server, "--notify", "none")
    assert {a["type"] for a in actions(server).values()} == {"do-nothing"}
    assert "notify nobody" not in off.stderr  # asked for: no warning
    still_off = apply(server)  # re-applied: what is in use (nobody) is kept
    assert {a["type"] for a in actions(server).values()} == {"do-nothing"}
    assert "kept" in still_off.stdout
    apply(server, webhook=receiver.url)  # back on, for the tests below
    assert actions(server)["searcheval-nightly-failed"]["block_document_id"] == block


def test_a_trip_pages_once_with_the_flow_run_url_while_the_automation_pages_an_unalerted_run(
        server, receiver, new_database, tmp_path):
    url = new_database("pages_trip")
    env = server.env(SEARCHEVAL_DATABASE_URL=url, SEARCHEVAL_ALERT_WEBHOOK=receiver.url)
    baseline = json.loads((ROOT / "baseline.json").read_text())
    baseline["metrics"]["ndcg@10"] = 1.5  # cannot be reached: the gate trips
    (tmp_path / "baseline.json").write_text(json.dumps(baseline))
    out = tmp_path / "out"
    tripped, log = run_flow(server, env, baseline=str(tmp_path / "baseline.json"),
                            output=str(out), label="pages-trip")
    assert tripped["state"]["type"] == "FAILED", log[-3000:]
    run_id = next(t for t in tripped["tags"] if t.startswith("searcheval:run=")).split("=")[1]
    assert (out / run_id / "metrics.json").is_file()
    assert tripped["name"].endswith(f" {ALERTED}") and "searcheval:alerted" in tripped["tags"]

    # the control: a manual run's refusal is not paged by the flow, so the automation pages it
    refused, log = run_flow(server, env, fixtures=str(tmp_path / "no-such-folder"),
                            no_baseline=True)
    assert refused["state"]["type"] == "FAILED" and not refused["name"].endswith(ALERTED), log
    assert receiver.wait_for(about(refused), timeout=45) is not None, receiver.bodies
    time.sleep(QUIET_S)  # both automations had their chance at the trip (the control fired)

    pages = deliveries(receiver, about(tripped))
    assert len(pages) == 1, pages  # one trip, one page: the flow's
    [page] = pages
    assert page["url"] == f"{server.url}/runs/flow-run/{tripped['id']}"
    assert f"flow run: {page['url']}" in page["text"]
    assert page["run_id"] == run_id and page["dataset"]
    assert page["verdict"].startswith("gate: TRIPPED")
    assert [r["kind"] for r in page["reasons"]][0] == "gate"
    assert page["where"] == str(out.resolve() / run_id / "report.md")  # absolute
    assert Path(page["where"]).is_file()
    assert isinstance(page["worst"], list)
    assert len(deliveries(receiver, about(refused))) == 1  # the automation's one page
    [control] = deliveries(receiver, about(refused))
    assert control["source"] == "prefect-automation"


def test_a_database_outage_is_paged_once_by_the_flow_itself(server, receiver):
    password = "outage-pw-never-shown"
    url = f"postgresql://searcheval:{password}@127.0.0.1:{free_port()}/searcheval"
    env = server.env(SEARCHEVAL_DATABASE_URL=url, SEARCHEVAL_ALERT_WEBHOOK=receiver.url)
    down, log = run_flow(server, env, no_baseline=True, configurations=["bm25"])
    assert down["state"]["type"] == "FAILED", log[-3000:]
    assert "DatabaseError" in down["state"]["message"] or "database" in down["state"]["message"]
    assert down["name"].endswith(ALERTED)
    time.sleep(QUIET_S)
    pages = deliveries(receiver, about(down))
    assert len(pages) == 1, pages
    [page] = pages
    assert [r["kind"] for r in page["reasons"]] == ["database"]
    assert page["url"] == f"{server.url}/runs/flow-run/{down['id']}"
    assert "127.0.0.1" in page["text"] and password not in json.dumps(page)
    assert password not in log


@pytest.fixture(scope="module")
def password_role(database_url, new_database):
    """A login role that must give its password (scram-sha-256) on the session's Postgres: a
    line for that role alone heads pg_hba.conf, and the configuration is reloaded. Returns
    (URL without the password, the password)."""
    role, password = "se_scram_role", "scram-Pw-7f3a9c-never-logged"
    url = new_database("pages_secret")
    with database.connect(database_url) as admin:
        hba = Path(admin.execute("SHOW hba_file").fetchone()[0])
        admin.execute(pgsql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
            pgsql.Identifier(role), pgsql.Literal(password)))
        original = hba.read_text()
        hba.write_text(f"local all {role} scram-sha-256\nhost all {role} 127.0.0.1/32 "
                       f"scram-sha-256\n{original}")
        admin.execute("SELECT pg_reload_conf()")
    parts = {k: v for k, v in conninfo_to_dict(url).items() if k != "password"}
    parts["user"] = role
    try:
        yield make_conninfo(**parts), password
    finally:
        hba.write_text(original)
        with database.connect(database_url) as admin:
            admin.execute("SELECT pg_reload_conf()")


def test_the_database_password_comes_from_a_secret_block_and_never_leaves(server, receiver,
                                                                         password_role,
                                                                         tmp_path):
    import psycopg

    url, password = password_role
    with pytest.raises(psycopg.OperationalError):  # the role really needs its password
        psycopg.connect(url, connect_timeout=5).close()
    psycopg.connect(url, password=password, connect_timeout=5).close()
    saved = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom prefect.blocks.system import Secret\n"
         "Secret(value=sys.stdin.read()).save('searcheval-db-password', overwrite=True)"],
        input=password, cwd=ROOT, env=server.env(), capture_output=True, text=True, timeout=60)
    assert saved.returncode == 0, saved.stderr
    env = server.env(SEARCHEVAL_DATABASE_URL=url,
                     SEARCHEVAL_DATABASE_PASSWORD_SECRET="searcheval-db-password")
    out = tmp_path / "out"
    done, log = run_flow(server, env, no_baseline=True, configurations=["bm25"],
                         output=str(out), label="secret-password")
    assert done["state"]["type"] == "COMPLETED", log[-4000:]
    [metrics] = [m for m in out.glob("*/metrics.json") if m.parent.name != "latest"]
    assert json.loads(metrics.read_text())["configurations"]["bm25"]["means"]

    # nowhere: the output, the flow run, its logs and artifacts, the database's rows
    assert password not in log
    assert not [p for p in out.rglob("*") if p.is_file() and password in p.read_text(errors="replace")]
    assert password not in json.dumps(done)
    logs = server.api("POST", "/logs/filter", {"logs": {"flow_run_id": {"any_": [done["id"]]}}})
    assert logs and password not in json.dumps(logs)
    artifacts = server.api("POST", "/artifacts/filter",
                           {"artifacts": {"flow_run_id": {"any_": [done["id"]]}}})
    assert artifacts and password not in json.dumps(artifacts)
    with psycopg.connect(url, password=password, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()]
        assert "eval_runs" in tables
        for table in tables:
            found = conn.execute(pgsql.SQL("SELECT count(*) FROM {} t WHERE t::text LIKE {}")
                                 .format(pgsql.Identifier(table),
                                         pgsql.Literal(f"%{password}%"))).fetchone()[0]
            assert found == 0, table

    # without the block's name the same URL is a database failure, named without a password
    from searcheval.errors import DatabaseError

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(database.ENV_URL, url)
        patch.delenv(database.PASSWORD_SECRET_ENV, raising=False)
        with pytest.raises(DatabaseError) as failed:
            database.connect(url, attempts=1)
    assert "no password supplied" in str(failed.value) and password not in str(failed.value)


def shell_block_after(marker: str) -> list[str]:
    """The command lines of the docs' block that follows `marker`."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(marker)
    block = text[text.index("```", start) + 3:]
    block = block[block.index("\n") + 1:block.index("```")]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_a_schedule_is_tried_without_editing_tracked_files_as_the_docs_say(server):
    """docs/deployments-and-ui.md's commands, run as written (SCHEDULE_ID replaced by the id
    `ls` printed): a schedule added on the server beside the file's, listed, and deleted."""
    commands = shell_block_after("<!-- run by: tests/deploy/test_pages.py -->")
    assert [c.split()[:4] for c in commands] == [["prefect", "deployment", "schedule", verb]
                                                 for verb in ("create", "ls", "delete")]
    server.cli("work-pool", "create", "searcheval", "--type", "process")
    server.cli("deploy", "--all", "--prefect-file", "deploy/prefect.yaml", timeout=120)
    deployment = server.api("GET", "/deployments/name/searcheval-nightly/nightly")
    assert [s["schedule"].get("cron") for s in deployment["schedules"]] == ["0 3 * * *"]

    def run(command: str) -> str:
        args = [str(VENV_BIN / "prefect")] + [a.strip("'") for a in re.findall(
            r"'[^']*'|\S+", command)][1:]
        done = subprocess.run(args, cwd=ROOT, env=server.env(), capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    run(commands[0])
    deployment = server.api("GET", "/deployments/name/searcheval-nightly/nightly")
    crons = {s["schedule"].get("cron"): s["id"] for s in deployment["schedules"]}
    assert set(crons) == {"0 3 * * *", "*/10 * * * *"}  # the file's, and the one tried
    listed = run(commands[1])
    assert crons["*/10 * * * *"] in listed
    run(commands[2].replace("SCHEDULE_ID", crons["*/10 * * * *"]))
    deployment = server.api("GET", "/deployments/name/searcheval-nightly/nightly")
    assert [s["schedule"].get("cron") for s in deployment["schedules"]] == ["0 3 * * *"]

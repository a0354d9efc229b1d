"""Faults: two runs at once on one database, and the embedded Postgres killed mid-run and while
the results are being published. A run fails with a named cause (exit 3) or completes; the next
run completes; no half-written rows, no duplicates. Real processes, a real server, really killed
(`pg_ctl stop -m immediate`: no shutdown checkpoint, crash recovery at the next start)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from searcheval.store import database

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def start_cli(url: str, output: Path) -> subprocess.Popen:
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "HF_HUB_OFFLINE": "1",
           "SEARCHEVAL_DATABASE_URL": url}
    env.pop("SEARCHEVAL_ALERT_WEBHOOK", None)
    return subprocess.Popen([str(Path(sys.executable).parent / "searcheval"), "run", "--output",
                             str(output)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen, timeout: float = 600) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def counts(url: str) -> dict[str, int]:
    with database.connect(url) as conn:
        return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608
                for table in ("eval_runs", "eval_metrics", "eval_query_results", "resources",
                              "doc_vectors")}


def runs_complete(url: str) -> None:
    """Every run row has its metric rows, and no (run, configuration, category, metric) twice."""
    with database.connect(url) as conn:
        empty = conn.execute("SELECT count(*) FROM eval_runs r WHERE NOT EXISTS "
                             "(SELECT 1 FROM eval_metrics m WHERE m.run_id = r.run_id)").fetchone()
        twice = conn.execute("SELECT count(*) FROM (SELECT run_id, configuration, category, "
                             "metric FROM eval_metrics GROUP BY 1, 2, 3, 4 HAVING count(*) > 1) d"
                             ).fetchone()
    assert (empty[0], twice[0]) == (0, 0)


class PrivateServer:
    """An embedded Postgres of this test's own, so that killing it disturbs no other test."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="se-kill-", dir="/tmp")
        self.pgdata = Path(self.directory) / "pg"
        self.server = database.start_embedded(self.pgdata, keep_running=False)
        self.url = self.server.get_uri()
        with database.connect(self.url) as conn:
            database.migrate(conn)

    def kill(self) -> None:
        import pgserver

        user = "pgserver" if os.geteuid() == 0 else None
        pgserver.pg_ctl(["-w", "stop", "-m", "immediate"], pgdata=self.pgdata, user=user)

    def restart(self) -> None:
        self.server = database.start_embedded(self.pgdata, keep_running=False)
        self.url = self.server.get_uri()

    def close(self) -> None:
        try:
            self.server.cleanup()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)
            Path(str(self.pgdata) + ".lock").unlink(missing_ok=True)


@pytest.fixture
def private_server():
    server = PrivateServer()
    try:
        yield server
    finally:
        server.close()


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_two_runs_at_once_on_one_database_both_complete_without_duplicates(database_module_url,
                                                                          tmp_path):
    before = counts(database_module_url)
    first = start_cli(database_module_url, tmp_path / "a")
    second = start_cli(database_module_url, tmp_path / "b")
    (code_a, _, err_a), (code_b, _, err_b) = finish(first), finish(second)
    assert (code_a, code_b) == (0, 0), err_a + err_b
    after = counts(database_module_url)
    assert after["eval_runs"] == before["eval_runs"] + 2
    run_ids = {json.loads((tmp_path / d / "metrics.json").read_text())["run_id"] for d in "ab"}
    assert len(run_ids) == 2
    # one catalog of 18 resources and their vectors, however many runs seeded it at once
    assert after["resources"] == after["doc_vectors"] == 18
    runs_complete(database_module_url)


def test_postgres_killed_mid_run_fails_named_and_the_next_run_completes(private_server,
                                                                        tmp_path):
    process = start_cli(private_server.url, tmp_path / "killed")
    seen: list[str] = []
    seeded = threading.Event()

    def watch():
        for line in process.stderr:
            seen.append(line)
            if "seed_catalog" in line and "Finished in state Completed" in line:
                seeded.set()

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    assert seeded.wait(300), "".join(seen)
    private_server.kill()  # the catalog is stored; the embedding and the search are not
    process.wait(timeout=600)
    reader.join(timeout=10)
    process.stdout.close()
    process.stderr.close()
    assert process.returncode == 3, "".join(seen)
    last = seen[-1].strip()
    assert last.startswith("searcheval: the run failed: DatabaseError: ") and "password" not in last
    private_server.restart()
    assert counts(private_server.url)["eval_runs"] == 0  # nothing half-written
    code, _, err = finish(start_cli(private_server.url, tmp_path / "next"))
    assert code == 0, err
    assert counts(private_server.url)["eval_runs"] == 1
    runs_complete(private_server.url)


def test_postgres_killed_while_publishing_leaves_no_half_written_run(private_server, tmp_path):
    """The publishing transaction is held at its metric rows by a lock, then the server dies:
    the run row written before them in that transaction must not survive."""
    holder = database.connect(private_server.url)
    holder.autocommit = False
    holder.execute("LOCK TABLE eval_metrics IN ACCESS EXCLUSIVE MODE")
    process = start_cli(private_server.url, tmp_path / "killed")

    def publishing_waits() -> bool:
        with database.connect(private_server.url) as conn:
            return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                                "'Lock' AND query ILIKE '%eval_metrics%'").fetchone()[0] > 0

    try:
        wait_until(publishing_waits, 300, "the publishing transaction to reach eval_metrics")
        private_server.kill()
    finally:
        try:
            holder.close()
        except Exception:  # noqa: BLE001 - its server is gone
            pass
    code, _, err = finish(process)
    assert code == 3, err
    assert err.strip().splitlines()[-1].startswith("searcheval: the run failed: ")
    private_server.restart()
    assert counts(private_server.url)["eval_runs"] == 0  # the run row died with its transaction
    code, _, err = finish(start_cli(private_server.url, tmp_path / "next"))
    assert code == 0, err
    assert counts(private_server.url)["eval_runs"] == 1
    runs_complete(private_server.url)

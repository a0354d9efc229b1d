"""The Prefect server `searcheval run` keeps per project folder (searcheval.prefect_server): the
real `searcheval run` and `searcheval server` commands in subprocesses, a real Prefect server in a
temporary folder. The first run starts it, the second reuses it (same pid, same address, and the
runs are on it), `server stop` stops it and leaves no process; a state file naming a process that
is gone is replaced. Every server started here is stopped here."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from searcheval import prefect_server

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SEARCHEVAL = str(Path(sys.executable).parent / "searcheval")
KEPT = re.compile(r"^searcheval: Prefect server: (http://127\.0\.0\.1:(\d+)/api), kept for this "
                  r"folder \(pid (\d+), (started|reused|restarted \([^)]*\)); the UI at "
                  r"http://127\.0\.0\.1:\2; `searcheval server stop` stops it\)$", re.M)


@pytest.fixture
def folder(tmp_path, new_database):
    """A project folder of its own (the example project's flows through SEARCHEVAL_PROJECT), the
    user's environment without PREFECT_* or SEARCHEVAL_PREFECT_SERVER (so: the kept server), a
    database of its own. Whatever server the test leaves there is stopped."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PREFECT_") and k != prefect_server.ENV_MODE}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), SEARCHEVAL_PROJECT=str(ROOT),
               SEARCHEVAL_DATABASE_URL=new_database("kept_server"), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1")
    env.pop("SEARCHEVAL_ALERT_WEBHOOK", None)
    try:
        yield tmp_path, env
    finally:
        left = prefect_server.stop(tmp_path)
        if left.server is not None:
            assert not prefect_server.group_alive(left.server.pid)


def searcheval(folder: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SEARCHEVAL, *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=600)


def bm25_run(folder: Path, env: dict) -> subprocess.CompletedProcess:
    """The fixtures with bm25 only: no model to load, nothing to embed."""
    return searcheval(folder, env, "run", "--fixtures", str(ROOT / "fixtures"), "--configurations",
                      "bm25", "--no-baseline", "--output", str(folder / "out"))


def readme_commands() -> list[list[str]]:
    """The README.md block that shows how to see and stop the kept server, as argument lists."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("<!-- run by: tests/integration/test_prefect_server.py -->") + 2
    block = lines[start:lines.index("```", start)]
    return [line.split() for line in block]


def api(url: str) -> dict:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as response:
        return json.loads(response.read())


def test_the_first_run_starts_the_server_the_second_reuses_it_and_stop_leaves_no_process(folder):
    folder, env = folder
    first = bm25_run(folder, env)
    assert first.returncode == 0, first.stderr[-3000:]
    [(url, port, pid, how)] = KEPT.findall(first.stderr)
    assert how == "started"
    assert "Starting temporary server" not in first.stderr
    state = json.loads((folder / ".searcheval" / "prefect" / "server.json").read_text())
    assert (state["api_url"], state["port"], state["pid"]) == (url, int(port), int(pid))
    assert prefect_server.process_alive(int(pid))
    first_run = json.loads((folder / "out" / "metrics.json").read_text())["flow_run_id"]

    second = bm25_run(folder, env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert KEPT.findall(second.stderr) == [(url, port, pid, "reused")]  # same process, address
    second_run = json.loads((folder / "out" / "metrics.json").read_text())["flow_run_id"]
    # both flow runs are on the kept server, finished
    for run in (first_run, second_run):
        assert api(f"{url}/flow_runs/{run}")["state_type"] == "COMPLETED"

    status_command, stop_command = readme_commands()  # as README.md shows them
    assert status_command == ["searcheval", "server", "status"]
    assert stop_command == ["searcheval", "server", "stop"]
    status = searcheval(folder, env, *status_command[1:])
    assert status.returncode == 0 and status.stdout.startswith(f"running: {url} (pid {pid},")

    stop = searcheval(folder, env, *stop_command[1:])
    assert stop.returncode == 0, stop.stderr
    assert stop.stdout.startswith(f"stopped the Prefect server {url} (pid {pid})")
    assert not prefect_server.process_alive(int(pid))
    assert not prefect_server.group_alive(int(pid))  # its session holds no process either
    assert not prefect_server.answers(url)
    assert not (folder / ".searcheval" / "prefect" / "server.json").exists()
    assert (folder / ".searcheval" / "prefect" / "port").read_text().strip() == port  # for the next
    again = searcheval(folder, env, "server", "stop")
    assert again.stdout.startswith("no kept Prefect server in ")


def test_a_state_file_naming_a_process_that_is_gone_is_replaced(folder):
    folder, env = folder
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no process has now
    with socket.socket() as probe:  # the port the folder's server had: free now
        probe.bind(("127.0.0.1", 0))
        old_port = probe.getsockname()[1]
    directory = folder / ".searcheval" / "prefect"
    directory.mkdir(parents=True)
    (directory / "server.json").write_text(json.dumps({
        "pid": gone.pid, "port": old_port, "api_url": f"http://127.0.0.1:{old_port}/api",
        "ui_url": f"http://127.0.0.1:{old_port}",
        "prefect_version": prefect_server.prefect_version(),
        "python": sys.executable, "started_at": "2026-01-01T00:00:00+00:00",
        "home": str(directory)}))
    status = searcheval(folder, env, "server", "status")
    assert status.stdout.startswith(f"stopped: {directory / 'server.json'} names pid {gone.pid}, "
                                    "which is gone")

    run = bm25_run(folder, env)
    assert run.returncode == 0, run.stderr[-3000:]
    [(url, port, pid, how)] = KEPT.findall(run.stderr)
    assert how == f"restarted (its process {gone.pid} was gone)"
    assert int(pid) != gone.pid and prefect_server.process_alive(int(pid))
    assert int(port) == old_port  # the folder keeps its address (its UI bookmark) when free
    assert json.loads((directory / "server.json").read_text())["pid"] == int(pid)

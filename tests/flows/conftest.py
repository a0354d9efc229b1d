"""Flow tests: one Prefect test harness per session, a loopback webhook receiver, and a fresh
database per module, all stopped when the session ends."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def prefect_harness(tmp_path_factory):
    """One ephemeral Prefect API for the session, with a private PREFECT_HOME (result storage,
    the harness database), so runs on this machine never leak into the tests or back."""
    home = tmp_path_factory.mktemp("prefect-home")
    patch = pytest.MonkeyPatch()
    patch.setenv("PREFECT_HOME", str(home))
    patch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.testing.utilities import prefect_test_harness

    try:
        with prefect_test_harness(server_startup_timeout=60):
            yield
    finally:
        patch.undo()


class Receiver:
    """Collects the JSON bodies POSTed to it; can be told to fail the first N requests."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.fail_next = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if receiver.fail_next > 0:
                    receiver.fail_next -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                receiver.bodies.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook?token=s3cret-token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def webhook():
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def fixtures_copy(tmp_path) -> Path:
    """A private copy of the seed fixtures (three small files) that a test may tamper with."""
    target = tmp_path / "fixtures"
    target.mkdir()
    for name in ("catalog.json", "golden_queries.json", "judgments.csv"):
        shutil.copy(ROOT / "fixtures" / name, target / name)
    return target


@pytest.fixture
def flow_env(monkeypatch, database_module_url, webhook):
    """The flow's settings come from the environment, as in production."""
    monkeypatch.setenv("SEARCHEVAL_DATABASE_URL", database_module_url)
    monkeypatch.setenv("SEARCHEVAL_ALERT_WEBHOOK", webhook.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    webhook.bodies.clear()
    return database_module_url

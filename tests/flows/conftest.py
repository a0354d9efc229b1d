"""Flow tests: one Prefect test harness per session, a loopback webhook receiver, and a fresh
database per module, all stopped when the session ends."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from webhook_receiver import Receiver

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

"""Shared fixtures: one embedded Postgres per test session, a fresh database per test module, the
embedding model loaded once per session, and the example search service (a subprocess over the
fixtures) started once per session when a test asks for it.

The server is started lazily (only when a test asks for a database), lives in a short directory
under /tmp (its unix socket is there), and is stopped and removed when the session ends; pgserver
also stops it at interpreter exit if the session dies half-way.
"""

from __future__ import annotations

import itertools
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from psycopg import sql as pgsql
from psycopg.conninfo import make_conninfo

from searcheval.rankers import embeddings
from searcheval.store import database, sql

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="session")
def pg_server():
    directory = tempfile.mkdtemp(prefix="se-pg-", dir="/tmp")
    server = None
    try:
        server = database.start_embedded(directory, keep_running=False)
        yield server
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(directory, ignore_errors=True)
        Path(directory + ".lock").unlink(missing_ok=True)  # start_embedded's lock file


@pytest.fixture(scope="session")
def database_url(pg_server) -> str:
    """URL of the session's embedded server (its default `postgres` database)."""
    return pg_server.get_uri()


@pytest.fixture(scope="session", autouse=True)
def no_stray_embedded_server(database_url):
    """Whatever a test runs that resolves the database without a URL lands on the session's
    server, never on a `.searcheval/pg` server that would outlive the session (and hold CI's
    output open)."""
    patch = pytest.MonkeyPatch()
    patch.setenv(database.ENV_URL, database_url)
    yield
    patch.undo()


@pytest.fixture(scope="session", autouse=True)
def bm25_cache_of_the_session(tmp_path_factory):
    """The BM25 indexes runs keep on disk (searcheval.rankers.bm25_cache) go to a folder of the
    session, never to `.searcheval/cache` of the folder the tests run from."""
    from searcheval.rankers import bm25_cache

    patch = pytest.MonkeyPatch()
    patch.setenv(bm25_cache.ENV_DIR, str(tmp_path_factory.mktemp("bm25-cache")))
    yield
    patch.undo()


@pytest.fixture(scope="session", autouse=True)
def no_kept_prefect_server():
    """A `searcheval run` a test starts without PREFECT_API_URL gets Prefect's temporary server,
    stopped with the run, never a kept one (searcheval.prefect_server) that would outlive the
    session. The tests of the kept server (tests/integration/test_prefect_server.py) unset this
    for their own folders and stop what they start."""
    from searcheval import prefect_server

    patch = pytest.MonkeyPatch()
    patch.setenv(prefect_server.ENV_MODE, "temporary")
    yield
    patch.undo()


@pytest.fixture(scope="session")
def new_database(database_url):
    """Factory: `new_database(label)` creates an empty database and returns its URL."""
    counter = itertools.count()
    admin = database.connect(database_url)

    def make(label: str = "db") -> str:
        name = f"se_{re.sub(r'[^a-z0-9_]', '_', label.lower())}_{next(counter)}"
        admin.execute(sql.CREATE_DATABASE.format(name=pgsql.Identifier(name)))
        return make_conninfo(database_url, dbname=name)

    yield make
    admin.close()


@pytest.fixture(scope="module")
def database_module_url(new_database, request) -> str:
    """A migrated database of this test module's own."""
    url = new_database(request.module.__name__.rsplit(".", 1)[-1])
    with database.connect(url) as conn:
        database.migrate(conn)
    return url


@pytest.fixture(scope="module")
def conn(database_module_url):
    """A connection to this module's migrated database (tests use distinct catalogs / texts)."""
    connection = database.connect(database_module_url)
    yield connection
    connection.close()


@pytest.fixture(scope="session")
def model_path():
    return embeddings.default_model_path()


@pytest.fixture(scope="session")
def embedding_model(model_path):
    """The SentenceTransformer, loaded once per session (embeddings keeps it for the process)."""
    return embeddings.load_model(model_path)


@pytest.fixture(scope="session")
def example_service(tmp_path_factory):
    """The example search service (examples/search_service) over the fixtures, one per session:
    a real subprocess on a free loopback port. Yields an `ExampleService` (tests/example_service.py):
    `.url`, `.set_knobs(**knobs)` (replaces every knob, zeroes the counters), `.knobs()`,
    `.stats()`. Call `.set_knobs(...)` at the start of each test: knobs outlive a test."""
    from example_service import running_service

    with running_service("--fixtures", str(FIXTURES),
                         log_dir=tmp_path_factory.mktemp("example_service")) as service:
        yield service


CHROMIUM = "/usr/bin/chromium"  # Debian's chromium package (`make browser`); never a downloaded one


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium per test module, driven by Playwright: the Debian build through
    `executable_path` (no `playwright install`). Tests open their own context (`browser.new_context()`)
    and close it; the browser and Playwright's driver stop when the module ends.

    Module scope on purpose: Playwright's sync API keeps an asyncio loop running in the main thread
    while it is open, and Prefect's sync calls (`State.result()`) then return coroutines. A module
    that uses the browser must not also call Prefect in the main thread."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make browser` installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def session_prefect_server(tmp_path_factory):
    """A real Prefect server (`prefect server start`) on a free loopback port with a private
    PREFECT_HOME (SQLite there), one per session, for tests whose subprocesses need a server of
    their own to talk to (`searcheval serve`, flow runs that report to it). Yields
    `{"url", "api_url", "home"}`; stopped (its whole process group) when the session ends.
    tests/deploy starts its own per module: its tests count the deployments of their server."""
    import sys

    from tests.deploy.deploy_support import ROOT, Process, free_port, prefect_env, wait_healthy

    home = tmp_path_factory.mktemp("session-prefect-home")
    url = f"http://127.0.0.1:{free_port()}"
    process = Process([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                       "--port", url.rsplit(":", 1)[1]], home / "server.log",
                      prefect_env(home, f"{url}/api", PREFECT_UI_ENABLED="false"), ROOT)
    try:
        wait_healthy(url, process)
        yield {"url": url, "api_url": f"{url}/api", "home": home}
    finally:
        process.stop()

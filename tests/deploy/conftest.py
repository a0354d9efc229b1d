"""Deployment tests: a real Prefect server on loopback (subprocess, private PREFECT_HOME), worker
and serve subprocesses, and a loopback webhook receiver (the browser is the shared Playwright
`browser`). Every process started here is stopped when its fixture ends, even on failure.
"""

from __future__ import annotations

import pytest
from deploy_support import (
    ROOT,
    VENV_BIN,
    PrefectServer,
    Process,
    free_port,
    prefect_env,
    wait_healthy,
)
from webhook_receiver import Receiver


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory, request):
    """`searcheval ui` (`prefect server start`, configured) on a free loopback port with its own
    PREFECT_HOME (SQLite there).

    While it starts, the session's embedded Postgres starts too (the flow runs need it)."""
    home = tmp_path_factory.mktemp("prefect-server-home")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # `searcheval ui` on a port that is not the default: it alone tells the UI where its API is
    env = prefect_env(home, f"{url}/api")
    env.pop("PREFECT_UI_API_URL", None)
    process = Process([str(VENV_BIN / "searcheval"), "ui", "--port", str(port)],
                      home / "server.log", env, ROOT)
    try:
        request.getfixturevalue("database_url")
        wait_healthy(url, process)
        yield PrefectServer(url=url, api_url=f"{url}/api", home=home, process=process)
    finally:
        process.stop()


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.close()

"""Which Prefect server a flow run started from the command line talks to, said in one line on
stderr before the run begins (searcheval.prefect_server has the order and the kept server):

  searcheval: Prefect server: http://127.0.0.1:PORT/api (PREFECT_API_URL)
  searcheval: Prefect server: http://127.0.0.1:PORT/api, kept for this folder (pid N, reused; ...)
  searcheval: Prefect server: a temporary one for this run (SEARCHEVAL_PREFECT_SERVER=temporary)

With --quiet the line is left out, unless a kept server was started now: a process that outlives
the command is always announced.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prefect.settings import PREFECT_API_URL, temporary_settings

from searcheval import prefect_server

PREFIX = "searcheval: Prefect server: "


def _say(line: str) -> None:
    print(PREFIX + line, file=sys.stderr, flush=True)


@contextmanager
def run_api(quiet: bool = False, folder: str | Path | None = None) -> Iterator[str | None]:
    """Inside: Prefect's settings name the server the run uses (the API URL is yielded; None for
    a temporary server, which Prefect starts itself when the flow run begins)."""
    configured = PREFECT_API_URL.value()
    if configured:
        if not quiet:
            _say(f"{configured} (PREFECT_API_URL)")
        yield configured
        return
    if prefect_server.server_mode() == "temporary":
        if not quiet:
            _say(f"a temporary one for this run, stopped when it ends "
                 f"({prefect_server.ENV_MODE}=temporary)")
        yield None
        return
    server, how = prefect_server.ensure_running(folder)
    if how != "reused" or not quiet:
        _say(f"{server.api_url}, kept for this folder (pid {server.pid}, {how}; the UI at "
             f"{server.ui_url}; `searcheval server stop` stops it)")
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield server.api_url


def settle_services(timeout: float = 60.0) -> None:
    """Send what Prefect still holds in its queues (the flow run's events and API logs) before
    `searcheval run` prints its results. Left to Prefect's own drain at interpreter exit, a busy
    machine made it log "Still processing items: N items remaining..." after the verdict or the
    refusal, which must be the last line on stderr."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for service in (EventsWorker, APILogWorker):
        service.drain_all(timeout=timeout)

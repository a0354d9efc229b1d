"""`searcheval ui`: a local Prefect server with its UI, configured for the port it runs on.

The UI is a web app that calls the server's API at PREFECT_UI_API_URL; on any port but 4200 it
must be told where that is, or it calls :4200 and shows nothing. The server also streams flow
run logs out, so `prefect deployment run ... --watch` shows them, and keeps telemetry off unless
the user turned it on. The command becomes `prefect server start` (same process, same signals).
"""

from __future__ import annotations

import argparse
import os
import sys

from searcheval import defaults
from searcheval.prefect_server import ui_environment  # the kept server's environment too


def cmd_ui(args: argparse.Namespace) -> int:
    env = ui_environment(args.host, args.port)
    print(f"searcheval: the Prefect UI on {env['PREFECT_UI_URL']}; point runs, `searcheval serve` "
          f"and workers at it with PREFECT_API_URL={env['PREFECT_UI_API_URL']}", file=sys.stderr)
    sys.stderr.flush()
    argv = [sys.executable, "-m", "prefect", "server", "start", "--host", args.host,
            "--port", str(args.port)]
    os.execve(sys.executable, argv, env)
    return 0  # not reached: the process is the server now


def add_ui(sub) -> None:
    p = sub.add_parser("ui", help="start a local Prefect server with its UI (until Ctrl-C)")
    p.add_argument("--host", default=defaults.UI_HOST,
                   help=f"address to listen on (default {defaults.UI_HOST})")
    p.add_argument("--port", type=int, default=defaults.UI_PORT,
                   help=f"port of the API and the UI (default {defaults.UI_PORT}); the UI is "
                        "told to call this port (PREFECT_UI_API_URL)")
    p.set_defaults(handler=cmd_ui)

"""`searcheval server status|start|stop`: the Prefect server `searcheval run` keeps for this
folder (searcheval.prefect_server), as `make run` left it."""

from __future__ import annotations

import argparse

from searcheval.cli.common import EXIT_FAILED, EXIT_OK, epilog


def cmd_server_status(args: argparse.Namespace) -> int:
    from searcheval import prefect_server

    print(prefect_server.status().describe())
    return EXIT_OK


def cmd_server_start(args: argparse.Namespace) -> int:
    from searcheval import prefect_server

    server, how = prefect_server.ensure_running()
    print(f"{how}: {server.api_url} (pid {server.pid}); the UI at {server.ui_url}; runs in this "
          f"folder use it; `searcheval server stop` stops it")
    return EXIT_OK


def cmd_server_stop(args: argparse.Namespace) -> int:
    from searcheval import prefect_server

    was = prefect_server.stop()
    if was.state in ("running", "silent"):
        print(f"stopped the Prefect server {was.server.api_url} (pid {was.server.pid}); its "
              f"runs stay in {was.server.home} for the next one")
    elif was.state == "stale":
        print(f"no Prefect server ran: pid {was.server.pid} was gone (forgot it)")
    else:
        print(f"no kept Prefect server in {was.directory}")
    return EXIT_OK


def add_server(sub) -> None:
    p = sub.add_parser(
        "server", help="the local Prefect server runs keep for this folder: status, start, stop",
        description="The local Prefect server `searcheval run` starts once and keeps for this "
                    "folder (its data under .searcheval/prefect, as the embedded Postgres is "
                    "under .searcheval/pg). A run uses PREFECT_API_URL when it is set; with "
                    "SEARCHEVAL_PREFECT_SERVER=temporary it starts a temporary server and stops "
                    "it at its end instead.",
        **epilog(["searcheval server status", "searcheval server stop"],
                 {EXIT_OK: "done (status: whatever the state)",
                  EXIT_FAILED: "the server would not start or stop (see its log)"}))
    actions = p.add_subparsers(dest="server_command", required=True)
    actions.add_parser("status", help="whether the folder's server runs, its address and pid") \
        .set_defaults(handler=cmd_server_status)
    actions.add_parser("start", help="start it now (a run starts it anyway), or say it runs") \
        .set_defaults(handler=cmd_server_start)
    actions.add_parser("stop", help="stop it (its runs are kept for the next one)") \
        .set_defaults(handler=cmd_server_stop)


"""`searcheval serve`: serve deploy/prefect.yaml's deployments from this process."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from searcheval.cli.common import (
    EXIT_OK,
    add_database_url,
    database_env,
    import_project_module,
    project_root,
)


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve deploy/prefect.yaml's deployments with their schedules until interrupted: the runs
    start in this directory, with the code of the project found (here or in a parent, or
    SEARCHEVAL_PROJECT)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    serving = import_project_module("flows.serve")

    with database_env(args.database_url):  # flow runs are subprocesses: they inherit it
        serving.serve_deployments(args.prefect_file, project=project_root(), limit=args.limit,
                                  take_over_pool=args.take_over)
    return EXIT_OK


def add_serve(sub) -> None:
    p = sub.add_parser("serve", help="serve the deployments of deploy/prefect.yaml (schedules, "
                                     "manual runs) from this process, without a worker; the runs "
                                     "use this directory as their working directory")
    p.add_argument("--prefect-file", type=Path, default=None,
                   help="the deployments file (default: deploy/prefect.yaml of the project)")
    p.add_argument("--limit", type=int, default=None, help="most flow runs at the same time")
    add_database_url(p, "Postgres with pgvector for the flow runs")
    p.add_argument("--take-over", action="store_true",
                   help="deployments of the same names bound to a work pool by `prefect deploy` "
                        "are registered again without the pool, so only this process runs them "
                        "(without it, serve refuses them)")
    p.set_defaults(handler=cmd_serve)

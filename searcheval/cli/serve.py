"""`searcheval serve`: serve deploy/prefect.yaml's deployments from this process."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from searcheval.cli.common import (
    EXIT_OK,
    add_database_url,
    current_project,
    database_env,
    import_project_module,
    project_root,
)


def serve_settings():
    """The project settings serve's runs read: those of the working directory (or above it),
    else those beside the flows (the example project), else none."""
    from searcheval.project import find_project

    return current_project() or find_project(project_root())


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve deploy/prefect.yaml's deployments with their schedules until interrupted: the runs
    start in this directory, with the code of the project found (here or in a parent, or
    SEARCHEVAL_PROJECT)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    serving = import_project_module("flows.serve")

    with database_env(args.database_url):  # flow runs are subprocesses: they inherit it
        serving.serve_deployments(args.prefect_file, project=project_root(), limit=args.limit,
                                  take_over_pool=args.take_over, settings=serve_settings())
    return EXIT_OK


def cmd_deployments(args: argparse.Namespace) -> int:
    """Print (or write) the project's deployments as a prefect.yaml, for `prefect deploy`."""
    from searcheval.errors import InputError
    from searcheval.project import deployments_yaml

    settings = current_project()
    if settings is None:
        raise InputError("no project settings (searcheval.yaml with `project:`) here or above: "
                         "create them with `searcheval init`", field="project")
    text = deployments_yaml(settings)
    if args.output is None:
        print(text, end="")
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output}")
    return EXIT_OK


def add_deployments(sub) -> None:
    p = sub.add_parser("deployments", help="the project's deployments (each dataset's nightly on "
                                           "its schedule, a ranking-change) as a prefect.yaml")
    p.add_argument("--output", type=Path, help="write them here (default: stdout)")
    p.set_defaults(handler=cmd_deployments)


def add_serve(sub) -> None:
    p = sub.add_parser("serve", help="serve the deployments of deploy/prefect.yaml (schedules, "
                                     "manual runs) from this process, without a worker; the runs "
                                     "use this directory as their working directory")
    p.add_argument("--prefect-file", type=Path, default=None,
                   help="the deployments file (default: the project settings' deployments, "
                        "each dataset's nightly on its schedule: `searcheval deployments` "
                        "prints them; the example project serves deploy/prefect.yaml)")
    p.add_argument("--limit", type=int, default=None, help="most flow runs at the same time")
    add_database_url(p, "Postgres with pgvector for the flow runs")
    p.add_argument("--take-over", action="store_true",
                   help="deployments of the same names bound to a work pool by `prefect deploy` "
                        "are registered again without the pool, so only this process runs them "
                        "(without it, serve refuses them)")
    p.set_defaults(handler=cmd_serve)

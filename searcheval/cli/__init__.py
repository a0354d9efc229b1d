"""The `searcheval` command line: one module per command group, each with an `add_*` that registers
its parser and a `cmd_*` handler. Bad input prints one line and exits 2.

Exit codes: 0 success / gate passed, 1 gate tripped or threshold missed, 2 refused input,
3 the run failed for another reason (database, model: see the log).

The CLI is the only library code that imports the project's `flows/` (lazily, from the project
folder: `common.import_project_module`).
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Sequence

from searcheval.cli.baseline import add_baseline
from searcheval.cli.benchmark import add_benchmark
from searcheval.cli.common import (
    EXIT_OK,
    EXIT_REFUSED,
    Parser,
    closed_stdout,
    option_flags,
    refusal_line,
)
from searcheval.cli.diff import add_diff
from searcheval.cli.history import add_history
from searcheval.cli.init import add_init
from searcheval.cli.judgments import add_judgments, add_rate
from searcheval.cli.replay import add_replay, add_traces
from searcheval.cli.run import add_run
from searcheval.cli.score import add_score
from searcheval.cli.serve import add_deployments, add_serve
from searcheval.cli.ui import add_ui
from searcheval.cli.validate import add_validate
from searcheval.errors import InputError

COMMANDS: list[Callable] = [add_init, add_run, add_score, add_validate, add_baseline, add_history,
                            add_benchmark, add_replay, add_traces, add_serve, add_deployments,
                            add_judgments, add_rate, add_diff, add_ui]


def build_parser() -> Parser:
    parser = Parser(prog="searcheval", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for add in COMMANDS:
        add(sub)
    return parser


def quiet_defaults(environ=os.environ) -> None:
    """Before anything imports Prefect: its telemetry stays off unless the user turned it on
    (a run never logs `Failed to send telemetry`), and the ephemeral server of a local run gets
    a minute to start on a busy machine (Prefect's default is 20 s)."""
    environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "60")


def main(argv: Sequence[str] | None = None) -> int:
    quiet_defaults()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except InputError as exc:
        if getattr(args, "debug", False):
            import traceback

            traceback.print_exception(exc, file=sys.stderr)
        print(refusal_line(exc, option_flags(parser)), file=sys.stderr)  # the last line
        return EXIT_REFUSED
    except BrokenPipeError:  # `searcheval ... | head`: the reader had enough; stop quietly
        closed_stdout()
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())

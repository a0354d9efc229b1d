"""The `searcheval` command line: one module per command group, each with an `add_*` that registers
its parser and a `cmd_*` handler. Bad input prints one line and exits 2.

Exit codes: 0 success / gate passed, 1 gate tripped or threshold missed, 2 refused input,
3 the run failed for another reason (database, model, backend). One table for every command
(`searcheval.errors.EXIT_CODES`), applied here in `main`: an expected outcome prints one line on
stderr and no traceback, unless `--debug` (every command takes it).

The CLI is the only library code that imports the project's `flows/` (lazily, from the project
folder: `common.import_project_module`).
"""

from __future__ import annotations

import argparse
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
from searcheval.cli.production import add_live, add_queries
from searcheval.cli.replay import add_replay, add_traces
from searcheval.cli.run import add_run
from searcheval.cli.runs import add_runs
from searcheval.cli.score import add_score
from searcheval.cli.serve import add_deployments, add_serve
from searcheval.cli.server import add_server
from searcheval.cli.tune import add_tune
from searcheval.cli.ui import add_ui
from searcheval.cli.validate import add_validate
from searcheval.errors import InputError, exit_code

COMMANDS: list[Callable] = [add_init, add_run, add_runs, add_score, add_validate, add_baseline, add_history,
                            add_benchmark, add_replay, add_traces, add_serve, add_deployments,
                            add_judgments, add_rate, add_diff, add_ui, add_server, add_queries,
                            add_live, add_tune]


def build_parser() -> Parser:
    parser = Parser(prog="searcheval", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for add in COMMANDS:
        add(sub)
    add_debug(parser)
    return parser


def add_debug(parser: argparse.ArgumentParser) -> None:
    """`--debug` on every command that lacks it: tracebacks for every failure. SUPPRESS as the
    default, so a subcommand's parser never resets what its parent's flag set."""
    own = any("--debug" in action.option_strings for action in parser._actions)
    if not own and parser.prog != "searcheval":
        parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                            help="print the traceback of a failure (refusals and database "
                                 "failures too)")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                add_debug(child)


def debugging(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "debug", False))


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
        if os.environ.get("SEARCHEVAL_DATABASE_PASSWORD_SECRET"):  # store.database's variable
            from searcheval.cli.common import import_project_module

            import_project_module("tasks.secrets")  # reads the password's Prefect Secret block
        return args.handler(args)
    except BrokenPipeError:  # `searcheval ... | head`: the reader had enough; stop quietly
        closed_stdout()
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - mapped by the one table, or re-raised (a bug)
        code = exit_code(exc)
        if code is None:
            raise
        if debugging(args):
            import traceback

            traceback.print_exception(exc, file=sys.stderr)
        print(outcome_line(exc, parser), file=sys.stderr)  # the last line
        return code


def outcome_line(exc: BaseException, parser: argparse.ArgumentParser) -> str:
    """The one line an expected outcome prints: a refusal names the option's flag; any other
    failure its type and message on one line (psycopg's messages span two)."""
    if isinstance(exc, InputError):
        return refusal_line(exc, option_flags(parser))
    ours = type(exc).__module__.startswith("searcheval")
    text = str(exc) if ours else f"{type(exc).__name__}: {exc}"
    return f"searcheval: {' '.join(text.split())}"


if __name__ == "__main__":
    raise SystemExit(main())

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
import importlib
import os
import sys
from typing import Callable, Sequence

from searcheval.cli.common import (
    EXIT_OK,
    EXIT_REFUSED,
    Parser,
    closed_stdout,
    option_flags,
    refusal_line,
)
from searcheval import allocator
from searcheval.errors import InputError, exit_code

# Each command: the module that registers it and its `add_*` function, in `--help`'s order.
# Only the invoked command's module is imported (`build_parser(only=...)`): `searcheval score`
# starts without importing what `run`, `ui` or `benchmark` need.
COMMAND_TABLE: dict[str, tuple[str, str]] = {
    "init": ("searcheval.cli.init", "add_init"),
    "run": ("searcheval.cli.run", "add_run"),
    "runs": ("searcheval.cli.runs", "add_runs"),
    "score": ("searcheval.cli.score", "add_score"),
    "validate": ("searcheval.cli.validate", "add_validate"),
    "baseline": ("searcheval.cli.baseline", "add_baseline"),
    "history": ("searcheval.cli.history", "add_history"),
    "benchmark": ("searcheval.cli.benchmark", "add_benchmark"),
    "replay": ("searcheval.cli.replay", "add_replay"),
    "traces": ("searcheval.cli.replay", "add_traces"),
    "serve": ("searcheval.cli.serve", "add_serve"),
    "deployments": ("searcheval.cli.serve", "add_deployments"),
    "judgments": ("searcheval.cli.judgments", "add_judgments"),
    "rate": ("searcheval.cli.judgments", "add_rate"),
    "diff": ("searcheval.cli.diff", "add_diff"),
    "ui": ("searcheval.cli.ui", "add_ui"),
    "server": ("searcheval.cli.server", "add_server"),
    "queries": ("searcheval.cli.production", "add_queries"),
    "live": ("searcheval.cli.production", "add_live"),
    "tune": ("searcheval.cli.tune", "add_tune"),
}


def command_adder(name: str) -> Callable:
    """The `add_*` function that registers the command `name`."""
    module, function = COMMAND_TABLE[name]
    return getattr(importlib.import_module(module), function)


def build_parser(only: str | None = None) -> Parser:
    """The whole command line, or (`only`) the top level with just that command under it."""
    parser = Parser(prog="searcheval", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in COMMAND_TABLE:
        if only is None or name == only:
            command_adder(name)(sub)
    add_debug(parser)
    return parser


def invoked_command(argv: Sequence[str]) -> str | None:
    """The command a command line names first (`score` in `searcheval score ...`), if it is one;
    None for `--help`, nothing, or a typo (the whole parser then lists or suggests them all)."""
    return argv[0] if argv and argv[0] in COMMAND_TABLE else None


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
    allocator.limit_arenas()  # before Prefect, the model or the thread pools start any thread
    quiet_defaults()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(only=invoked_command(argv))
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

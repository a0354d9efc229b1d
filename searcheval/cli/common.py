"""What every command shares: exit codes, the parser that turns a usage error into one line and
exit 2, JSON printing, the database URL of one call, and finding the project's flows/."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

EXIT_OK, EXIT_TRIPPED, EXIT_REFUSED, EXIT_FAILED = 0, 1, 2, 3

class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit 2, like any refused input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"searcheval: {message}", file=sys.stderr)
        raise SystemExit(EXIT_REFUSED)


def _json_default(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


def print_json(payload) -> None:
    print(json.dumps(payload, indent=2, sort_keys=False, default=_json_default, allow_nan=False))


def format_value(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


@contextmanager
def database_env(url: str | None):
    """--database-url reaches the flow's tasks through the environment, for this call only,
    never as a flow parameter (flow parameters are stored with the run and shown in the UI)."""
    previous = os.environ.get("SEARCHEVAL_DATABASE_URL")
    if url:
        os.environ["SEARCHEVAL_DATABASE_URL"] = url
    try:
        yield
    finally:
        if url:
            if previous is None:
                os.environ.pop("SEARCHEVAL_DATABASE_URL", None)
            else:
                os.environ["SEARCHEVAL_DATABASE_URL"] = previous




PROJECT_ENV = "SEARCHEVAL_PROJECT"


def project_root() -> Path:
    """The searcheval project a command runs in: `SEARCHEVAL_PROJECT`, else the working directory
    or the nearest parent of it that holds the project's `flows/` and `tasks/` folders."""
    named = os.environ.get(PROJECT_ENV)
    candidates = [Path(named)] if named else [Path.cwd(), *Path.cwd().parents]
    for folder in candidates:
        if (folder / "flows" / "nightly.py").is_file() and (folder / "tasks").is_dir():
            return folder.resolve()
    where = f"{PROJECT_ENV}={named}" if named else f"{Path.cwd()} or its parents"
    from searcheval.errors import InputError

    raise InputError(f"no searcheval project (flows/ and tasks/) in {where}: run the command "
                     f"from the project folder, or set {PROJECT_ENV}", field="project")


def import_project_module(name: str):
    """A module of the project's `flows/` or `tasks/` (not installed with the package): the project
    folder goes first on sys.path, so its flows run with its own tasks."""
    import importlib

    root = str(project_root())
    if root in sys.path:
        sys.path.remove(root)
    sys.path.insert(0, root)
    return importlib.import_module(name)


def add_conventions(parser: argparse.ArgumentParser, subject: str = "a query") -> None:
    """The metric conventions every scoring command takes: gain, relevance level, and the policy
    for `subject` without a relevant judgment."""
    from searcheval import defaults

    parser.add_argument("--gain", choices=["exponential", "linear"], default=defaults.GAIN,
                        help=f"gain of a grade g in nDCG: 2^g - 1 (exponential) or g (linear, "
                             f"trec_eval's); default {defaults.GAIN}")
    parser.add_argument("--relevance-level", type=int, default=defaults.RELEVANCE_LEVEL,
                        help="lowest grade that counts as relevant for MRR, P, R, MAP "
                             f"(default {defaults.RELEVANCE_LEVEL})")
    parser.add_argument("--no-relevant", choices=["one", "zero", "skip"],
                        default=defaults.NO_RELEVANT,
                        help=f"nDCG and Recall of {subject} with no relevant judgment "
                             f"(default {defaults.NO_RELEVANT})")


def add_database_url(parser: argparse.ArgumentParser, what: str = "Postgres with pgvector") -> None:
    parser.add_argument("--database-url", help=f"{what} (default: SEARCHEVAL_DATABASE_URL, else "
                                               "the embedded server under .searcheval/)")


def option_flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Every option of `parser` and its subcommands: the field it sets (its dest) -> its flag."""
    flags: dict[str, str] = {}
    for action in parser._actions:  # argparse keeps no public list of its actions
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                for dest, flag in option_flags(sub).items():
                    flags.setdefault(dest, flag)
        else:
            long = [o for o in action.option_strings if o.startswith("--")]
            if long:
                flags.setdefault(action.dest, long[0])
    return flags


def refusal_line(exc, flags: dict[str, str]) -> str:
    """The one line a refused input prints. The library names fields (`max_grade`); an error that
    is about an option rather than a file names the option's flag (`--max-grade`), in its place
    and in the message."""
    if exc.file is None and exc.field in flags:
        message = re.sub(r"`([a-z_]+)`", lambda m: flags.get(m[1], m[0]), exc.message)
        return f"searcheval: {flags[exc.field]}: {message}"
    return f"searcheval: {exc}"


def add_collection(parser: argparse.ArgumentParser) -> None:
    """Which collection a command reads: the seed fixtures' folder, or a BEIR folder and split."""
    from searcheval import defaults

    source = parser.add_mutually_exclusive_group()
    source.add_argument("--fixtures", type=Path, default=Path(defaults.FIXTURES),
                        help="folder with catalog.json, golden_queries.json, judgments.csv "
                             f"(default {defaults.FIXTURES})")
    source.add_argument("--dataset", type=Path, help="a test collection in BEIR layout")
    parser.add_argument("--split", default=defaults.SPLIT,
                        help=f"BEIR qrels split (default {defaults.SPLIT})")

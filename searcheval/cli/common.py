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

from searcheval.errors import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, EXIT_TRIPPED  # noqa: F401

EXIT_MEANINGS = {
    EXIT_OK: "success",
    EXIT_TRIPPED: "the gate tripped",
    EXIT_REFUSED: "refused input (one line on stderr, nothing written)",
    EXIT_FAILED: "another failure: database, model, backend (see the log)",
}


def epilog(examples: list[str], codes: dict[int, str]) -> dict:
    """`add_parser` keywords that end a command's help with examples and its exit codes."""
    lines = ["example:" if len(examples) == 1 else "examples:"]
    lines += [f"  {example}" for example in examples]
    lines += ["", "exit codes:"]
    lines += [f"  {code}  {meaning}" for code, meaning in sorted(codes.items())]
    return {"epilog": "\n".join(lines), "formatter_class": argparse.RawDescriptionHelpFormatter}


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit 2, like any refused input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"searcheval: {message}", file=sys.stderr)
        raise SystemExit(EXIT_REFUSED)


def closed_stdout() -> None:
    """The reader of stdout went away (`searcheval ... | head`): send the rest to /dev/null, so
    neither a later print nor Python's flush at exit complains with a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no file descriptor (a test captures it)
        pass


def print_results(*blocks: str) -> None:
    """The results on stdout; a closed pipe ends them quietly and keeps the command's exit code."""
    try:
        for block in blocks:
            print(block)
        sys.stdout.flush()
    except BrokenPipeError:
        closed_stdout()


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


def add_conventions(parser: argparse.ArgumentParser, subject: str = "a query", *,
                    from_dataset: bool = False) -> None:
    """The metric conventions every scoring command takes: gain, relevance level, and the policy
    for `subject` without a relevant judgment. With `from_dataset` the flags default to None:
    the dataset's settings (searcheval.yaml) decide, else the library's defaults."""
    from searcheval import defaults

    def default(value):
        return None if from_dataset else value

    def said(value) -> str:
        return f"default: the dataset's setting, else {value}" if from_dataset \
            else f"default {value}"

    parser.add_argument("--gain", choices=["exponential", "linear"], default=default(defaults.GAIN),
                        help=f"gain of a grade g in nDCG: 2^g - 1 (exponential) or g (linear, "
                             f"trec_eval's); {said(defaults.GAIN)}")
    parser.add_argument("--relevance-level", type=int, default=default(defaults.RELEVANCE_LEVEL),
                        help="lowest grade that counts as relevant for MRR, P, R, MAP "
                             f"({said(defaults.RELEVANCE_LEVEL)})")
    parser.add_argument("--no-relevant", choices=["one", "zero", "skip"],
                        default=default(defaults.NO_RELEVANT),
                        help=f"nDCG and Recall of {subject} with no relevant judgment "
                             f"({said(defaults.NO_RELEVANT)})")


def add_judgment_flags(parser: argparse.ArgumentParser) -> None:
    """`--judgment-rule` and `--judgment-sources`: which grades a command scores with (`run`,
    `tune`), one definition."""
    from searcheval import defaults

    parser.add_argument(
        "--judgment-rule",
        help="effective grade of a pair: each judge's latest, then median | majority | "
             "judge:NAME; judge:dataset counts the dataset's own qrels only (default: the "
             f"project's setting, else {defaults.JUDGMENT_RULE})")
    parser.add_argument(
        "--judgment-sources", metavar="dataset|all|SOURCES",
        help="which judgments count: dataset (the dataset's own qrels only), all, or sources "
             "counted beside them, e.g. human,model (default: the project's setting, else the "
             "dataset folder's, else dataset for BEIR qrels and WANDS labels, all otherwise)")


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
    """Which collection a command reads: a dataset of the project (its name), a dataset folder
    (BEIR, WANDS or the fixtures' layout, told by its files) and its split, a fixtures folder, or
    a table mapping; none given: the project's default dataset (searcheval.project). And the
    loader's conventions (grade scale, grade map) when they differ from the dataset's settings."""
    from searcheval import defaults

    source = parser.add_mutually_exclusive_group()
    source.add_argument("--dataset", type=Path,
                        help="a dataset of the project settings (its name), or a dataset folder: "
                             "BEIR (corpus.jsonl, queries.jsonl, qrels/), WANDS (product.csv, "
                             "query.csv, label.csv) or the fixtures' layout (default: the "
                             "project's default dataset)")
    source.add_argument("--fixtures", type=Path,
                        help="a folder with catalog.json, golden_queries.json, judgments.csv")
    source.add_argument("--mapping", type=Path,
                        help="a YAML mapping of columns over CSV, TSV, JSONL, Parquet files or "
                             "SQL queries (docs/configurations-and-backends.md)")
    parser.add_argument("--split", default=None,
                        help=f"BEIR qrels split (default: the project's setting, else "
                             f"{defaults.SPLIT})")
    parser.add_argument("--grade-scale", type=grade_scale_arg, metavar="LO,HI",
                        help="the grades a judgment may have, e.g. 0,3 (default: the dataset's "
                             "setting, else the format's scale or the largest grade found)")
    parser.add_argument("--grade-map", metavar="LABEL=GRADE,...",
                        help="text labels to grades (WANDS, mappings), e.g. "
                             "Exact=2,Partial=1,Irrelevant=0 (default: the dataset's setting, "
                             "else WANDS' Exact=3,Partial=1,Irrelevant=0)")


def current_project():
    """The project settings of this command (searcheval.project.find_project), or None."""
    from searcheval.project import find_project

    return find_project()


def resolve_args(args: argparse.Namespace, library: dict, *, rename: dict | None = None):
    """`searcheval.project.resolve_options` over a command's flags: `library` maps each option
    (flow-parameter name) to its library default; `rename` maps option -> flag dest where
    they differ. The locations and the split always take part."""
    from searcheval import defaults
    from searcheval.project import resolve_options

    rename = rename or {}
    names = {"split": defaults.SPLIT, **library}
    given = {name: getattr(args, rename.get(name, name), None) for name in names}
    for location in ("fixtures", "dataset", "mapping"):
        value = getattr(args, location, None)
        given[location] = str(value) if value is not None else None
    return resolve_options(given, names, project=current_project())


def collection_arguments(args: argparse.Namespace, resolved=None) -> dict:
    """load_collection's keywords from add_collection's flags, resolved over the project."""
    from searcheval.io.settings import parse_grade_map

    resolved = resolved or resolve_args(args, {})
    v = resolved.values
    return {"fixtures": v["fixtures"], "dataset": v["dataset"], "mapping": v["mapping"],
            "split": v["split"],
            "grade_scale": args.grade_scale,
            "grade_map": dict(parse_grade_map(args.grade_map)) if args.grade_map else None,
            "name": v["dataset_name"]}


def grade_scale_arg(text: str) -> list[int]:
    lo, sep, hi = text.partition(",")
    try:
        if not sep:
            raise ValueError
        return [int(lo), int(hi)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO,HI whole grades, e.g. 0,3; got {text!r}") \
            from None

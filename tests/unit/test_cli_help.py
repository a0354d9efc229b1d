"""Every option of every subcommand says what it does; the main commands end their help with
examples that parse and with their exit codes."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from searcheval.cli import build_parser
from searcheval.cli.common import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, EXIT_TRIPPED


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("searcheval",)):
    """(path, parser, help of the subcommand) for the parser and every subcommand under it."""
    yield path, parser
    for action in parser._actions:  # argparse keeps no public list of its actions
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def subcommand_helps(parser: argparse.ArgumentParser):
    for path, p in commands(parser):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                for name in action.choices:
                    yield (*path, name), helps.get(name)


def test_the_walk_sees_every_command():
    paths = {" ".join(path) for path, _ in commands(build_parser())}
    assert {"searcheval run", "searcheval score", "searcheval replay",
            "searcheval baseline update", "searcheval serve", "searcheval traces load",
            "searcheval benchmark metrics", "searcheval benchmark wands"} <= paths


def test_every_option_and_subcommand_has_a_help_text():
    parser = build_parser()
    missing = [f"{' '.join(path)} {action.option_strings or action.dest}"
               for path, p in commands(parser) for action in p._actions
               if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
               and not (action.help or "").strip()]
    missing += [" ".join(path) for path, text in subcommand_helps(parser) if not text]
    assert missing == []


EXIT_CODES = {
    ("run",): {EXIT_OK, EXIT_TRIPPED, EXIT_REFUSED, EXIT_FAILED},
    ("score",): {EXIT_OK, EXIT_REFUSED},
    ("replay",): {EXIT_OK, EXIT_TRIPPED, EXIT_REFUSED, EXIT_FAILED},
    ("baseline", "update"): {EXIT_OK, EXIT_REFUSED, EXIT_FAILED},
}


@pytest.mark.parametrize("command", sorted(EXIT_CODES), ids=" ".join)
def test_the_main_commands_end_with_examples_that_parse_and_the_exit_codes(command):
    parser = build_parser()
    sub = dict(commands(parser))[("searcheval", *command)]
    text = sub.format_help()
    examples, codes = text.split("\nexit codes:\n")
    assert codes.strip()  # the exit codes end the help
    listed = {int(m[1]) for m in re.finditer(r"^  (\d)  \S", codes, re.M)}
    assert listed == EXIT_CODES[command]
    lines = [line.strip() for line in re.split(r"\nexamples?:\n", examples)[-1].splitlines()
             if line.strip()]
    assert lines and all(line.startswith(f"searcheval {' '.join(command)} ") for line in lines)
    for line in lines:  # each example is a command line the parser accepts as it stands
        args = parser.parse_args(shlex.split(line)[1:])
        assert args.handler is not None

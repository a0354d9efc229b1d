"""The command table: `searcheval COMMAND` builds only COMMAND's parser (so `searcheval score` does
not import what other commands need), and that parser is the one the whole command line holds."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from searcheval.cli import COMMAND_TABLE, build_parser, invoked_command, main


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps no public list of its actions
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def contents(parser: argparse.ArgumentParser) -> list:
    """Everything a parser and the subcommands under it accept, in order, for comparison."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, helps.get(name), sub.description, contents(sub)))
        else:
            found.append((tuple(action.option_strings), action.dest, action.help,
                          repr(action.default), action.nargs, repr(action.choices)))
    return found


def test_the_table_names_every_command_of_the_whole_parser_in_order():
    assert list(subcommands(build_parser())) == list(COMMAND_TABLE)


@pytest.mark.parametrize("name", list(COMMAND_TABLE))
def test_each_command_builds_alone_the_same_as_in_the_whole_parser(name):
    alone = subcommands(build_parser(only=name))
    assert list(alone) == [name]
    whole = build_parser()
    assert contents(build_parser(only=name))[1:] == \
        [entry for entry in contents(whole)[1:] if entry[0] == name]
    assert alone[name].format_help() == subcommands(whole)[name].format_help()


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    usage = capsys.readouterr().out
    for name in COMMAND_TABLE:
        assert name in usage


def test_the_invoked_command_is_the_first_word_only_when_it_is_a_command():
    assert invoked_command(["score", "--qrels", "q"]) == "score"
    assert invoked_command(["--help"]) is None
    assert invoked_command([]) is None
    assert invoked_command(["scor"]) is None  # the whole parser suggests the commands


def test_a_typo_is_refused_naming_the_commands(capsys):
    with pytest.raises(SystemExit) as done:
        main(["scor"])
    assert done.value.code == 2
    assert "'score'" in capsys.readouterr().err


def test_score_starts_without_the_other_commands_modules():
    code = ("import sys\nfrom searcheval.cli import build_parser\nbuild_parser(only='score')\n"
            "print(sorted(m for m in sys.modules if m.startswith(('searcheval.cli.', 'prefect', "
            "'pandas'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert eval(out) == ["searcheval.cli.common", "searcheval.cli.score"]

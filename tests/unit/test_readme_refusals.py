"""docs/gate-and-baselines.md's "Refused input and the gate's status" example, executed: the command it shows
prints the line it shows, and exits 2."""

from __future__ import annotations

import shlex
from pathlib import Path

from searcheval.cli import main

ROOT = Path(__file__).resolve().parents[1].parent
SECTION = (ROOT / "docs" / "gate-and-baselines.md").read_text(encoding="utf-8") \
    .split("### Refused input and the gate's status")[1].split("\n### ")[0]


def test_the_refusal_example_prints_what_the_readme_shows(capsys, monkeypatch):
    block = SECTION.split("```\n")[1]
    command, shown = block.strip().split("\n", 1)
    argv = shlex.split(command.removeprefix("$ "))
    assert argv[0] == "searcheval"
    monkeypatch.chdir(ROOT)  # the project's fixtures and baseline.json
    assert main(argv[1:]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == shown.strip()

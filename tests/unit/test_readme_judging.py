"""docs/judging.md's "Judging" commands are ones the CLI accepts, with the options they name."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from searcheval import defaults
from searcheval.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "docs" / "judging.md").read_text(encoding="utf-8").split("## Judging:")[1] \
    .split("\n## ")[0]


def commands() -> list[list[str]]:
    block = re.search(r"```\n(.*?)```", SECTION, re.S).group(1)
    out = []
    for line in block.splitlines():
        line = line.split("#")[0].split(">")[0].strip()
        if line:
            out.append(shlex.split(line))
    return out


def test_every_command_of_the_loop_parses():
    parser = build_parser()
    parsed = [parser.parse_args(argv[1:]) for argv in commands()]
    assert [c[0] for c in commands()] == ["searcheval"] * 7
    pool = parsed[2]
    assert (pool.run, pool.save, pool.overlap, pool.judges) == ("latest", True, 0.2, "ann,bob")
    rate = parsed[3]
    assert (rate.judge, rate.pool, rate.port, rate.host) == ("ann", "latest", 8765, "127.0.0.1")
    assert parsed[4].judge == "bob" and parsed[5].format == "trec"


def test_the_numbers_the_section_states_are_the_defaults():
    assert f"`--agreement-floor` ({defaults.AGREEMENT_FLOOR}" in SECTION
    assert f"`--depth` ({defaults.POOL_DEPTH})" in SECTION
    assert f"--port {defaults.RATE_PORT}" in SECTION
    assert f"`median` (default" in SECTION and defaults.JUDGMENT_RULE == "median"
    assert defaults.RATE_TOKEN_ENV in SECTION

"""Docs that cannot drift: every shell block of README.md and docs/*.md that shows a `searcheval`
or `make` command is run by a test, or says on the line before it why it is not run here
(the convention is at the top of docs/README.md):

    <!-- run by: tests/unit/test_readme_score.py -->
    <!-- not run: it needs a Prefect server and a worker -->
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
COMMAND = re.compile(r"^\s*(\$ )?([A-Z_]+=\S* )*(searcheval|make) [a-z]")
MARK = re.compile(r"^<!-- (run by: (?P<test>tests/\S+\.py)|not run: (?P<reason>.+?)) -->\s*$")


def shell_blocks(text: str):
    """(line number of the fence, the line before it, the block's lines) of every shell block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if m.group(1) in ("", "shell", "bash", "sh", "console"):
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            yield i + 1, before, lines[i + 1:end]
        i = end + 1


def commands(block: list[str]) -> bool:
    return any(COMMAND.match(line) for line in block)


def test_the_pages_are_found():
    names = {p.name for p in PAGES}
    assert {"README.md", "gate-and-baselines.md", "configurations-and-backends.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_block_is_run_by_a_test_or_says_why_not(page):
    text = page.read_text(encoding="utf-8")
    name = str(page.relative_to(ROOT))
    problems = []
    for line, before, block in shell_blocks(text):
        if not commands(block):
            continue
        mark = MARK.match(before.strip())
        if mark is None:
            problems.append(f"{name}:{line}: a command block without `<!-- run by: TEST -->` or "
                            f"`<!-- not run: REASON -->` before it: {block[0][:60]!r}")
        elif mark["test"]:
            test = ROOT / mark["test"]
            if not test.is_file():
                problems.append(f"{name}:{line}: no test {mark['test']}")
            elif page.name not in test.read_text(encoding="utf-8"):
                problems.append(f"{name}:{line}: {mark['test']} does not read {page.name}")
        elif len(mark["reason"].split()) < 3:
            problems.append(f"{name}:{line}: say why it is not run: {mark['reason']!r}")
    assert problems == []


def test_the_check_sees_an_unmarked_block():
    page = "text\n\n```shell\nsearcheval run --no-baseline\n```\n"
    (line, before, block), = shell_blocks(page)
    assert commands(block) and MARK.match(before) is None
    marked = "<!-- not run: it needs a server -->\n```\nmake ui\n```\n"
    (_, before, block), = shell_blocks(marked)
    assert commands(block) and MARK.match(before)["reason"] == "it needs a server"

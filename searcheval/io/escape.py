"""Text from data, escaped for where it is written.

- **CSV cells** (`csv_cell`, OWASP's rule against formula injection): a text cell that starts
  with `=`, `+`, `-`, `@`, a tab or a carriage return is written with a leading `'`, so a
  spreadsheet shows it as text instead of running it (`=HYPERLINK(...)`, `=cmd|...`). Numbers are
  written as they are. The readers of searcheval's own CSV files (`judgments.csv`, `judgments
  import`) take the `'` off again (`csv_value`), so what is exported reads back unchanged.
- **Markdown** (`md`, `md_cell`): text from data (titles, query text, ids, error bodies) in
  report.md, diff.md and Prefect's markdown artifacts renders as the same text, never as a link,
  an image, HTML or emphasis: every character markdown or HTML gives a meaning is escaped (HTML
  characters as entities, the others with a backslash), and a table cell has its `|` escaped and
  its line breaks made spaces.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["FORMULA_STARTS", "csv_cell", "csv_row", "csv_value", "md", "md_cell"]

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell safe to open in a spreadsheet (module docstring); non-strings unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_row(values) -> list:
    return [csv_cell(v) for v in values]


def csv_value(cell: str) -> str:
    """A cell as `csv_cell` wrote it, read back: `'=x` is `=x`; any other cell unchanged."""
    if cell.startswith("'") and cell[1:].startswith(FORMULA_STARTS):
        return cell[1:]
    return cell


_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# what gives inline markdown a meaning: backslash, code, emphasis, links and images, tables,
# strikethrough; `_` only at a word's edge (inside a word it never emphasises, and ids use it)
_MARKDOWN = re.compile(r"([\\`*\[\]|~!])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# bare addresses GitHub-flavoured markdown (and Prefect's UI) would make links of
_AUTOLINK = re.compile(r"(?i)(://|www\.)")


def md(value: Any) -> str:
    """Text from data as literal inline markdown (module docstring): line breaks become spaces,
    so it never starts a heading, a list or a quote."""
    text = " ".join(str(value).split())
    text = "".join(_HTML.get(c, c) for c in text)
    text = _MARKDOWN.sub(lambda m: "\\" + m[0], text)
    return _AUTOLINK.sub(lambda m: ":\\/\\/" if m[0] == "://" else m[0][:3] + "\\.", text)


md_cell = md

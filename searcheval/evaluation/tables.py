"""Markdown tables that fit a narrow page: the report as the Prefect UI shows it (its artifact
pane is about 700 px wide on a laptop) is read without scrolling sideways.

A table wider than the page is cut into consecutive tables of fewer columns, each repeating the
first column (the row's name), with the rows in the same order. A table with a column of prose
too wide for the page even on its own (the UI does not wrap table cells) becomes a list, one item
per row, whose text wraps. Widths are estimated from the
characters of each column (the UI's table font is about 7 px a character, and each cell has
padding); nothing else in the text changes.
"""

from __future__ import annotations

WIDTH_PX = 620  # what a table may take: the UI's pane is ~700 px at 1280 px, less a margin
CHAR_PX = 7.0
CELL_PX = 26


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") else inner
    return [cell.strip() for cell in inner.split("|")]


def _is_rule(cells: list[str]) -> bool:
    return bool(cells) and all(c and set(c) <= set(":-") for c in cells)


def _column_px(rows: list[list[str]], column: int) -> float:
    return max(len(row[column]) if column < len(row) else 0 for row in rows) * CHAR_PX + CELL_PX


def column_groups(rows: list[list[str]], width_px: float = WIDTH_PX) -> list[list[int]]:
    """The columns (after the first) of each narrower table: as many as fit beside column 0."""
    columns = max(len(row) for row in rows)
    first = _column_px(rows, 0)
    groups: list[list[int]] = [[]]
    used = first
    for column in range(1, columns):
        px = _column_px(rows, column)
        if groups[-1] and used + px > width_px:
            groups.append([])
            used = first
        groups[-1].append(column)
        used += px
    return groups


def _render(rows: list[list[str]], rule: list[str], columns: list[int]) -> list[str]:
    picked = [0, *columns]

    def line(row: list[str]) -> str:
        return "| " + " | ".join(row[c] if c < len(row) else "" for c in picked) + " |"

    return [line(rows[0]), "|" + "|".join(rule[c] if c < len(rule) else "---"
                                         for c in picked) + "|",
            *(line(row) for row in rows[1:])]


def _as_list(rows: list[list[str]]) -> list[str]:
    header = rows[0]
    items = []
    for row in rows[1:]:
        fields = [f"{header[c]}: {row[c]}" for c in range(1, min(len(row), len(header)))
                  if row[c] not in ("", "-")]
        items.append(f"- **{row[0]}**" + (" — " + "; ".join(fields) if fields else ""))
    return items


def narrow_tables(markdown: str, width_px: float = WIDTH_PX) -> str:
    """`markdown` with every table wider than `width_px` cut into narrower ones (see above)."""
    lines = markdown.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        header = _cells(lines[i]) if lines[i].lstrip().startswith("|") else None
        rule = _cells(lines[i + 1]) if header and i + 1 < len(lines) else None
        if not header or not rule or not _is_rule(rule):
            out.append(lines[i])
            i += 1
            continue
        end = i + 2
        while end < len(lines) and lines[end].lstrip().startswith("|"):
            end += 1
        rows = [header, *(_cells(line) for line in lines[i + 2:end])]
        groups = column_groups(rows, width_px)
        if any(_column_px(rows, 0) + sum(_column_px(rows, c) for c in columns) > width_px
               for columns in groups):
            out.extend(_as_list(rows))
        elif len(groups) == 1:
            out.extend(lines[i:end])
        else:
            for number, columns in enumerate(groups):
                if number:
                    out.append("")
                out.extend(_render(rows, rule, columns))
        i = end
    return "\n".join(out)

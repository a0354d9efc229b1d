"""Marks of where a `searcheval run` process is, for `searcheval benchmark run`'s stage table.

With SEARCHEVAL_TIMINGS naming a file, each `mark(name)` appends one JSON line
`{"mark": name, "at": seconds since the epoch}` to it; without, a mark costs one dictionary
lookup. The benchmark reads the marks beside the flow run's task runs (their times from the
Prefect API) and the process's own start and end, measured from outside.
"""

from __future__ import annotations

import json
import os
import time

ENV = "SEARCHEVAL_TIMINGS"


def mark(name: str) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"mark": name, "at": time.time()}) + "\n")


def read_marks(path: str | os.PathLike) -> dict[str, float]:
    """Each mark's time (the last one of a name wins); {} when nothing was marked."""
    marks: dict[str, float] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    entry = json.loads(line)
                    marks[entry["mark"]] = float(entry["at"])
    except FileNotFoundError:
        pass
    return marks

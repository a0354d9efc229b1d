"""The project's files, found one way: `configurations.yaml`, `baseline.json`, `baselines/`,
`expectations/` and the fixtures resolve against the project folder.

The project folder is `SEARCHEVAL_PROJECT` when it is set, else the working directory or the
nearest of its parents that holds one of `MARKERS`. A relative path that exists from the working
directory is used as it is (so every command run from the project folder reads what it always
read); otherwise it is the project folder's. A missing file is refused naming where it was
looked for (`looked_for`).
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ENV = "SEARCHEVAL_PROJECT"
#: what makes a folder a project: its settings, its configurations, its baseline, its flows
MARKERS = ("searcheval.yaml", "configurations.yaml", "baseline.json", "flows/nightly.py")


def project_folder(environ: dict[str, str] | None = None, cwd: Path | None = None) -> Path:
    """SEARCHEVAL_PROJECT, else the working directory or its nearest parent with a marker (the
    working directory when none has one)."""
    environ = os.environ if environ is None else environ
    named = environ.get(PROJECT_ENV)
    if named:
        return Path(named).expanduser().resolve()
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if any((folder / marker).exists() for marker in MARKERS):
            return folder
    return here


def project_path(path: str | Path, environ: dict[str, str] | None = None,
                 cwd: Path | None = None) -> Path:
    """`path` as given when it is absolute or exists from the working directory; else the
    project folder's (which may not exist either: the reader's refusal then names it, and
    `looked_for` says where else it was looked for)."""
    given = Path(path).expanduser()
    here = cwd or Path.cwd()
    if given.is_absolute() or (here / given).exists():
        return given
    return project_folder(environ, here) / given


def missing(what: str, path: str | Path, environ: dict[str, str] | None = None,
            cwd: Path | None = None) -> str:
    """The refusal's message of a missing file: `what`, and for a relative path where it was
    looked for."""
    given = Path(path).expanduser()
    return what if given.is_absolute() else f"{what} ({looked_for(given, environ, cwd)})"


def looked_for(path: str | Path, environ: dict[str, str] | None = None,
               cwd: Path | None = None) -> str:
    """Where a relative `path` was looked for, for a refusal's message."""
    given = Path(path).expanduser()
    here = (cwd or Path.cwd()).resolve()
    if given.is_absolute():
        return str(given)
    places = dict.fromkeys([str(here / given), str(project_folder(environ, here) / given)])
    how = (f"{PROJECT_ENV}" if (os.environ if environ is None else environ).get(PROJECT_ENV)
           else "the working directory or its parents")
    return f"looked for {' and '.join(places)} (the project folder: {how})"

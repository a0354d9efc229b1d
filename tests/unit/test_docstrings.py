"""Docstrings that cannot drift: what a package's docstring names (a module, a function, an
attribute, in backquotes or called), and what a composition's docstring calls, exists."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "searcheval"
INITS = sorted(PACKAGE.rglob("__init__.py"))
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolves(base: str, dotted: str) -> bool:
    """`dotted` names a module or an attribute, relative to `base` or to `searcheval`."""
    for start in (base, "searcheval", ""):
        name = f"{start}.{dotted}" if start else dotted
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                value = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attribute in parts[cut:]:
                    value = getattr(value, attribute)
            except AttributeError:
                break
            return True
    return False


def named(doc: str) -> set[str]:
    """Backquoted names and called names, but not a method of a value the example made
    (`result = evaluate(...)`, then `result.per_query()`)."""
    quoted = {t for t in re.findall(r"`([^`]+)`", doc) if NAME.match(t)}
    called = set(re.findall(r"\b([A-Za-z_][A-Za-z0-9_.]*)\(", doc))
    made = set(re.findall(r"\b([a-z_][a-z0-9_]*) = ", doc))
    return {n for n in quoted | called if n.split(".")[0] not in made}


@pytest.mark.parametrize("init", INITS, ids=lambda p: module_of(p))
def test_what_a_package_docstring_names_exists(init):
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    base = module_of(init)
    missing = sorted(n for n in named(doc) if not resolves(base, n)
                     and n not in ("searcheval", "store"))  # the package itself, by its name
    assert missing == []


@pytest.mark.parametrize("module", ["searcheval.replay.compose", "searcheval.evaluation.compose"])
def test_what_a_composition_docstring_calls_exists(module):
    imported = importlib.import_module(module)
    calls = set(re.findall(r"=\s*([a-z_]+)\(", imported.__doc__))
    assert calls and all(callable(getattr(imported, c, None)) for c in calls), calls

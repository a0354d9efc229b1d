"""One entry point for every kind of input collection: the seed fixtures or a BEIR folder."""

from __future__ import annotations

from pathlib import Path

from searcheval.errors import InputError
from searcheval.io.beir import load_beir
from searcheval.io.fixtures import load_fixtures
from searcheval.types import Collection


def load_collection(*, fixtures: str | Path | None = None, dataset: str | Path | None = None,
                    split: str = "test", max_queries: int | None = None) -> Collection:
    """Either the seed fixtures or a BEIR dataset (exactly one)."""
    if (fixtures is None) == (dataset is None):
        raise InputError("expected exactly one of `fixtures` (a folder) or `dataset` (a BEIR folder)",
                         field="fixtures")
    if dataset is not None:
        return load_beir(dataset, split, max_queries=max_queries)
    return load_fixtures(fixtures)

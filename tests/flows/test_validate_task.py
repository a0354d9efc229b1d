"""The nightly's validate task: a collection of VALIDATE_APART_ROWS rows or more is checked by Great
Expectations in a process of its own (validation.Apart), a smaller one in the run's process."""

from __future__ import annotations

from pathlib import Path

import pytest

from searcheval import defaults
from searcheval.evaluation import validation
from searcheval.io.fixtures import load_fixtures

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture
def started(monkeypatch):
    """Every Apart the task starts, recorded."""
    made: list = []
    original = validation.Apart.__init__

    def init(self):
        original(self)
        made.append(self)

    monkeypatch.setattr(validation.Apart, "__init__", init)
    return made


def test_a_collection_at_the_threshold_is_validated_apart_with_the_same_report(monkeypatch,
                                                                             started):
    from tasks.evaluation import validate

    collection = load_fixtures(ROOT / "fixtures")
    rows = len(collection.resources) + len(collection.queries) + len(collection.judgments)
    assert rows == 18 + 15 + 270
    here = validate.fn(collection, 365, 3)
    assert started == []  # 303 rows: under the default threshold of 50,000
    monkeypatch.setattr(defaults, "VALIDATE_APART_ROWS", rows)
    apart = validate.fn(collection, 365, 3)
    assert len(started) == 1 and started[0]._process.returncode == 0  # it answered and exited
    assert apart.to_dict() == here.to_dict()
    monkeypatch.setattr(defaults, "VALIDATE_APART_ROWS", rows + 1)
    validate.fn(collection, 365, 3)
    assert len(started) == 1

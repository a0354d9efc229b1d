"""`searcheval validate`: the fixtures pass; a refusal found by the suites is one line, exit 2."""

import json
import shutil
from pathlib import Path

import pytest

from searcheval.cli import main

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_the_fixtures_are_valid(capsys):
    assert main(["validate", "--fixtures", str(FIXTURES)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "fixtures: 18 resources, 15 queries, 270 judgments"
    assert out[-2:] == ["stale judgments: 0", "valid"]


def test_a_category_short_of_queries_is_refused_by_the_suites(tmp_path, capsys):
    for name in ("catalog.json", "judgments.csv"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    queries = json.loads((FIXTURES / "golden_queries.json").read_text())
    dropped = [q["id"] for q in queries if q["category"] == "no-result"][:2]
    (tmp_path / "golden_queries.json").write_text(
        json.dumps([q for q in queries if q["id"] not in dropped]))
    judgments = (FIXTURES / "judgments.csv").read_text().splitlines()
    (tmp_path / "judgments.csv").write_text(
        "\n".join(j for j in judgments if j.split(",")[0] not in dropped) + "\n")
    assert main(["validate", "--fixtures", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "golden_queries.json" in err[0] and "no-result" in err[0]

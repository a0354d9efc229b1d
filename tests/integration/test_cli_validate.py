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


def test_a_wands_folder_and_a_mapping_validate_with_their_own_categories(tmp_path, capsys):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
    from test_mapped import write_dataset
    from test_wands import write_sample

    folder = write_sample(tmp_path / "wands")
    assert main(["validate", "--dataset", str(folder)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "wands: 3 resources, 3 queries, 5 judgments"
    assert out[-3:] == ["note: 3 of 3 categories have fewer than 3 queries (their means are "
                        "noisy), e.g. 'Massage Chairs', 'Slow Cookers', 'unclassified'",
                        "stale judgments: 0", "valid"]
    mapping = write_dataset(tmp_path / "shop", "parquet")
    assert main(["validate", "--mapping", str(mapping), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["judged_queries"] == 3
    # a judgment of a product the products table does not list: stale, not refused
    (tmp_path / "wands" / "label.csv").write_text(
        (tmp_path / "wands" / "label.csv").read_text() + "5\t2\t99\tExact\n")
    assert main(["validate", "--dataset", str(folder), "--format", "json"]) == 0
    stale = json.loads(capsys.readouterr().out)["stale"]
    assert stale["judgments"] == [{"query_id": "2", "doc_id": "99", "reason": "resource-removed"}]

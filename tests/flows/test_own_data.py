"""`searcheval run` on a team's own data, end to end: a WANDS-layout folder and a table mapping,
with the grade map, the conventions and the judged-share floor as flags, and refusals of bad
rows before anything is written (exit 2, one line naming file, line and column)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from searcheval import store
from searcheval.cli import main
from searcheval.store import database

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_mapped import write_dataset  # noqa: E402  (the unit tests' sample writers)
from test_wands import LABELS, write_sample  # noqa: E402

pytestmark = pytest.mark.slow


def runs(url: str) -> int:
    with database.connect(url) as conn:
        return len(store.last_runs(conn, 1000))


def test_a_wands_folder_runs_with_its_query_classes_as_categories(flow_env, tmp_path, webhook):
    # without the label of (query 0, product 2), bm25's answer to "salon chair" (the armchair) is
    # unjudged: the judged share falls under the floor the flag sets
    folder = write_sample(tmp_path / "wands", labels=LABELS.replace("0\t0\t2\tPartial\n", ""))
    out = tmp_path / "out"
    code = main(["run", "--dataset", str(folder), "--configurations", "bm25", "--no-baseline",
                 "--output", str(out), "--grade-map", "Exact=2,Partial=1,Irrelevant=0",
                 "--relevance-level", "2", "--coverage-floor", "0.95"])
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    bm25 = metrics["configurations"]["bm25"]
    assert set(bm25["by_category"]) == {"Massage Chairs", "Slow Cookers", "unclassified"}
    c = metrics["conventions"]
    assert c["grade_map"] == {"Exact": 2, "Partial": 1, "Irrelevant": 0}
    assert c["grade_scale"] == [0, 2] and c["relevance_level"] == 2
    assert c["sources"]["grade_map"] == "run parameter grade_map"
    assert c["sources"]["coverage_floor"] == "run parameter coverage_floor"
    # 3 categories with one query each: noted, not refused
    assert metrics["validation"]["notes"] == [
        "3 of 3 categories have fewer than 3 queries (their means are noisy), e.g. "
        "'Massage Chairs', 'Slow Cookers', 'unclassified'"]
    coverage = metrics["coverage"]["bm25"]
    assert coverage["below_floor"] and coverage["floor"] == 0.95
    assert "0:2" in coverage["unjudged_examples"]
    (alert,) = [b for b in webhook.bodies if b["run_id"] == metrics["run_id"]]
    assert "under the floor 0.950 (run parameter coverage_floor)" in alert["text"]
    rows = (out / "per_query.csv").read_text(encoding="utf-8").split("\n")
    assert rows[0] == "configuration,query_id,category,metric,value,segments"
    assert any(r.startswith("bm25,1,Slow Cookers,") and r.endswith(",words:4+ digits:yes quoted:no")
               for r in rows)  # "slow cooker 7\u2028qt": four words, a digit


def test_a_mapping_runs_and_its_settings_are_the_conventions(flow_env, tmp_path):
    mapping = write_dataset(tmp_path / "shop", "csv")
    out = tmp_path / "out"
    assert main(["run", "--mapping", str(mapping), "--configurations", "bm25", "--no-baseline",
                 "--output", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["source"] == str(mapping)
    assert metrics["conventions"]["relevance_level"] == 2
    assert metrics["conventions"]["sources"]["relevance_level"] == f"dataset setting in {mapping}"
    assert metrics["queries"]["q1"]["persona"] == "a student"
    assert "| q1 | oak \"writing desk\" | furniture | words:3 digits:no quoted:yes | a desk to " \
           "write at | a student |" in (out / "report.md").read_text(encoding="utf-8")


def test_bad_rows_and_bad_flags_are_refused_before_anything_is_written(flow_env, tmp_path,
                                                                       capsys):
    folder = write_sample(tmp_path / "wands", labels=LABELS + "5\t2\t1\tMaybe\n")
    before = runs(flow_env)
    code = main(["run", "--dataset", str(folder), "--no-baseline", "--output",
                 str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == (f"searcheval: {folder / 'label.csv'}:7 field 'label': label 'Maybe' is not "
                       "in the grade map (Exact=3, Partial=1, Irrelevant=0)")
    good = write_sample(tmp_path / "good")
    code = main(["run", "--dataset", str(good), "--no-baseline", "--relevance-level", "4",
                 "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == ("searcheval: --relevance-level: the relevance level 4 (run parameter "
                       "relevance_level) is above the top of the grade scale 0..3: no judgment "
                       "could be relevant")
    with pytest.raises(SystemExit) as stop:
        main(["run", "--dataset", str(good), "--grade-scale", "3"])
    assert stop.value.code == 2
    assert capsys.readouterr().err == ("searcheval: argument --grade-scale: expected LO,HI whole "
                                       "grades, e.g. 0,3; got '3'\n")
    assert runs(flow_env) == before
    assert not (tmp_path / "out").exists()

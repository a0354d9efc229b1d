"""Judgments in the embedded Postgres: seeding from the dataset's file, imports and re-judgments
through the CLI, export of effective grades and of every row, and pools from a run's TREC files."""

from __future__ import annotations

import csv
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from searcheval import store
from searcheval.cli import main
from searcheval.io.fixtures import load_fixtures
from searcheval.judging.judgments import parse_rule
from searcheval.judging.source import preview_judgments, seed_collection_judgments
from searcheval.store import judgments as jstore

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fixtures_dir(tmp_path) -> Path:
    """A private copy of the fixtures (a test may edit its judgments); its catalog is `fixtures`."""
    target = tmp_path / "fixtures"
    target.mkdir()
    for name in ("catalog.json", "golden_queries.json", "judgments.csv"):
        (target / name).write_bytes((ROOT / "fixtures" / name).read_bytes())
    return target


def cli(url: str, *args: str) -> int:
    return main([*args, "--database-url", url])


def live_rows(conn, catalog="fixtures"):
    return jstore.load_judgment_rows(conn, catalog)


def test_the_dataset_file_seeds_once_and_stays_the_truth_for_its_rows(conn, fixtures_dir):
    collection = load_fixtures(fixtures_dir)
    first = seed_collection_judgments(conn, collection)
    again = seed_collection_judgments(conn, collection)
    assert first["upserted"] == 270 and again == {"upserted": 0, "retracted": 0}
    assert jstore.count_judgments(conn, "fixtures") == 270
    # edit one grade in the file: the old seed row is retracted (kept), the new one added
    lines = (fixtures_dir / "judgments.csv").read_text().splitlines()
    assert lines[1].startswith("q01,weather-forecast,0,")
    lines[1] = lines[1].replace("q01,weather-forecast,0,", "q01,weather-forecast,2,")
    (fixtures_dir / "judgments.csv").write_text("\n".join(lines) + "\n")
    edited = seed_collection_judgments(conn, load_fixtures(fixtures_dir))
    assert edited == {"upserted": 1, "retracted": 1}
    everything = jstore.load_judgment_rows(conn, "fixtures", include_retracted=True)
    pair = [r for r in everything if (r.query_id, r.doc_id) == ("q01", "weather-forecast")]
    assert sorted((r.grade, r.retracted_at is not None) for r in pair) == [(0, True), (2, False)]
    # the original file brings the original row back
    assert seed_collection_judgments(conn, collection) == {"upserted": 1, "retracted": 1}
    assert {r.grade for r in live_rows(conn) if (r.query_id, r.doc_id)
            == ("q01", "weather-forecast")} == {0}


def test_import_adds_rows_a_re_judgment_adds_another_and_export_follows_the_rule(
        conn, database_module_url, fixtures_dir, tmp_path, capsys):
    url = database_module_url
    seed_collection_judgments(conn, load_fixtures(fixtures_dir))
    (tmp_path / "bob.qrels").write_text("q01 0 email-validation 1\nq02 0 document-ocr 0\n")
    assert cli(url, "judgments", "import", str(tmp_path / "bob.qrels"), "--judge", "bob",
               "--fixtures", str(fixtures_dir)) == 0
    assert "2 new" in capsys.readouterr().out
    bob = [r for r in live_rows(conn) if r.judge == "bob"]
    assert [(r.query_id, r.doc_id, r.grade, r.source) for r in bob] == [
        ("q01", "email-validation", 1, "import"), ("q02", "document-ocr", 0, "import")]
    # a re-judgment by bob: a later row; nothing is overwritten
    (tmp_path / "bob2.csv").write_text("query_id,resource_id,grade,judged_at,judge,note\n"
                                       "q01,email-validation,2,2030-01-01T00:00:00Z,bob,second look\n")
    assert cli(url, "judgments", "import", str(tmp_path / "bob2.csv"), "--fixtures",
               str(fixtures_dir)) == 0
    bob = [r for r in live_rows(conn) if r.judge == "bob" and r.doc_id == "email-validation"]
    assert [r.grade for r in bob] == [1, 2] and bob[1].note == "second look"
    capsys.readouterr()
    # annotator-a gave q01/email-validation 3; bob's latest is 2: median of (3, 2) -> lower = 2
    original = {(r["query_id"], r["resource_id"]): int(r["grade"]) for r in
                csv.DictReader((fixtures_dir / "judgments.csv").read_text().splitlines())}
    assert original[("q01", "email-validation")] == 3
    assert cli(url, "judgments", "export", "--format", "trec", "--fixtures",
               str(fixtures_dir)) == 0
    exported = {tuple(line.split()[::2]): int(line.split()[3])
                for line in capsys.readouterr().out.splitlines()}
    assert exported[("q01", "email-validation")] == 2
    assert original[("q02", "document-ocr")] == 3
    assert exported[("q02", "document-ocr")] == 0  # median of (3, 0): the lower middle
    assert len(exported) == 270
    assert cli(url, "judgments", "export", "--format", "trec", "--rule", "judge:annotator-a",
               "--fixtures", str(fixtures_dir)) == 0
    assert {tuple(line.split()[::2]): int(line.split()[3])
            for line in capsys.readouterr().out.splitlines()} == original
    # every row, as jsonl: the fixture's 270 and bob's three
    assert cli(url, "judgments", "export", "--all", "--format", "jsonl", "--fixtures",
               str(fixtures_dir)) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 270 + 3 and sum(r["judge"] == "bob" for r in rows) == 3


def test_a_refused_import_writes_nothing_and_says_where(conn, database_module_url, fixtures_dir,
                                                        tmp_path, capsys):
    before = jstore.count_judgments(conn, "fixtures")
    path = tmp_path / "bad.qrels"
    path.write_text("q01 0 email-validation 2\nq01 0 email-validation 7\n")
    assert cli(database_module_url, "judgments", "import", str(path), "--judge", "eve",
               "--fixtures", str(fixtures_dir)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("searcheval: ") and f"{path}:2 field 'grade'" in err[-1]
    assert jstore.count_judgments(conn, "fixtures") == before
    assert cli(database_module_url, "judgments", "export", "--all", "--format", "trec",
               "--fixtures", str(fixtures_dir)) == 2
    assert "one grade per" in capsys.readouterr().err


def test_the_pool_reads_the_runs_trec_files_and_is_kept_as_a_queue(conn, database_module_url,
                                                                   fixtures_dir, tmp_path, capsys):
    collection = load_fixtures(fixtures_dir)
    seed_collection_judgments(conn, collection)
    # a run in the history and its output folder: two configurations' TREC files
    run_id = "20261201T000000Z-pool01"
    store.save_evaluation(conn, {"run_id": run_id, "started_at": datetime.now(timezone.utc)},
                          [], [])
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    (out / "metrics.json").write_text(json.dumps({"run_id": run_id}))
    # judged in the fixtures: every (query, resource) pair; so a pool needs documents they do not
    # judge: drop q03's judgments from the file (the seed retracts them)
    lines = (fixtures_dir / "judgments.csv").read_text().splitlines()
    kept = [line for line in lines if not line.startswith("q03,")]
    (fixtures_dir / "judgments.csv").write_text("\n".join(kept) + "\n")
    seed_collection_judgments(conn, load_fixtures(fixtures_dir))
    (out / "runs" / "bm25.trec").write_text(
        "q03 Q0 code-sandbox 1 9.0 bm25\nq03 Q0 sql-injection-scanner 2 8.0 bm25\n"
        "q01 Q0 email-validation 1 5.0 bm25\n")
    (out / "runs" / "dense.trec").write_text(
        "q03 Q0 sql-injection-scanner 1 0.9 dense\nq03 Q0 geocoding 2 0.5 dense\n")
    target = tmp_path / "pool.csv"
    assert main(["judgments", "pool", "--run", "latest", "--run-output", str(out), "--depth", "10",
                 "--file", str(target), "--save", "--overlap", "0.5", "--judges", "ann,bob",
                 "--fixtures", str(fixtures_dir), "--database-url", database_module_url]) == 0
    rows = list(csv.DictReader(target.read_text().splitlines()))
    # rank 1: sql-injection-scanner (dense, and rank 2 of bm25: two configurations) before
    # code-sandbox (bm25 only); rank 2: geocoding. q01's email-validation is judged.
    assert [r["doc_id"] for r in rows] == ["sql-injection-scanner", "code-sandbox", "geocoding"]
    assert rows[0]["query"] == "SQL Injection Scanner" and rows[0]["category"] == "exact-name"
    assert "bm25" not in target.read_text() and "dense" not in target.read_text()
    pool, items = jstore.load_pool(conn, "latest")
    assert pool["run_id"] == run_id and pool["configurations"] == ["bm25", "dense"]
    assert [i["doc_id"] for i in items] == [r["doc_id"] for r in rows]
    assert sum(i["judges_needed"] == 2 for i in items) == round(0.5 * 3)
    assert "3 unjudged pair(s)" in capsys.readouterr().err
    # --configurations: only bm25's list
    assert main(["judgments", "pool", "--run", run_id, "--run-output", str(out),
                 "--configurations", "bm25", "--format", "jsonl", "--fixtures", str(fixtures_dir),
                 "--database-url", database_module_url]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["doc_id"] for r in lines] == ["code-sandbox", "sql-injection-scanner"]
    # a run that is not in the history, and an output folder of another run
    assert main(["judgments", "pool", "--run", "nope", "--run-output", str(out), "--fixtures",
                 str(fixtures_dir), "--database-url", database_module_url]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    (out / "metrics.json").write_text(json.dumps({"run_id": "another"}))
    assert main(["judgments", "pool", "--run", run_id, "--run-output", str(out), "--fixtures",
                 str(fixtures_dir), "--database-url", database_module_url]) == 2
    assert "its metrics.json is of run another" in capsys.readouterr().err


def test_preview_sees_what_the_seed_will_write_without_writing(conn, fixtures_dir):
    collection = load_fixtures(fixtures_dir)
    seed_collection_judgments(conn, collection)
    before = jstore.count_judgments(conn, "fixtures")
    lines = (fixtures_dir / "judgments.csv").read_text().splitlines()
    (fixtures_dir / "judgments.csv").write_text("\n".join(lines[:-1]) + "\n")  # one row less
    edited = load_fixtures(fixtures_dir)
    effective_collection, effective = preview_judgments(conn, edited, parse_rule("median"),
                                                        max_age_days=None)
    # bob's imported pairs are pairs of the file too: one effective grade per pair of the file
    assert len(effective_collection.judgments) == len(edited.judgments) == 269
    assert jstore.count_judgments(conn, "fixtures") == before  # nothing written
    assert "judgments_effective" in effective_collection.digests

"""Output-folder retention (issue 29, item 9): the run folders searcheval wrote in `output` are
deleted past `output_retention`, judged by their marker; the latest run and everything searcheval
did not write are never touched."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from searcheval.errors import InputError
from searcheval.evaluation.preflight import RunRequest, check_numbers
from searcheval.evaluation.report import EvaluationResult, write_outputs
from searcheval.evaluation.retention import MARKER, prune_outputs, run_started
from searcheval.types import RankedRun

NOW = datetime(2026, 12, 5, 3, 0, tzinfo=timezone.utc)


def run_at(out, days_ago: float, suffix: str):
    started = NOW - timedelta(days=days_ago)
    run_id = f"{started:%Y%m%dT%H%M%SZ}-{suffix}"
    result = EvaluationResult(run_id=run_id, started_at=started, finished_at=started,
                              source="test", input_hashes={}, model="m", scores={}, gate=None)
    write_outputs(result, {"bm25": RankedRun("bm25", {"q1": [("a", 1.0)]})}, out)
    return run_id


def test_the_run_folders_past_their_age_go_and_nothing_else(tmp_path):
    out = tmp_path / "out"
    old = run_at(out, 120, "00000a")
    recent = run_at(out, 10, "00000b")
    # a user's things beside them: a folder, a file, a folder named like a run without the
    # marker nor a metrics.json of that run, and a marker that names another run
    (out / "notes").mkdir()
    (out / "notes" / "keep.txt").write_text("mine")
    (out / "README.txt").write_text("mine")
    lookalike = out / "20200101T000000Z-abcdef"
    lookalike.mkdir()
    (lookalike / "metrics.json").write_text(json.dumps({"run_id": "someone-else"}))
    copied = out / "copied"
    copied.mkdir()
    (copied / MARKER).write_text((out / old / MARKER).read_text())  # names run `old`, not `copied`
    latest_old = run_at(out, 200, "00000c")  # the newest folder written: `latest` points here

    gone = prune_outputs(out, timedelta(days=90), now=NOW)
    assert gone["removed"] == [old]  # 120 days > 90; the 200-day one is `latest`
    assert gone["kept"] == 2  # recent (10 days) and latest
    assert not (out / old).exists()
    for kept in (recent, latest_old, "notes", "README.txt", lookalike.name, "copied"):
        assert (out / kept).exists(), kept
    assert (out / "metrics.json").read_text()  # the links through latest still resolve


def test_a_run_folder_of_a_version_before_the_marker_is_recognised_by_its_metrics(tmp_path):
    out = tmp_path / "out"
    old = run_at(out, 100, "00000d")
    (out / old / MARKER).unlink()  # as written before the marker existed
    run_at(out, 1, "00000e")
    assert run_started(out / old) == NOW - timedelta(days=100)
    assert prune_outputs(out, timedelta(days=90), now=NOW)["removed"] == [old]


def test_no_output_folder_prunes_nothing(tmp_path):
    assert prune_outputs(tmp_path / "missing", timedelta(days=1))["removed"] == []


def test_a_bad_retention_is_refused_naming_the_option():
    [problem] = check_numbers(RunRequest(output_retention="ninety"))
    assert isinstance(problem, InputError) and problem.field == "output_retention"
    assert check_numbers(RunRequest(output_retention="30d")) == []
    assert RunRequest().output_retention == "90d"  # the default, beside snapshot_retention's


@pytest.mark.slow
def test_history_prune_with_an_output_folder_prunes_both(new_database, tmp_path, capsys):
    from searcheval.cli import main
    from searcheval.store import database

    url = new_database("output_retention")
    with database.connect(url) as conn:
        database.migrate(conn)
    out = tmp_path / "out"
    old = run_at(out, 400, "00000f")  # started 400 days before NOW, so before any `now`
    run_at(out, -1, "000010")  # tomorrow's (as NOW goes): latest, kept whatever the date
    assert main(["history", "prune", "--older-than", "90d", "--output-folder", str(out),
                 "--database-url", url]) == 0
    printed = capsys.readouterr().out
    assert "removed 1 run folder(s) of" in printed and "kept 1" in printed
    assert not (out / old).exists()

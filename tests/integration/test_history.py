"""`searcheval history` and `searcheval baseline update` on a real history in Postgres."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from searcheval.cli import main
from searcheval.evaluation.baseline import load_baseline
from searcheval.evaluation.pipeline import publish_history
from searcheval.evaluation.report import EvaluationResult, write_outputs
from searcheval.metrics.scoring import score_run
from searcheval.store import database
from searcheval.types import Query, RankedRun

pytestmark = pytest.mark.slow
QUERIES = [Query("q1", "a", "exact-name"), Query("q2", "b", "paraphrase")]
QRELS = {"q1": {"a": 3}, "q2": {"b": 3}}


def result_with(run_id: str, started: datetime, rank_of_b: int) -> tuple[EvaluationResult, dict]:
    """fused finds a first for q1 and b at `rank_of_b` for q2: MRR = (1 + 1/rank_of_b) / 2."""
    q2 = [(f"x{i}", 10.0 - i) for i in range(rank_of_b - 1)] + [("b", 1.0)]
    run = RankedRun("fused", {"q1": [("a", 1.0)], "q2": q2}, {"q1": 1.0, "q2": 2.0})
    scores = {"fused": score_run(run, QRELS, QUERIES, ("ndcg@10", "mrr", "recall@20"))}
    result = EvaluationResult(run_id=run_id, started_at=started, finished_at=started,
                              source="test", input_hashes={}, model="m", scores=scores, gate=None)
    return result, {"fused": run}


@pytest.fixture(scope="module")
def history_url(new_database):
    url = new_database("history")
    t0 = datetime(2026, 12, 1, 3, 0, tzinfo=timezone.utc)
    with database.open_database(url) as conn:
        for i, rank in enumerate((1, 2, 4)):
            publish_history(conn, result_with(f"run-{i}", t0 + timedelta(days=i), rank)[0])
    return url


def test_history_prints_runs_oldest_first_and_draws_a_chart(history_url, tmp_path, capsys):
    assert main(["history", "--last", "2", "--output", str(tmp_path), "--database-url",
                 history_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ["run-1", "run-2"]
    # run, started (date, time), dataset, configuration (each run's served one), nDCG@10, MRR
    assert [line.split()[4] for line in lines[1:3]] == ["fused", "fused"]
    mrr_column = [line.split()[6] for line in lines[1:3]]
    assert mrr_column == [f"{(1 + 1 / 2) / 2:.3f}", f"{(1 + 1 / 4) / 2:.3f}"]
    png = tmp_path / "history.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_baseline_update_from_a_run_prints_the_diff_and_writes(history_url, tmp_path, capsys):
    baseline = tmp_path / "baseline.json"
    assert main(["baseline", "update", "--from-run", "run-1", "--baseline", str(baseline),
                 "--database-url", history_url]) == 0
    first = load_baseline(baseline)
    assert first.metrics["mrr"] == pytest.approx((1 + 1 / 2) / 2)
    assert first.per_query["q2"]["mrr"] == pytest.approx(1 / 2)
    capsys.readouterr()
    assert main(["baseline", "update", "--from-run", "run-2", "--baseline", str(baseline),
                 "--database-url", history_url, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"~ mrr: {(1 + 1 / 2) / 2:.4f} -> {(1 + 1 / 4) / 2:.4f}" in out
    assert load_baseline(baseline).from_run == "run-1"  # a dry run writes nothing
    assert "without --accept-regression the update would be refused" in out


def test_baseline_update_refuses_a_regression_unless_accepted_and_records_why(history_url,
                                                                              tmp_path, capsys):
    from searcheval.store import snapshots

    baseline = tmp_path / "baseline.json"
    assert main(["baseline", "update", "--from-run", "run-1", "--baseline", str(baseline),
                 "--database-url", history_url, "--reason", "first review"]) == 0
    capsys.readouterr()
    # run-2 is worse than run-1 by more than the tolerance (MRR 0.75 -> 0.625)
    assert main(["baseline", "update", "--from-run", "run-2", "--baseline", str(baseline),
                 "--database-url", history_url]) == 2
    captured = capsys.readouterr()
    assert f"~ mrr: {(1 + 1 / 2) / 2:.4f} -> {(1 + 1 / 4) / 2:.4f}" in captured.out  # the diff
    assert captured.err.strip().splitlines()[-1].startswith(
        "searcheval: --accept-regression: run run-2 is not made the baseline")
    assert load_baseline(baseline).from_run == "run-1"
    assert main(["baseline", "update", "--from-run", "run-2", "--baseline", str(baseline),
                 "--database-url", history_url, "--accept-regression", "q2 moved on purpose",
                 "--who", "reviewer"]) == 0
    new = load_baseline(baseline)
    assert (new.from_run, new.accepted_regression, new.created_by) == \
        ("run-2", "q2 moved on purpose", "reviewer")
    assert new.metrics["mrr"] == (1 + 1 / 4) / 2  # unrounded
    with database.connect(history_url) as conn:
        updates = snapshots.baseline_updates(conn)
    assert [(u["from_run"], u["reason"], u["accepted_regression"]) for u in updates][-2:] == \
        [("run-1", "first review", False), ("run-2", "q2 moved on purpose", True)]


def test_baseline_update_from_an_output_folder(tmp_path, capsys):
    result, runs = result_with("run-x", datetime(2026, 12, 2, tzinfo=timezone.utc), 2)
    write_outputs(result, runs, tmp_path / "out")
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"configuration": "fused", "metrics": {"mrr": 0.7},
                                    "tolerance": 0.05, "floors": {"mrr": 0.5}}))
    assert main(["baseline", "update", "--from-output", str(tmp_path / "out"), "--baseline",
                 str(baseline)]) == 0
    new = load_baseline(baseline)
    assert new.from_run == "run-x"
    assert new.metrics["mrr"] == pytest.approx((1 + 1 / 2) / 2)
    assert (new.tolerance, new.floors) == (0.05, {"mrr": 0.5})  # carried over


def test_baseline_update_of_an_unknown_run_exits_2(history_url, tmp_path, capsys):
    code = main(["baseline", "update", "--from-run", "nope", "--baseline",
                 str(tmp_path / "b.json"), "--database-url", history_url])
    assert code == 2
    assert "no run 'nope' in the history" in capsys.readouterr().err
    assert not (tmp_path / "b.json").exists()

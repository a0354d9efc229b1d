"""A scheduled run's diff (and so its alert's worst queries) is against the previous SCHEDULED run
of the dataset, never a manual experiment run in between (issue 29, item 8); on the embedded
Postgres, through the same publish and diff calls the flow makes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from searcheval.evaluation.alerts import Alert
from searcheval.evaluation.diff import worst_lines
from searcheval.evaluation.pipeline import diff_with_previous, publish_history
from searcheval.evaluation.report import EvaluationResult, query_notes
from searcheval.metrics.scoring import score_run
from searcheval.store import database
from searcheval.types import Query, RankedRun

pytestmark = pytest.mark.slow

QUERIES = [Query("q1", "weather api", "exact-name"), Query("q2", "send an sms", "paraphrase")]
QRELS = {"q1": {"a": 3}, "q2": {"c": 2}}
T0 = datetime(2026, 12, 1, 3, 0, tzinfo=timezone.utc)


def fused(q1: list[str], q2: list[str]) -> RankedRun:
    def scored(docs):
        return [(d, 1.0 / (i + 1)) for i, d in enumerate(docs)]

    return RankedRun("fused", {"q1": scored(q1), "q2": scored(q2)}, {"q1": 1.0, "q2": 1.0})


def publish(conn, run_id: str, started: datetime, kind: str, run: RankedRun,
            dataset: str = "toy") -> EvaluationResult:
    scores = {"fused": score_run(run, QRELS, QUERIES, ("ndcg@10", "mrr", "recall@20"))}
    result = EvaluationResult(run_id=run_id, started_at=started, finished_at=started,
                              source="test", input_hashes={}, model="m", scores=scores,
                              gate=None, queries=query_notes(QUERIES), dataset=dataset,
                              kind=kind, snapshot_depth=3)
    publish_history(conn, result, {"fused": run}, QRELS)
    diff_with_previous(conn, result)
    return result


@pytest.fixture(scope="module")
def history(new_database):
    """nightly-1 finds both relevant documents first; an experiment (manual) an hour later loses
    both; nightly-2 the next night loses q1's only (a at rank 2); manual-2 after it."""
    url = new_database("nightly_previous")
    with database.open_database(url) as conn:
        runs = {
            "nightly-1": publish(conn, "nightly-1", T0, "nightly", fused(["a", "x"], ["c", "y"])),
            "experiment": publish(conn, "experiment", T0 + timedelta(hours=1), "manual",
                                  fused(["x", "y"], ["y", "z"])),
            "other-dataset": publish(conn, "other-dataset", T0 + timedelta(hours=2), "nightly",
                                     fused(["x", "y"], ["y", "z"]), dataset="other"),
            "nightly-2": publish(conn, "nightly-2", T0 + timedelta(days=1), "nightly",
                                 fused(["x", "a"], ["c", "y"])),
            "manual-2": publish(conn, "manual-2", T0 + timedelta(days=1, hours=1), "manual",
                                fused(["x", "a"], ["c", "y"])),
        }
    return runs


def test_the_nightly_diffs_against_the_previous_nightly_not_the_experiment_between(history):
    diff = history["nightly-2"].diff
    assert diff["a"]["run_id"] == "nightly-1"  # the experiment (started later) is skipped
    assert diff["a"]["asked"] == "previous nightly"
    # against nightly-1: q1 drops from a at 1 (nDCG 1) to a at 2 (1 / log2(3) = 0.631); q2 same.
    # Against the experiment it would have been q1 and q2 both better (0 -> 0.631, 0 -> 1).
    assert diff["headline"] == "1 worse, 0 better, 1 unchanged of 2"
    [q1] = diff["worst"]
    assert q1["query_id"] == "q1" and q1["delta"] == pytest.approx(1 / 1.5849625 - 1, abs=1e-6)
    alert = Alert(run_id="nightly-2", reasons=[], worst=worst_lines(diff))
    assert alert.worst == ['q1 "weather api": ndcg@10 1.000 -> 0.631 (-0.369)']


def test_a_manual_run_diffs_against_the_run_just_before_it_whatever_its_kind(history):
    assert history["experiment"].diff["a"]["run_id"] == "nightly-1"
    assert history["manual-2"].diff["a"]["run_id"] == "nightly-2"
    assert history["manual-2"].diff["a"]["asked"] == "previous"
    assert history["nightly-1"].diff is None  # the dataset's first run: nothing to diff
    assert history["other-dataset"].diff is None  # another dataset's runs never count

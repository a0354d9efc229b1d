"""Snapshots: ranked lists in Postgres (COPY), run folders with `latest`, full-precision TREC files,
diffs of two snapshots and pruning, on the embedded Postgres."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import pytrec_eval

from searcheval.cli import main
from searcheval.evaluation.diff import DiffRequest, diff_markdown, diff_runs
from searcheval.evaluation.pipeline import publish_history
from searcheval.evaluation.report import EvaluationResult, query_notes, write_outputs
from searcheval.io.trec import load_trec_run, write_trec_run
from searcheval.metrics.engine import Settings, evaluate
from searcheval.metrics.scoring import score_run
from searcheval.store import database, snapshots
from searcheval.types import Query, RankedRun

QUERIES = [Query("q1", "weather api", "exact-name"), Query("q2", "send an sms", "paraphrase"),
           Query("q3", "nothing like it", "no-result")]
QRELS = {"q1": {"a": 3, "b": 1}, "q2": {"c": 2}, "q3": {}}
METRICS = ("ndcg@10", "mrr", "recall@20")
T0 = datetime(2026, 12, 1, 3, 0, tzinfo=timezone.utc)


def fused(q1: list[str], q2: list[str], q3: list[str]) -> RankedRun:
    def scored(docs):
        return [(d, 1.0 / (i + 1)) for i, d in enumerate(docs)]

    return RankedRun("fused", {"q1": scored(q1), "q2": scored(q2), "q3": scored(q3)},
                     {"q1": 1.0, "q2": 1.0, "q3": 1.0})


def result_of(run_id: str, started: datetime, run: RankedRun, dataset: str = "toy"):
    scores = {"fused": score_run(run, QRELS, QUERIES, METRICS)}
    return EvaluationResult(run_id=run_id, started_at=started, finished_at=started, source="test",
                            input_hashes={}, model="m", scores=scores, gate=None,
                            queries=query_notes(QUERIES), dataset=dataset, kind="manual",
                            snapshot_depth=3)


@pytest.fixture(scope="module")
def two_runs(new_database):
    """run-a: q1 finds a first, q2 finds c at 2, q3 abstains. run-b: q1 finds a at 3, q2 finds c
    first, q3 returns junk (no longer abstains)."""
    url = new_database("snapshots")
    a = fused(["a", "x", "y", "z"], ["x", "c"], [])
    b = fused(["x", "y", "a"], ["c"], ["junk"])
    with database.open_database(url) as conn:
        ra = result_of("run-a", T0, a)
        rows_a = publish_history(conn, ra, {"fused": a}, QRELS)
        rb = result_of("run-b", T0 + timedelta(days=1), b)
        rows_b = publish_history(conn, rb, {"fused": b}, QRELS)
    return url, (rows_a, rows_b)


def test_the_ranked_lists_are_stored_to_the_depth_with_their_grades(two_runs):
    url, (rows_a, rows_b) = two_runs
    assert rows_a == 3 + 2 + 0  # q1 cut at depth 3 of its 4 results
    assert rows_b == 3 + 1 + 1
    with database.connect(url) as conn:
        lists = snapshots.load_ranked_results(conn, "run-a", "fused")
        assert lists["q1"] == [("a", 1.0, 3), ("x", 1 / 2, None), ("y", 1 / 3, None)]
        assert lists["q2"] == [("x", 1.0, None), ("c", 1 / 2, 2)]
        assert "q3" not in lists
        row = snapshots.load_run(conn, "run-b")
        assert (row["dataset"], row["kind"], row["snapshot_depth"]) == ("toy", "manual", 3)


def test_diff_of_previous_and_latest_names_what_changed_and_why(two_runs):
    url, _ = two_runs
    with database.connect(url) as conn:
        diff = diff_runs(conn, DiffRequest("previous", "latest"))
    assert diff["a"]["run_id"] == "run-a" and diff["b"]["run_id"] == "run-b"
    # nDCG@10 with gain 2^g - 1: q1 a (3) at 1 -> a at 3; q2 c at 2 -> c at 1; q3 (nothing
    # relevant, policy one) stays 1
    ideal_q1 = (2**3 - 1) / 1 + (2**1 - 1) / math.log2(3)
    q1_before = (2**3 - 1) / ideal_q1
    q1_after = (2**3 - 1) / 2 / ideal_q1
    assert diff["headline"] == "1 worse, 1 better, 1 unchanged of 3"
    assert [q["query_id"] for q in diff["queries"]] == ["q1", "q3", "q2"]  # by delta
    q1 = diff["queries"][0]
    assert q1["text"] == "weather api" and q1["category"] == "exact-name"
    assert q1["metrics"]["ndcg@10"]["before"] == pytest.approx(q1_before)
    assert q1["metrics"]["ndcg@10"]["delta"] == pytest.approx(q1_after - q1_before)
    assert q1["metrics"]["mrr"]["after"] == pytest.approx(1 / 3)
    assert q1["first_relevant"] == {"a": 1, "b": 3}
    assert q1["left"] == [] and q1["entered"] == []  # the same three documents (depth 3)
    assert [(e["doc_id"], e["grade"]) for e in q1["b"]] == [("x", None), ("y", None), ("a", 3)]
    q3 = next(q for q in diff["queries"] if q["query_id"] == "q3")
    assert q3["abstained"] == {"a": True, "b": False}
    assert q3["entered"] == ["junk"]
    q2 = next(q for q in diff["queries"] if q["query_id"] == "q2")
    assert q2["left"] == ["x"] and q2["status"] == "better"
    assert [q["query_id"] for q in diff["worst"]] == ["q1"]
    text = diff_markdown(diff)
    assert "**1 worse, 1 better, 1 unchanged of 3**" in text
    assert "| 3 | y (unjudged) | a (grade 3) |" in text
    assert "abstained: A returned nothing" in text


def test_diff_cli_prints_json_and_refuses_an_unknown_run(two_runs, capsys):
    url, _ = two_runs
    assert main(["diff", "run-a", "run-b:fused", "--format", "json", "--database-url", url]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["counts"] == {"worse": 1, "better": 1, "unchanged": 1, "not compared": 0,
                             "failed": 0}
    assert main(["diff", "run-a", "nope", "--database-url", url]) == 2
    assert capsys.readouterr().err.strip() == "searcheval: B: no run 'nope' in the history"


def test_prune_removes_old_snapshots_and_keeps_the_metrics(new_database, capsys):
    url = new_database("prune")
    run = fused(["a"], ["c"], [])
    with database.open_database(url) as conn:
        publish_history(conn, result_of("old", T0 - timedelta(days=100), run), {"fused": run},
                        QRELS)
        publish_history(conn, result_of("new", T0, run), {"fused": run}, QRELS)
    assert main(["history", "prune", "--older-than", "90d", "--database-url", url]) == 0
    assert "removed 2 snapshot rows of 1 run" in capsys.readouterr().out  # q1: a, q2: c
    with database.connect(url) as conn:
        assert snapshots.count_ranked_results(conn, "old") == 0
        assert snapshots.count_ranked_results(conn, "new") == 2
        from searcheval import store

        assert {r["metric"] for r in store.run_metrics(conn, "old")} >= set(METRICS)
        assert snapshots.load_run(conn, "old")["snapshot_pruned_at"] is not None
    assert main(["history", "prune", "--older-than", "ninety", "--database-url", url]) == 2
    capsys.readouterr()
    # a diff against a pruned run still compares the metrics, and does not claim abstention
    with database.connect(url) as conn:
        diff = diff_runs(conn, DiffRequest("old", "new"))
    assert diff["headline"] == "0 worse, 0 better, 3 unchanged of 3"
    assert all(q["abstained"]["a"] is None and q["a"] == [] for q in diff["queries"])
    assert diff["notes"][0].startswith("A (old:fused) has no stored ranked lists (pruned")


def test_each_run_writes_its_own_folder_and_latest_points_at_the_newest(tmp_path):
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)  # an output folder written before run folders existed
    (out / "runs" / "fused.trec").write_text("old\n")
    (out / "metrics.json").write_text("{}")
    first = fused(["a"], ["c"], [])
    second = fused(["x", "a"], ["c"], [])
    write_outputs(result_of("run-1", T0, first), {"fused": first}, out)
    write_outputs(result_of("run-2", T0, second), {"fused": second}, out)
    assert json.loads((out / "run-1" / "metrics.json").read_text())["run_id"] == "run-1"
    assert json.loads((out / "metrics.json").read_text())["run_id"] == "run-2"
    assert (out / "latest").resolve() == (out / "run-2").resolve()
    assert (out / "runs" / "fused.trec").read_text() == (out / "run-2" / "runs" / "fused.trec").read_text()
    assert (out / "run-1" / "runs" / "fused.trec").read_text().startswith("q1 Q0 a 1 1.0 fused")
    assert (out / "metrics.json").is_symlink() and (out / "runs").is_symlink()
    assert sorted(p.name for p in out.iterdir()) == ["latest", "metrics.json", "per_query.csv",
                                                      "report.md", "run-1", "run-2", "runs"]


SHARED_TOOLS = Path(__file__).resolve().parents[2] / ".." / "shared" / "tools" / "trec_eval"


@pytest.fixture(scope="module")
def trec_eval_binary(tmp_path_factory) -> Path:
    """NIST trec_eval built from ../shared/tools in a temporary folder (the source is read-only)."""
    build = tmp_path_factory.mktemp("trec_eval") / "trec_eval"
    shutil.copytree(SHARED_TOOLS, build)
    subprocess.run(["make", "-C", str(build)], check=True, capture_output=True)
    return build / "trec_eval"


def write_qrels(qrels: dict, path: Path) -> Path:
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items()
                            for d, g in docs.items()))
    return path


def trec_eval_per_query(binary: Path, qrels: Path, run: Path) -> dict:
    out = subprocess.run([str(binary), "-q", "-m", "ndcg_cut.10", "-m", "recip_rank", "-m", "map",
                          str(qrels), str(run)], check=True, capture_output=True, text=True).stdout
    values: dict = {}
    for line in out.splitlines():
        measure, qid, value = line.split()
        values.setdefault(qid, {})[measure] = float(value)
    return values


NEAR_TIES_QRELS = {"q1": {"a": 2, "c": 1}, "q2": {"m": 1}}


def near_ties(gap: float) -> RankedRun:
    """Scores `gap` apart, best first; the relevant documents come first, but their ids sort
    before the unjudged ones', so a tie would be broken (descending id) against them."""
    return RankedRun("fused", {
        "q1": [("a", 0.3 + gap), ("b", 0.3), ("c", 0.25), ("d", 0.2)],
        "q2": [("m", 1 / 3 + gap), ("n", 1 / 3), ("o", 1 / 3 - gap)]})


def test_a_trec_file_with_near_ties_rescored_by_trec_eval_gives_the_published_numbers(
        tmp_path, trec_eval_binary):
    """Scores 1e-11 apart, which 6 decimals cannot tell apart: trec_eval would tie them and order
    by document id (descending), putting the unjudged `b` first. Written at full precision, the
    file ranks as the run did (trec_eval prints 4 decimals)."""
    run = near_ties(1e-11)
    published = evaluate(NEAR_TIES_QRELS, run.as_run(), ["ndcg@10", "mrr", "map"],
                         Settings(trec_compat=True)).per_query()
    qrels = write_qrels(NEAR_TIES_QRELS, tmp_path / "qrels.txt")
    rescored = trec_eval_per_query(trec_eval_binary, qrels, write_trec_run(run, tmp_path / "f.trec"))
    for qid in NEAR_TIES_QRELS:
        assert rescored[qid]["ndcg_cut_10"] == round(published[qid]["ndcg@10"], 4)
        assert rescored[qid]["recip_rank"] == round(published[qid]["mrr"], 4) == 1.0
        assert rescored[qid]["map"] == round(published[qid]["map"], 4)
    # the same run at 6 decimals is another ranking for trec_eval: the test above could fail
    rounded = tmp_path / "rounded.trec"
    rounded.write_text("".join(f"{q} Q0 {d} {i} {s:.6f} t\n" for q, docs in run.results.items()
                               for i, (d, s) in enumerate(docs, start=1)))
    worse = trec_eval_per_query(trec_eval_binary, qrels, rounded)
    assert worse["q1"]["recip_rank"] == 1 / 2 and worse["q2"]["recip_rank"] == round(1 / 3, 4)


def test_pytrec_eval_rescores_a_full_precision_file_exactly(tmp_path):
    """pytrec_eval keeps scores in single precision, so near-ties here are 4e-7 apart (6
    decimals still tie them); its values are full floats and must equal the published ones."""
    run = near_ties(4e-7)
    published = evaluate(NEAR_TIES_QRELS, run.as_run(), ["ndcg@10", "mrr", "map"],
                         Settings(trec_compat=True)).per_query()
    path = write_trec_run(run, tmp_path / "fused.trec")
    measures = {"ndcg_cut_10", "recip_rank", "map"}
    rescored = pytrec_eval.RelevanceEvaluator(NEAR_TIES_QRELS, measures).evaluate(
        load_trec_run(path))
    for qid in NEAR_TIES_QRELS:
        assert rescored[qid]["ndcg_cut_10"] == published[qid]["ndcg@10"]
        assert rescored[qid]["recip_rank"] == published[qid]["mrr"] == 1.0
        assert rescored[qid]["map"] == published[qid]["map"]
    rounded = {q: {d: round(s, 6) for d, s in docs.items()} for q, docs in run.as_run().items()}
    worse = pytrec_eval.RelevanceEvaluator(NEAR_TIES_QRELS, measures).evaluate(rounded)
    assert worse["q1"]["recip_rank"] == 1 / 2


def test_the_spread_of_per_query_differences_is_estimated_from_the_history(two_runs):
    from searcheval.evaluation.pipeline import history_spread

    url, _ = two_runs
    with database.connect(url) as conn:
        sd, source = history_spread(conn, "toy", "mrr")
        assert history_spread(conn, "unknown", "mrr") == (None, "")
    # one configuration, two runs: the differences run-b - run-a are q1 1/3 - 1, q2 1 - 1/2, q3 0
    d = [1 / 3 - 1, 1 - 1 / 2, 0.0]
    mean = sum(d) / 3
    assert sd == pytest.approx(math.sqrt(sum((x - mean) ** 2 for x in d) / 2))
    assert source == "the history of toy: 1 pairs of configurations and runs over the last 2 runs"


def test_benchmark_snapshots_runs_small_and_reports_both_goals(database_url):
    from searcheval.bench.snapshots import benchmark_snapshots

    lines: list[str] = []
    figures = benchmark_snapshots(database_url, queries=6, depth=4, repeat=1, say=lines.append)
    assert figures["rows"] == 6 * 3 * 4
    assert {"store_copy_s", "store_insert_s", "diff_s", "read_trec_s"} <= set(figures)
    assert lines[0] == "storing 72 ranked rows (6 queries x 3 configurations x depth 4), best of 1:"
    assert lines[-1].startswith("goals: storing < 1 s: ")
    assert main(["benchmark", "snapshots", "--queries", "0"]) == 2


def test_history_filters_and_columns_and_baseline_updates_on_the_chart(two_runs, tmp_path,
                                                                       capsys):
    from searcheval.evaluation.history import recent_runs

    url, _ = two_runs
    assert main(["history", "--dataset", "toy", "--output", str(tmp_path), "--database-url",
                 url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-6:] == ["gate", "source", "commit", "dirty", "label", "marks"]
    assert [line.split()[0] for line in lines[1:3]] == ["run-a", "run-b"]
    assert lines[1].split()[-4:] == ["manual", "-", "-", "-"]  # source, commit, dirty, label
    for flags in (["--dataset", "other"], ["--label", "v2"], ["--source", "nightly"]):
        assert main(["history", *flags, "--output", str(tmp_path), "--database-url", url]) == 0
        assert capsys.readouterr().out.strip() == "no run recorded yet"
    with database.connect(url) as conn:
        conn.execute("UPDATE eval_runs SET label = 'v2' WHERE run_id = 'run-b'")
        snapshots.record_baseline_update(conn, dataset="toy", configuration="fused",
                                         from_run="run-a", path="baseline.json", who="me",
                                         reason="why", accepted_regression=False)
        conn.execute("UPDATE baseline_updates SET updated_at = %(t)s",
                     {"t": T0 + timedelta(hours=12)})
    runs = recent_runs(10, "fused", url, dataset="toy")
    assert [r["label"] for r in runs] == [None, "v2"]
    assert [len(r["baseline_updates"]) for r in runs] == [0, 1]  # between run-a and run-b
    assert [r["run_id"] for r in recent_runs(10, "fused", url, label="v2")] == ["run-b"]
    assert main(["history", "--dataset", "toy", "--output", str(tmp_path), "--database-url",
                 url]) == 0
    assert (tmp_path / "history.png").read_bytes()[:4] == b"\x89PNG"

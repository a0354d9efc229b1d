"""`searcheval benchmark snapshots`: storing a run's ranked lists (SciFact's shape: 300 queries x 3
configurations x depth 100 = 90,000 rows) with binary COPY, against plain INSERTs of the same
rows, and `searcheval diff` of two such runs (read from Postgres, rendered as markdown), against
only reading the two runs' TREC files back, in a throwaway database.

Goals (issue 12): storing adds under 1 s to a run; the diff prints in under 2 s.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from searcheval.bench.common import rate, say, throwaway_database

GOAL_STORE_S = 1.0
GOAL_DIFF_S = 2.0
CONFIGURATIONS = ("bm25", "dense", "fused")
METRICS = ("ndcg@10", "mrr", "recall@20")


def synthetic_runs(queries: int, depth: int, docs: int, seed: int):
    """Runs of each configuration (distinct scores, best first) and judgments: each query has
    three relevant documents among `docs`."""
    from searcheval.types import RankedRun

    rng = np.random.default_rng(seed)
    qids = [f"q{i:04d}" for i in range(queries)]
    qrels = {q: {f"d{int(d):06d}": int(g) for d, g in zip(rng.choice(docs, 3, replace=False),
                                                           (3, 2, 1))} for q in qids}
    runs = {}
    for name in CONFIGURATIONS:
        results = {}
        for q in qids:
            ids = [f"d{int(d):06d}" for d in rng.choice(docs, depth, replace=False)]
            for rel in qrels[q]:  # each relevant document retrieved with probability 0.6
                if rel not in ids and rng.random() < 0.6:
                    ids[int(rng.integers(0, depth))] = rel
            scores = np.sort(rng.random(depth))[::-1]
            results[q] = [(d, float(s)) for d, s in zip(ids, scores)]
        runs[name] = RankedRun(name, results)
    return qids, qrels, runs


def _result(run_id: str, started: datetime, qids, qrels, runs):
    from searcheval.evaluation.report import EvaluationResult
    from searcheval.metrics.scoring import score_run
    from searcheval.types import Query

    queries = [Query(q, f"query text {q}") for q in qids]
    scores = {n: score_run(r, qrels, queries, METRICS) for n, r in runs.items()}
    return EvaluationResult(run_id=run_id, started_at=started, finished_at=started,
                            source="benchmark", input_hashes={}, model="-", scores=scores,
                            gate=None, dataset="benchmark", kind="manual",
                            queries={q.id: {"text": q.text, "category": q.category}
                                     for q in queries})


def benchmark_snapshots(database_url: str | None = None, *, queries: int = 300, depth: int = 100,
                        docs: int = 5183, repeat: int = 3, seed: int = 0,
                        say: Callable[[str], None] = say) -> dict:
    from searcheval import store
    from searcheval.evaluation.diff import DiffRequest, diff_markdown, diff_runs
    from searcheval.io.trec import load_trec_run, write_trec_run
    from searcheval.store import database, snapshots, sql

    url = database.resolve_url(database_url)
    qids, qrels, runs_a = synthetic_runs(queries, depth, docs, seed)
    _, _, runs_b = synthetic_runs(queries, depth, docs, seed + 1)
    rows = sum(min(len(d), depth) for r in runs_a.values() for d in r.results.values())
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    figures: dict = {"rows": rows}
    with throwaway_database(url, "snapbench") as bench_url, database.connect(bench_url) as conn:
        runs_made = 0

        def new_run(runs) -> str:
            nonlocal runs_made
            runs_made += 1
            result = _result(f"bench-{runs_made}", t0 + timedelta(minutes=runs_made), qids,
                             qrels, runs)
            store.save_evaluation(conn, result.run_row(), result.metric_rows(),
                                  result.query_rows(), result.segment_rows())
            return result.run_id

        def timed(fn) -> float:
            best = float("inf")
            for _ in range(repeat):
                run_id = new_run(runs_a)
                start = time.perf_counter()
                fn(run_id)
                best = min(best, time.perf_counter() - start)
            return best

        def copy_binary(run_id):
            with conn.transaction(), conn.cursor() as cur:
                snapshots.write_ranked_results(cur, run_id, runs_a, qrels, depth)

        def inserts(run_id):
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO eval_ranked_results (run_id, configuration, query_id, rank, "
                    "doc_id, score, grade) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    list(snapshots.ranked_rows(run_id, runs_a, qrels, depth)))

        figures["store_copy_s"] = timed(copy_binary)
        figures["store_insert_s"] = timed(inserts)
        say(f"storing {rows:,} ranked rows ({queries} queries x {len(CONFIGURATIONS)} "
            f"configurations x depth {depth}), best of {repeat}:")
        say(f"  searcheval (binary COPY)     {figures['store_copy_s']:8.3f} s  "
            f"{rate(rows, figures['store_copy_s']):>10,.0f} rows/s")
        say(f"  plain INSERTs (executemany)  {figures['store_insert_s']:8.3f} s  "
            f"{rate(rows, figures['store_insert_s']):>10,.0f} rows/s")

        # two complete runs (with snapshots) to diff
        a = new_run(runs_a)
        copy_binary(a)
        b = new_run(runs_b)
        with conn.transaction(), conn.cursor() as cur:
            snapshots.write_ranked_results(cur, b, runs_b, qrels, depth)
        conn.execute(sql.SET_RUN_IDENTITY, {"run_id": a, "dataset": "benchmark", "label": None,
                                            "kind": "manual", "snapshot_depth": depth})
        conn.execute(sql.SET_RUN_IDENTITY, {"run_id": b, "dataset": "benchmark", "label": None,
                                            "kind": "manual", "snapshot_depth": depth})
        best_diff, text = float("inf"), ""
        for _ in range(repeat):
            start = time.perf_counter()
            diff = diff_runs(conn, DiffRequest(f"{a}:fused", f"{b}:fused"))
            text = diff_markdown(diff)
            best_diff = min(best_diff, time.perf_counter() - start)
        figures["diff_s"] = best_diff
        with tempfile.TemporaryDirectory(prefix="se-snapbench-") as tmp:
            fa = write_trec_run(runs_a["fused"], Path(tmp) / "a.trec")
            fb = write_trec_run(runs_b["fused"], Path(tmp) / "b.trec")
            best_read = float("inf")
            for _ in range(repeat):
                start = time.perf_counter()
                load_trec_run(fa), load_trec_run(fb)
                best_read = min(best_read, time.perf_counter() - start)
        figures["read_trec_s"] = best_read
        say(f"diff of two runs ({queries} queries, fused, both top 10 lists, markdown of "
            f"{len(text):,} characters), best of {repeat}:")
        say(f"  searcheval diff (Postgres)   {figures['diff_s']:8.3f} s")
        say(f"  reading the two TREC files   {figures['read_trec_s']:8.3f} s  (no diff at all)")
        say(f"  headline: {diff['headline']}")
    figures["goal_met"] = figures["store_copy_s"] < GOAL_STORE_S and figures["diff_s"] < GOAL_DIFF_S
    say(f"goals: storing < {GOAL_STORE_S:g} s: {'met' if figures['store_copy_s'] < GOAL_STORE_S else 'MISSED'}; "
        f"diff < {GOAL_DIFF_S:g} s: {'met' if figures['diff_s'] < GOAL_DIFF_S else 'MISSED'}")
    return figures

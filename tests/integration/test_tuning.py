"""searcheval tune on the fixtures against real Postgres and the real model: trials stored with
their configuration's hash, cached lists reused, a study resumed after a stop, the grid, flagged
trials and their pool, and the held-out verdict."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from searcheval.bench.tune import CONFIGURATIONS  # the tuned project of the benchmark
from searcheval.io.collection import load_collection
from searcheval.store import tuning as tuning_store
from searcheval.tuning import study

ROOT = Path(__file__).resolve().parents[2]
SPACE = {"hybrid.weights.bm25": "0..2", "hybrid.weights.dense": "0..2",
         "hybrid.method": ["combsum", "rrf", "combmnz"]}


@pytest.fixture(scope="module")
def configurations(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("tune") / "configurations.yaml"
    path.write_text(CONFIGURATIONS)
    return str(path)


def request(configurations, **kw):
    args = dict(fixtures=str(ROOT / "fixtures"), configurations_file=configurations,
                params=dict(SPACE), trials=10, held_out=0.5, seed=1)
    return study.TuneRequest(**{**args, **kw})


def test_a_study_from_split_to_held_out_verdict(conn, configurations, tmp_path):
    prepared = study.check(request(configurations))
    study.prepare(prepared, conn)
    searched = prepared.objective.runner.searched  # bm25 and dense, once, before any trial
    assert searched == 2
    results = study.run_trials(prepared)
    assert prepared.objective.runner.searched == searched  # no trial searched again
    assert len(results) == 10
    rows = tuning_store.load_trials(conn, prepared.study_id)
    assert [r["number"] for r in rows] == list(range(10))
    for r, t in zip(rows, results):
        # the stored hash is the hash of the configuration the trial's overrides resolve to
        assert r["sha256"] == prepared.objective.configuration(t.overrides).sha256
        assert r["value"] == pytest.approx(t.value)
        lo, hi = r["bounds"]["ndcg@10"]
        assert lo <= t.value + 1e-12 and t.value <= hi + 1e-12
    out = tmp_path / "out"
    document = study.conclude(prepared, results, str(out))
    best = max(results, key=lambda t: (t.value, -t.number))
    assert document["chosen"]["number"] == best.number
    verdict = document["verdict"]
    # the verdict is on the held-out queries only, never the tuning ones
    assert verdict["queries"] == len(prepared.split.held_out)
    assert set(verdict["better_queries"] + verdict["worse_queries"]) <= set(
        prepared.split.held_out)
    assert verdict["outcome"] in ("better", "worse", "no detectable difference")
    assert verdict["served"] == "fused"
    top = verdict["top"]  # the tuning's top 3 distinct configurations on the held-out part
    assert top["family"] == 3 and top["trials"][0]["trial"] == best.number
    assert top["trials"][0]["delta"] == pytest.approx(verdict["delta"])
    assert all(r["p_holm"] >= r["p_value"] for r in top["trials"])
    stored = tuning_store.open_study(conn, prepared.study_id, target="x", served="x",
                                     metric="x", definition={}, split={})
    assert stored["verdict"]["chosen_trial"] == best.number and stored["finished_at"]
    text = (out / "configurations.tuned.yaml").read_text()
    assert "hybrid_tuned:" in text and "kind: fuse" in text
    assert "## Verdict (held-out" in (out / "report.md").read_text()
    assert json.loads((out / "tune.json").read_text())["study_id"] == prepared.study_id


def test_a_stopped_study_resumes_from_its_stored_trials(conn, configurations):
    first = study.check(request(configurations, trials=4, seed=7))
    study.prepare(first, conn)
    done = study.run_trials(first)
    assert len(done) == 4
    # the same command asking for 9 trials: the same study, 4 trials found, 5 more run
    again = study.check(request(configurations, trials=9, seed=7))
    assert again.study_id == first.study_id
    study.prepare(again, conn)
    assert again.split == first.split
    results = study.run_trials(again)
    assert [t.number for t in results] == list(range(9))
    assert [t.overrides for t in results[:4]] == [t.overrides for t in done]
    assert len(tuning_store.load_trials(conn, first.study_id)) == 9


def test_grid_runs_each_point_once(conn, configurations):
    prepared = study.check(request(configurations, sampler="grid", trials=50, params={
        "hybrid.method": ["combsum", "combmnz", "rrf"],
        "hybrid.normalisation": ["min-max", "z-score"]}))
    study.prepare(prepared, conn)
    results = study.run_trials(prepared)
    points = {(t.overrides["hybrid.method"], t.overrides["hybrid.normalisation"])
              for t in results}
    assert len(results) == 3 * 2 and len(points) == 6


def test_a_trial_with_unjudged_results_is_flagged_and_its_pool_written(conn, configurations,
                                                                        tmp_path):
    collection = load_collection(fixtures=str(ROOT / "fixtures"))
    kept = [j for i, j in enumerate(collection.judgments) if i % 2 == 0 or j.grade > 0]
    thinned = replace(collection, judgments=kept)
    prepared = study.check(request(configurations, trials=3, unjudged_threshold=0.0),
                           collection=thinned)
    study.prepare(prepared, conn)
    results = study.run_trials(prepared)
    flagged = [t for t in results if t.flagged]
    assert flagged and all(t.judged < 1.0 for t in flagged)
    document = study.conclude(prepared, results, str(tmp_path))
    pool = list(csv.DictReader(io.StringIO((tmp_path / "pool.csv").read_text())))
    judged = {(j.query_id, j.doc_id) for j in kept}
    assert pool and all((r["query_id"], r["doc_id"]) not in judged for r in pool)
    # the tuning part first (the flagged trials' top 10 on the tuning queries), then the
    # held-out part of the chosen and the served configurations: what the verdict lacks
    tuning_part, held_part = study.verdict_pool(prepared, results,
                                                study.chosen_configuration(prepared, results)[1])
    assert tuning_part and held_part
    assert [(r["query_id"], r["doc_id"]) for r in pool] == \
        [(i.query_id, i.doc_id) for i in tuning_part + held_part]
    assert {i.query_id for i in tuning_part} <= set(prepared.split.tuning)
    assert {i.query_id for i in held_part} <= set(prepared.split.held_out)
    assert document["pool"] == "pool.csv" and document["flagged"] == len(flagged)
    # kept as the study's pool, for the rating page and `judgments label --pool`
    from searcheval.store import judgments as judgments_store

    saved, items = judgments_store.load_pool(conn, document["pool_id"])
    assert document["pool_id"] == f"tune:{prepared.study_id[:12]}"
    assert [(i["query_id"], i["doc_id"]) for i in items] == \
        [(r["query_id"], r["doc_id"]) for r in pool]


def test_the_objective_travels_to_another_process_without_its_connection(conn, configurations):
    import pickle

    prepared = study.check(request(configurations, trials=1, seed=11))
    study.prepare(prepared, conn)
    here = prepared.objective(0, {"hybrid.weights.bm25": 0.5, "hybrid.weights.dense": 1.5,
                                  "hybrid.method": "combmnz"})
    copy = pickle.loads(pickle.dumps(prepared.objective))  # what a Dask worker receives
    assert copy.runner.context.conn is None and copy.runner._runs  # cached lists came along
    there = copy(0, {"hybrid.weights.bm25": 0.5, "hybrid.weights.dense": 1.5,
                     "hybrid.method": "combmnz"})
    assert (there.value, there.sha256) == (here.value, here.sha256)
    assert copy.runner.context.conn is None  # re-fused: no connection was needed

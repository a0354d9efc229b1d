"""The real nightly flow on the fixtures, the embedded Postgres and the real model."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from prefect_records import task_runs_of

from searcheval import store
from searcheval.cli import main
from searcheval.store import database

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def run_count(url: str) -> int:
    with database.connect(url) as conn:
        return len(store.last_runs(conn, 1000))


def run_cli(fixtures: Path, baseline: Path | None, output: Path, *extra: str) -> int:
    args = ["run", "--fixtures", str(fixtures), "--output", str(output), *extra]
    args += ["--baseline", str(baseline)] if baseline else ["--no-baseline"]
    return main(args)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, database_module_url):
    """The module's first run: it fills the embedding cache of this fresh database."""
    import os

    os.environ["SEARCHEVAL_DATABASE_URL"] = database_module_url
    try:
        out = tmp_path_factory.mktemp("first")
        code = run_cli(ROOT / "fixtures", ROOT / "baseline.json", out)
    finally:
        os.environ.pop("SEARCHEVAL_DATABASE_URL")
    return code, json.loads((out / "metrics.json").read_text()), out


def test_a_passing_run_publishes_everything(first_run, flow_env, capsys):
    code, metrics, out = first_run
    assert code == 0
    assert metrics["gate"]["passed"] is True and metrics["gate"]["tripped"] == []
    assert set(metrics["configurations"]) == {"bm25", "dense", "fused"}
    for conf in metrics["configurations"].values():
        assert {"ndcg@10", "mrr", "recall@20"} <= set(conf["means"])
        assert set(conf["latency_ms"]) == {"p50", "p95", "p99"}
        assert set(conf["by_category"]) == {"exact-name", "paraphrase", "filtered", "no-result",
                                            "adversarial"}
    assert metrics["embeddings"]["model"] == "all-MiniLM-L6-v2"
    # 18 resource texts + 15 query texts reached the model: the database was new
    assert metrics["embeddings"]["embedded"] == 18 + 15
    # the time in the model is part of the embedding stage's time, never more (one process: the
    # batches take turns at its model)
    spent = metrics["cost"]["embedding"]
    assert 0 < spent["model_seconds"] <= spent["seconds"]
    # the files DESIGN.md fixes
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["bm25.trec", "dense.trec",
                                                                 "fused.trec"]
    rows = list(csv.DictReader((out / "per_query.csv").read_text().splitlines()))
    assert {r["configuration"] for r in rows} == {"bm25", "dense", "fused"}
    assert "## Gate" in (out / "report.md").read_text()
    # the history: one run row with its metrics and per-query rows
    with database.connect(flow_env) as conn:
        runs = store.last_runs(conn, 10)
        assert [r["run_id"] for r in runs] == [metrics["run_id"]]
        assert runs[0]["gate_passed"] is True
        fused_ndcg = [r for r in store.run_metrics(conn, metrics["run_id"])
                      if (r["configuration"], r["category"], r["metric"]) == ("fused", "all", "ndcg@10")]
        assert fused_ndcg[0]["value"] == pytest.approx(metrics["configurations"]["fused"]["means"]["ndcg@10"])
        per_query = store.run_query_results(conn, metrics["run_id"])
        assert len({(r["configuration"], r["query_id"]) for r in per_query}) == 3 * 15


def test_the_expected_ordering_of_configurations_holds(first_run):
    _, metrics, out = first_run
    means = {c: v["means"] for c, v in metrics["configurations"].items()}
    assert means["fused"]["ndcg@10"] >= means["dense"]["ndcg@10"] >= means["bm25"]["ndcg@10"]
    by_cat = {c: v["by_category"] for c, v in metrics["configurations"].items()}
    assert by_cat["bm25"]["paraphrase"]["ndcg@10"] < min(by_cat["dense"]["paraphrase"]["ndcg@10"],
                                                         by_cat["fused"]["paraphrase"]["ndcg@10"])
    assert by_cat["fused"]["no-result"]["abstention"] == 1.0  # fused returns nothing for all three


def test_artifacts_under_stable_keys(first_run):
    import anyio
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    async def read():
        async with get_client() as client:
            return await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["searcheval-metrics",
                                                                           "searcheval-report"])))

    artifacts = anyio.run(read)
    keys = {a.key for a in artifacts}
    assert keys == {"searcheval-metrics", "searcheval-report"}
    # the artifacts of this module's first run (other modules' runs share the session's server)
    flow_run_id = first_run[1]["flow_run_id"]
    table = next(a for a in artifacts
                 if a.key == "searcheval-metrics" and str(a.flow_run_id) == flow_run_id)
    assert "fused" in str(table.data)

    async def read_keyed():
        async with get_client() as client:
            return await client.read_artifacts(artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=["searcheval-metrics-fixtures-fused"])))

    _, metrics, _ = first_run
    fused = [a for a in anyio.run(read_keyed) if str(a.flow_run_id) == metrics["flow_run_id"]]
    assert len(fused) == 1, "a table artifact per dataset and configuration"
    rows = {r["metric"]: r for r in json.loads(fused[0].data)} if isinstance(fused[0].data, str) \
        else {r["metric"]: r for r in fused[0].data}
    assert rows["ndcg@10"]["baseline"] == json.loads((ROOT / "baseline.json").read_text())[
        "metrics"]["ndcg@10"]
    assert rows["ndcg@10"]["value"] == metrics["configurations"]["fused"]["means"]["ndcg@10"]


def test_second_run_on_an_unchanged_catalog_embeds_nothing(first_run, flow_env, tmp_path):
    from searcheval.rankers import embeddings

    loads = embeddings.load_count
    assert run_cli(ROOT / "fixtures", ROOT / "baseline.json", tmp_path) == 0
    doc = json.loads((tmp_path / "metrics.json").read_text())
    assert doc["embeddings"]["embedded"] == 0
    assert doc["embeddings"]["from_cache"] == 18 + 15
    assert embeddings.load_count == loads
    assert doc["cost"]["embedding"]["model_seconds"] == 0.0  # the model never ran
    # diffed against the previous run of the fixtures (the module's first): nothing changed
    first_id = first_run[1]["run_id"]
    assert doc["diff"]["a"]["run_id"] == first_id and doc["diff"]["b"]["run_id"] == doc["run_id"]
    assert doc["diff"]["headline"] == "0 worse, 0 better, 15 unchanged of 15"
    assert (tmp_path / doc["run_id"] / "diff.md").read_text().startswith(
        f"# diff: {first_id}:fused -> {doc['run_id']}:fused")
    assert "## Against the previous run" in (tmp_path / "report.md").read_text()


def test_every_run_keeps_its_ranked_lists_in_postgres(first_run, flow_env):
    from searcheval.store import snapshots

    _, metrics, out = first_run
    # depth 100 is the run's depth too: every line of the TREC files is a stored row
    expected = sum(len((out / "runs" / f"{conf}.trec").read_text().splitlines())
                   for conf in ("bm25", "dense", "fused"))
    with database.connect(flow_env) as conn:
        assert snapshots.count_ranked_results(conn, metrics["run_id"]) == expected
        row = snapshots.load_run(conn, metrics["run_id"])
        assert (row["dataset"], row["kind"], row["snapshot_depth"]) == ("fixtures", "manual", 100)
        fused = snapshots.load_ranked_results(conn, metrics["run_id"], "fused")
    trec = [line.split() for line in (out / "runs" / "fused.trec").read_text().splitlines()]
    assert [(d, float(s)) for q, _, d, _, s, _ in trec if q == "q02"] == \
        [(d, s) for d, s, _ in fused.get("q02", [])]


def test_a_tampered_baseline_trips_the_gate_exits_1_and_posts_the_webhook(first_run, flow_env,
                                                                            webhook, tmp_path,
                                                                            capsys):
    _, metrics, _ = first_run
    baseline = json.loads((ROOT / "baseline.json").read_text())
    actual = metrics["configurations"]["fused"]["means"]["mrr"]
    baseline["metrics"]["mrr"] = actual + 0.1  # pretend the baseline was 0.1 better
    tampered = tmp_path / "baseline.json"
    tampered.write_text(json.dumps(baseline))
    before = run_count(flow_env)
    code = run_cli(ROOT / "fixtures", tampered, tmp_path / "out")
    captured = capsys.readouterr()
    assert code == 1
    assert "gate: TRIPPED" in captured.out
    assert run_count(flow_env) == before + 1  # a tripped run is still published
    doc = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert doc["gate"]["passed"] is False
    trip = doc["gate"]["tripped"][0]
    assert trip["metric"] == "mrr"
    assert trip["delta"] == pytest.approx(-0.1)
    gate_alerts = [b for b in webhook.bodies if any(r["kind"] == "gate" for r in b["reasons"])]
    assert len(gate_alerts) == 1
    assert gate_alerts[0]["run_id"] == doc["run_id"]
    assert gate_alerts[0]["reasons"][0]["delta"] == pytest.approx(-0.1)
    assert "s3cret-token" not in captured.out + captured.err
    # the task graph shows where: the gate's task run ended Failed, the steps before it did not,
    # and publish still ran after it; the flow run's final message is the verdict
    flow_run, runs = task_runs_of(doc["flow_run_id"], ("gate", "score", "publish"))
    assert runs["gate"].state.type.value == "FAILED"
    assert runs["gate"].state.message.startswith("gate tripped for fused: mrr: ")
    assert runs["score"].state.type.value == runs["publish"].state.type.value == "COMPLETED"
    flow_state = flow_run.state
    assert flow_state.type.value == "FAILED"
    assert f"report: {tmp_path / 'out' / doc['run_id'] / 'report.md'}" in flow_state.message


def test_a_judgment_of_a_removed_resource_is_stale_left_out_and_alerted(first_run, flow_env,
                                                                        webhook, fixtures_copy,
                                                                        tmp_path):
    catalog = json.loads((fixtures_copy / "catalog.json").read_text())
    catalog = [r for r in catalog if r["id"] != "email-validation"]
    (fixtures_copy / "catalog.json").write_text(json.dumps(catalog))
    code = run_cli(fixtures_copy, None, tmp_path / "out")
    assert code == 0  # stale labels do not stop the run
    doc = json.loads((tmp_path / "out" / "metrics.json").read_text())
    stale = doc["validation"]["stale"]
    assert stale["by_reason"]["resource-removed"] == 15  # judged against each of the 15 queries
    assert {s["doc_id"] for s in stale["judgments"]} == {"email-validation"}
    # q01 "Email Validation" had only that relevant resource: now nothing relevant is judged,
    # so its nDCG follows the `one` policy and its abstention is scored
    rows = [r for r in csv.DictReader((tmp_path / "out" / "per_query.csv").read_text().splitlines())
            if r["configuration"] == "fused" and r["query_id"] == "q01"]
    assert {r["metric"] for r in rows} >= {"abstention"}
    stale_alerts = [b for b in webhook.bodies
                    if any(r["kind"] == "stale-judgments" for r in b["reasons"])]
    assert len(stale_alerts) == 1 and stale_alerts[0]["reasons"][0]["count"] == 15


def test_a_corrupted_judgments_file_exits_2_and_writes_no_run(first_run, flow_env, webhook,
                                                             fixtures_copy, tmp_path, capsys):
    path = fixtures_copy / "judgments.csv"
    lines = path.read_text().splitlines()
    lines[5] = lines[5].rsplit(",", 3)[0] + ",7,2026-11-25T00:00:00Z,annotator-a"  # grade 7
    path.write_text("\n".join(lines) + "\n")
    before = run_count(flow_env)
    code = run_cli(fixtures_copy, ROOT / "baseline.json", tmp_path / "out")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("searcheval: ") and "judgments.csv:6 field 'grade'" in err[-1]
    assert run_count(flow_env) == before
    assert not (tmp_path / "out").exists()
    # a refused manual (CLI) run answers whoever started it: nobody is paged
    assert webhook.bodies == []


def test_a_failing_webhook_is_retried_and_never_loses_the_results(first_run, flow_env, webhook,
                                                                  tmp_path):
    baseline = json.loads((ROOT / "baseline.json").read_text())
    baseline["metrics"]["ndcg@10"] = 1.5  # cannot be reached: trips
    tampered = tmp_path / "baseline.json"
    tampered.write_text(json.dumps(baseline))
    webhook.fail_next = 1  # the first POST gets a 503, the retry gets through
    before = run_count(flow_env)
    assert run_cli(ROOT / "fixtures", tampered, tmp_path / "out") == 1
    assert run_count(flow_env) == before + 1
    assert len(webhook.bodies) == 1 and webhook.fail_next == 0


def test_unchanged_code_passes_at_tolerance_0_against_its_own_baseline(first_run, flow_env,
                                                                       tmp_path, capsys):
    _, metrics, out = first_run
    own = tmp_path / "baseline.json"
    assert main(["baseline", "update", "--from-output", str(out), "--baseline", str(own),
                 "--reason", "test"]) == 0
    assert json.loads(own.read_text())["from_run"] == metrics["run_id"]
    assert run_cli(ROOT / "fixtures", own, tmp_path / "out", "--tolerance", "0") == 0
    doc = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert doc["gate"]["passed"] is True and doc["gate"]["tolerance"] == 0
    assert all(c["delta"] == 0 for c in doc["gate"]["compared"].values())


def test_a_run_with_other_conventions_than_the_baseline_is_refused_before_anything_is_written(
        first_run, flow_env, tmp_path, capsys):
    before = run_count(flow_env)
    code = run_cli(ROOT / "fixtures", ROOT / "baseline.json", tmp_path / "out", "--gain", "linear")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == ("searcheval: " + str(ROOT / "baseline.json") + " field 'conventions.gain': "
                       "the baseline was scored with gain 'exponential', this run with 'linear'")
    assert run_count(flow_env) == before
    assert not (tmp_path / "out").exists()


def test_a_dataset_without_a_baseline_is_published_as_not_gated(first_run, flow_env, tmp_path,
                                                                capsys, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    for name in ("catalog.json", "golden_queries.json", "judgments.csv"):
        (other / name).write_bytes((ROOT / "fixtures" / name).read_bytes())
    monkeypatch.chdir(ROOT)  # the default baseline.json is the fixtures'
    code = main(["run", "--dataset", str(other), "--configurations", "bm25,fused", "--output",
                 str(tmp_path / "out")])
    assert code == 0
    doc = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert doc["dataset"] == "other" and doc["gate"]["passed"] is None
    assert doc["gate"]["reason"].startswith("no baseline for dataset 'other'")
    assert "gate: NOT GATED (no baseline for dataset 'other'" in capsys.readouterr().out


def test_the_model_loads_after_the_validation(first_run, flow_env):
    """The model's load is submitted once the validate task returned, so the two never overlap
    (beside torch's imports and weights, Great Expectations' import took three times as long)."""
    _, metrics, _ = first_run
    assert metrics["embeddings"]["embedded"] == 18 + 15  # the model had to load
    _, runs = task_runs_of(metrics["flow_run_id"], ("validate", "load_model"))
    assert runs["validate"].end_time is not None and runs["load_model"].start_time is not None
    assert runs["validate"].end_time <= runs["load_model"].start_time


def test_embedding_batches_take_turns_one_at_a_time(first_run, flow_env, tmp_path):
    """--embed-batch 10 cuts the 33 texts into 4 batches; in the thread pool each starts once the
    one before it has finished (defaults.EMBED_TASKS_AT_ONCE), so no more than one holds a
    database connection while the model encodes."""
    from searcheval import defaults

    assert defaults.EMBED_TASKS_AT_ONCE == 1
    code = run_cli(ROOT / "fixtures", None, tmp_path / "out", "--embed-batch", "10")
    assert code == 0
    doc = json.loads((tmp_path / "out" / "metrics.json").read_text())
    _, runs = task_runs_of(doc["flow_run_id"], ("embed-1", "embed-2", "embed-3", "embed-4"),
                           whole_names=True)
    embeds = {name: run for name, run in runs.items() if name.startswith("embed-")}
    assert sorted(embeds) == ["embed-1", "embed-2", "embed-3", "embed-4"]  # 10 + 10 + 10 + 3
    for earlier, later in (("embed-1", "embed-2"), ("embed-2", "embed-3"), ("embed-3", "embed-4")):
        assert embeds[earlier].end_time <= embeds[later].start_time, (earlier, later)

"""The nightly flow with backends (http, python, trec) through `searcheval run`: the whole
pipeline, incomplete runs (exit 3, published, not gated), and the record of what ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from searcheval import load_collection, store
from searcheval.cli import main
from searcheval.metrics.engine import evaluate
from searcheval.store import database

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
COLLECTION = load_collection(fixtures=ROOT / "fixtures")
METRICS = ["ndcg@10", "mrr", "recall@20"]


@pytest.fixture
def service(example_service):
    example_service.set_knobs()
    yield example_service
    example_service.set_knobs()


def http_file(tmp_path: Path, url: str, **entry) -> Path:
    document = yaml.safe_load((ROOT / "examples" / "configurations" / "native.yaml").read_text())
    document["configurations"]["native"]["params"]["base_url"] = url
    document["configurations"]["native"].update(entry)
    path = tmp_path / "configurations.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def baseline_for(tmp_path: Path, configuration: str) -> Path:
    """The shipped baseline's values, for another served configuration."""
    document = json.loads((ROOT / "baseline.json").read_text())
    document["configuration"] = configuration
    path = tmp_path / f"baseline-{configuration}.json"
    path.write_text(json.dumps(document))
    return path


def run(tmp_path: Path, *args: str) -> tuple[int, dict | None, Path]:
    out = tmp_path / "out"
    code = main(["run", "--fixtures", str(ROOT / "fixtures"), "--output", str(out), *args])
    metrics = out / "metrics.json"
    return code, json.loads(metrics.read_text()) if metrics.exists() else None, out


def direct_means(service) -> dict:
    from tests.example_service import answers

    return evaluate(COLLECTION.qrels(), answers(service.url, COLLECTION.queries), METRICS,
                    query_ids=[q.id for q in COLLECTION.queries]).means


def test_an_http_configuration_runs_through_the_whole_flow(service, flow_env, tmp_path):
    # no capsys here: Prefect's console handler keeps the stream of the first flow run's test
    path = http_file(tmp_path, service.url)
    code, metrics, out = run(tmp_path, "--configurations-file", str(path), "--no-baseline")
    assert code == 0
    means = metrics["configurations"]["native"]["means"]
    assert {m: means[m] for m in METRICS} == pytest.approx(direct_means(service), abs=1e-12)
    assert metrics["incomplete"] == [] and metrics["failures"]["configurations"]["native"][
        "failed"] == 0
    assert (out / "runs" / "native.trec").is_file()


def test_a_500_on_one_query_makes_the_run_incomplete_exit_3_and_not_gated(service, flow_env,
                                                                          tmp_path, capsys):
    query = COLLECTION.queries[2]
    service.set_knobs(fail_queries={query.text: 500})
    path = http_file(tmp_path, service.url)
    code, metrics, out = run(tmp_path, "--configurations-file", str(path),
                             "--baseline", str(baseline_for(tmp_path, "native")))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3
    assert "native" in err[-1] and repr(query.id) in err[-1] and "HTTP 500" in err[-1]
    # published, with the error listed, and not gated
    assert metrics["incomplete"] == ["native"]
    assert metrics["gate"]["passed"] is None and metrics["gate"]["status"] == "NOT GATED"
    assert "run incomplete" in metrics["gate"]["reason"]
    failure = metrics["failures"]["configurations"]["native"]
    assert failure["failed"] == 1 and failure["errors"][query.id]["cause"].startswith("HTTP 500")
    report = (out / "report.md").read_text()
    assert "## Failed queries" in report and f"| native | {query.id} | HTTP 500" in report
    # the failed query is left out of the scores, never scored as empty
    with database.connect(flow_env) as conn:
        rows = store.run_query_results(conn, metrics["run_id"])
    assert query.id not in {r["query_id"] for r in rows}
    assert len({r["query_id"] for r in rows}) == len(COLLECTION.queries) - 1


def test_a_configuration_may_allow_a_number_of_failed_queries(service, flow_env, tmp_path):
    query = COLLECTION.queries[2]
    service.set_knobs(fail_queries={query.text: 500})
    path = http_file(tmp_path, service.url, max_failed_queries=1)
    code, metrics, _ = run(tmp_path, "--configurations-file", str(path), "--no-baseline")
    assert code == 0 and metrics["incomplete"] == []
    assert metrics["failures"]["configurations"]["native"]["failed"] == 1


RETRIEVER = '''
import httpx

def retrieve(query, k, base_url, fail_on=None):
    if query.id == fail_on:
        raise RuntimeError("index is being rebuilt")
    f = query.filters
    params = {"q": query.text, "k": k}
    params.update({n: v for n, v in (("network", f.network), ("asset", f.asset),
                                     ("max_price_usd", f.max_price_usd)) if v is not None})
    return [(h["id"], h["score"]) for h in httpx.get(base_url + "/search", params=params).json()["hits"]]
'''


def test_a_python_retriever_runs_through_the_flow_and_a_failing_call_is_incomplete(
        service, flow_env, tmp_path, capsys):
    (tmp_path / "team_search.py").write_text(RETRIEVER)
    query = COLLECTION.queries[4]
    path = tmp_path / "configurations.yaml"
    path.write_text(yaml.safe_dump({"configurations": {"mine": {
        "kind": "python", "served": True,
        "params": {"callable": "team_search:retrieve", "python_path": str(tmp_path),
                   "options": {"base_url": service.url, "fail_on": query.id}}}}}))
    code, metrics, _ = run(tmp_path, "--configurations-file", str(path), "--no-baseline")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and metrics["incomplete"] == ["mine"]
    assert repr(query.id) in err[-1] and "RuntimeError: index is being rebuilt" in err[-1]
    code, metrics, _ = run(tmp_path, "--configurations-file", str(path), "--no-baseline",
                           "--set", "mine.options.fail_on=none-such")
    assert code == 0
    means = metrics["configurations"]["mine"]["means"]
    assert {m: means[m] for m in METRICS} == pytest.approx(direct_means(service), abs=1e-12)


def test_a_trec_file_goes_through_validation_gate_history_report_and_alerts(
        service, flow_env, tmp_path, webhook, capsys):
    from searcheval.io.trec import write_trec_run
    from searcheval.types import RankedRun

    import httpx

    results = {}
    for q in COLLECTION.queries:
        f = {k: v for k, v in (("network", q.filters.network), ("asset", q.filters.asset),
                               ("max_price_usd", q.filters.max_price_usd)) if v is not None}
        hits = httpx.get(f"{service.url}/search", params={"q": q.text, "k": 100, **f}).json()
        results[q.id] = [(h["id"], h["score"]) for h in hits["hits"]]
    write_trec_run(RankedRun("engine", results), tmp_path / "engine.trec")
    path = tmp_path / "configurations.yaml"
    path.write_text(yaml.safe_dump({"configurations": {"engine": {
        "kind": "trec", "served": True, "params": {"path": "engine.trec"}}}}))
    code, metrics, out = run(tmp_path, "--configurations-file", str(path),
                             "--baseline", str(baseline_for(tmp_path, "engine")))
    baseline = json.loads((ROOT / "baseline.json").read_text())
    means = metrics["configurations"]["engine"]["means"]
    assert means["ndcg@10"] == pytest.approx(direct_means(service)["ndcg@10"], abs=1e-12)
    # tantivy's BM25 alone is far below what the baseline holds for the served configuration
    assert means["ndcg@10"] < baseline["metrics"]["ndcg@10"] - 0.02
    assert code == 1 and metrics["gate"]["passed"] is False
    assert any(t["metric"] == "ndcg@10" for t in metrics["gate"]["tripped"])
    assert metrics["configurations"]["engine"]["latency_ms"]["p50"] is None  # a batch run
    assert "## Gate" in (out / "report.md").read_text()
    assert webhook.bodies and "gate tripped" in json.dumps(webhook.bodies[-1])
    with database.connect(flow_env) as conn:
        row = [r for r in store.last_runs(conn, 20) if r["run_id"] == metrics["run_id"]][0]
    assert row["gate_passed"] is False
    assert metrics["validation"]["findings"] is not None


def test_every_run_records_what_ran(flow_env, tmp_path):
    from prefect.client.orchestration import get_client

    code, metrics, out = run(tmp_path, "--no-baseline", "--configurations", "bm25",
                             "--set", "bm25.b=0.5", "--set", "bm25.prices.per_1000_requests=2")
    assert code == 0
    ran = metrics["what_ran"]
    bm25 = ran["configurations"]["bm25"]
    assert bm25["params"]["b"] == 0.5
    assert bm25["overridden"] == {"b": 0.5, "prices.per_1000_requests": 2}
    # cost: 15 queries, one request each, at 2 per 1,000 requests; CPU seconds are measured
    cost = metrics["cost"]["configurations"]["bm25"]
    assert cost["requests"] == 15 and cost["cpu_s"] > 0
    assert cost["per_run"] == pytest.approx(15 / 1000 * 2)
    assert cost["per_query"] == pytest.approx(15 / 1000 * 2 / 15)
    # nothing read vectors: nothing was embedded, in no time
    assert metrics["cost"]["embedding"] == {"embedded": 0, "from_cache": 0, "seconds": 0.0,
                                           "model_seconds": 0.0}
    from searcheval.rankers.configs import load_configurations

    shipped = load_configurations(ROOT / "configurations.yaml")
    assert bm25["sha256"] == load_configurations(ROOT / "configurations.yaml",
                                                 {"bm25.b": 0.5})["bm25"].sha256
    assert bm25["sha256"] != shipped["bm25"].sha256
    assert ran["code"]["commit"] and isinstance(ran["code"]["dirty"], bool)
    assert ran["model"]["name"] == "all-MiniLM-L6-v2" and len(ran["model"]["weights_sha256"]) == 64
    assert {"catalog", "queries", "judgments"} <= set(ran["dataset"]["inputs"])
    report = (out / "report.md").read_text()
    assert "## What ran" in report and f"sha256 `{bm25['sha256'][:12]}`" in report
    assert "| bm25 | 15 |" in report and "## Cost" in report
    with database.connect(flow_env) as conn:
        rows = store.run_configurations(conn, metrics["run_id"])
        record = store.run_what_ran(conn, metrics["run_id"])
    assert [(r["name"], r["sha256"], r["resolved"]["params"]["b"]) for r in rows] \
        == [("bm25", bm25["sha256"], 0.5)]
    assert record["git_commit"] == ran["code"]["commit"] and record["incomplete"] is False
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(metrics["flow_run_id"])
    assert f"config:bm25@{bm25['sha256'][:8]}" in flow_run.tags
    assert f"commit:{ran['code']['commit'][:10]}" in flow_run.tags


def test_the_scheduled_settings_refuse_a_dirty_tree(flow_env, tmp_path, monkeypatch):
    """Dirt is a change to what the run reads (here its flows/ code), listed in the refusal; a
    stray untracked nohup.out beside it is not dirt, and alone it does not refuse the run."""
    import subprocess

    from flows.nightly import nightly
    from searcheval.errors import InputError

    for args in (["init", "-q"], ["config", "user.email", "t@example.org"],
                 ["config", "user.name", "t"]):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True)
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "edit.py").write_text("x = 1\n")
    (tmp_path / ".gitignore").write_text("out*/\n")
    monkeypatch.setenv("SEARCHEVAL_PROJECT", str(tmp_path))
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "commit", "-qm", "c"], check=True)
    (tmp_path / "nohup.out").write_text("a worker's output\n")
    options = dict(fixtures=str(ROOT / "fixtures"), no_baseline=True,
                   configurations=["bm25"], configurations_file=str(ROOT / "configurations.yaml"),
                   allow_dirty=False, return_state=True)
    clean = nightly(output=str(tmp_path / "out-clean"), **options)
    assert clean.is_completed(), clean.message
    (tmp_path / "flows" / "edit.py").write_text("x = 2\n")
    out = tmp_path / "out"
    state = nightly(output=str(out), **options)
    exc = state.result(raise_on_failure=False)
    assert isinstance(exc, InputError)
    problems = getattr(exc, "problems", [exc])
    assert [p.field for p in problems] == ["allow_dirty"]
    assert "the run reads: flows/edit.py (diff sha256" in problems[0].message
    assert "nohup.out" not in problems[0].message
    assert not out.exists()


def test_a_candidate_runs_beside_the_served_configuration_and_is_gated(flow_env, tmp_path,
                                                                        capsys):
    code, metrics, out = run(tmp_path, "--candidate", "bm25", "--configurations", "bm25",
                             "--baseline", str(ROOT / "baseline.json"))
    assert set(metrics["configurations"]) == {"bm25", "fused"}  # the served one came along
    # bm25 alone is well below the baseline of the served configuration: the candidate trips
    assert code == 1 and metrics["gate"]["configuration"] == "bm25"
    side = metrics["candidate"]
    assert (side["candidate"], side["served"]) == ("bm25", "fused")
    bm25, fused = (metrics["configurations"][n]["means"]["ndcg@10"] for n in ("bm25", "fused"))
    assert side["means"]["ndcg@10"]["delta"] == pytest.approx(bm25 - fused, abs=1e-12)
    import csv

    rows = list(csv.DictReader((out / "per_query.csv").read_text().splitlines()))
    ndcg = {(r["configuration"], r["query_id"]): float(r["value"]) for r in rows
            if r["metric"] == "ndcg@10"}
    worse = {q for (c, q), v in ndcg.items() if c == "bm25" and v < ndcg[("fused", q)] - 1e-6}
    better = {q for (c, q), v in ndcg.items() if c == "bm25" and v > ndcg[("fused", q)] + 1e-6}
    assert side["counts"] == {"better": len(better), "worse": len(worse)}
    assert {r["query_id"] for r in side["worse"]} <= worse and worse
    assert "## Candidate" in (out / "report.md").read_text()
    # and query by query, at the document level: the candidate (B) against the served one (A)
    run_dir = out / metrics["run_id"]
    cdiff = json.loads((run_dir / "candidate_diff.json").read_text())
    assert (cdiff["a"]["configuration"], cdiff["b"]["configuration"]) == ("fused", "bm25")
    assert cdiff["a"]["run_id"] == cdiff["b"]["run_id"] == metrics["run_id"]
    deltas = [v - ndcg[("fused", q)] for (c, q), v in ndcg.items() if c == "bm25"]
    assert (cdiff["counts"]["worse"], cdiff["counts"]["better"]) \
        == (sum(d < -1e-12 for d in deltas), sum(d > 1e-12 for d in deltas))
    assert metrics["candidate_diff"]["file"] == "candidate_diff.md"
    assert "## Candidate against the served configuration" in (run_dir / "report.md").read_text()
    assert "candidate bm25 vs served fused" in capsys.readouterr().out


def test_several_candidates_are_a_family_against_the_served_one(flow_env, tmp_path, capsys):
    code, metrics, out = run(tmp_path, "--candidate", "bm25,dense", "--configurations", "bm25",
                             "--baseline", str(ROOT / "baseline.json"))
    assert set(metrics["configurations"]) == {"bm25", "dense", "fused"}
    # several candidates: the gate guards the served configuration, the candidates are compared
    assert code == 0 and metrics["gate"]["configuration"] == "fused"
    assert metrics["candidate"] is None
    family = metrics["candidates"]
    assert (family["served"], family["family"], family["correction"]) == ("fused", 2, "holm")
    means = {n: metrics["configurations"][n]["means"]["ndcg@10"] for n in ("bm25", "dense",
                                                                           "fused")}
    for name in ("bm25", "dense"):
        c = family["candidates"][name]
        assert c["delta"] == pytest.approx(means[name] - means["fused"], abs=1e-12)
        assert c["p_holm"] >= c["p_value"] and c["survives"] == (c["p_holm"] <= 0.05)
        assert c["ci95"][0] <= c["delta"] <= c["ci95"][1]
    assert family["survivors"] == [n for n in ("bm25", "dense")
                                   if family["candidates"][n]["survives"]]
    assert "## Candidates" in (out / "report.md").read_text()
    assert "survive the correction:" in capsys.readouterr().out


def test_a_dataset_of_queries_and_judgments_only_with_a_document_lookup(service, flow_env,
                                                                        tmp_path, capsys):
    import shutil

    dataset = tmp_path / "golden"
    dataset.mkdir()
    for name in ("golden_queries.json", "judgments.csv"):
        shutil.copy(ROOT / "fixtures" / name, dataset / name)
    judged = sorted({j.doc_id for j in COLLECTION.judgments})
    gone, edited = judged[0], judged[1]
    service.set_knobs(gone_documents=[gone], edited_documents=[edited])
    path = http_file(tmp_path, service.url,
                     documents={"url": f"{service.url}/documents/{{id}}",
                                "content_hash": "content_hash"})
    out = tmp_path / "out"
    code = main(["run", "--dataset", str(dataset), "--output", str(out), "--no-baseline",
                 "--configurations-file", str(path)])
    metrics = json.loads((out / "metrics.json").read_text())
    assert code == 0
    assert "judged@10" in metrics["configurations"]["native"]["means"]
    stale = {(s["doc_id"], s["reason"]) for s in metrics["validation"]["stale"]["judgments"]}
    # the gone document's judgments are stale; the edited one was edited before its first lookup,
    # so its judgments are of that version (tests/flows/test_engine_documents.py edits one later)
    assert {d for d, r in stale} == {gone} and {r for d, r in stale} == {"document-gone"}
    assert metrics["documents"]["native"]["gone"] == [gone]
    report = (out / "report.md").read_text()
    assert "## Top results of native" in report
    first = COLLECTION.queries[0]
    title = httpx_title(service, metrics["documents"]["native"]["top"][first.id][0]["id"])
    assert f"| {first.id} | {first.text} | {title}" in report
    # a configuration that searches the dataset's documents is refused: there are none
    code = main(["run", "--dataset", str(dataset), "--output", str(tmp_path / "o2"),
                 "--no-baseline", "--configurations", "bm25"])
    assert code == 2 and "has none" in capsys.readouterr().err
    # with the catalog, the edited document's changed hash makes its judgments stale too
    with_catalog = tmp_path / "with_catalog"
    shutil.copytree(dataset, with_catalog)
    shutil.copy(ROOT / "fixtures" / "catalog.json", with_catalog / "catalog.json")
    code = main(["run", "--dataset", str(with_catalog), "--output", str(tmp_path / "o3"),
                 "--no-baseline", "--configurations-file", str(path)])
    metrics = json.loads((tmp_path / "o3" / "metrics.json").read_text())
    reasons = {(s["doc_id"], s["reason"]) for s in metrics["validation"]["stale"]["judgments"]}
    assert (edited, "document-changed") in reasons


def httpx_title(service, doc_id: str) -> str:
    import httpx

    return httpx.get(f"{service.url}/documents/{doc_id}").json()["title"]

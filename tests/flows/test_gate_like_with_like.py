"""A gate that compares like with like, through `searcheval run` and `searcheval baseline update`
in a fresh project folder (not the fixtures): the first baseline of a `trec` configuration, a
grade added afterwards, and the baseline re-scored by hand under the new grade; the same queries
on both sides when a query fails within the allowance (the real example service over HTTP)."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import pytest
import yaml

from searcheval import load_collection
from searcheval.cli import main

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> tuple[int, str, str]:
    """`searcheval ARGS`: (exit code, stdout, stderr). Both go to buffers of the call's own
    (never closed): Prefect's console handler keeps the stream of the first flow run."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def project(tmp_path) -> Path:
    """A team's project: a tiny BEIR dataset (2 queries, 4 documents), its engine's run file as
    a served `trec` configuration, and nothing of the fixtures."""
    ds = tmp_path / "tiny"
    (ds / "qrels").mkdir(parents=True)
    (ds / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": d, "title": f"title {d}", "text": f"text of {d}"}) + "\n"
        for d in ("d1", "d2", "d3", "d4")))
    (ds / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "first query"}) + "\n"
        + json.dumps({"_id": "q2", "text": "second query"}) + "\n")
    # G1: one relevant document per query
    (ds / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td4\t1\n")
    # the team's grades count beside the benchmark's own (the default for BEIR is `dataset`)
    (ds / "searcheval.yaml").write_text("name: tiny\ngrade_scale: [0, 3]\njudgment_sources: all\n")
    (tmp_path / "engine.trec").write_text(
        "q1 Q0 d1 1 3.0 engine\nq1 Q0 d2 2 2.0 engine\nq1 Q0 d3 3 1.0 engine\n"
        "q2 Q0 d4 1 2.0 engine\nq2 Q0 d1 2 1.0 engine\n")
    (tmp_path / "configurations.yaml").write_text(yaml.safe_dump({
        "configurations": {"engine": {"kind": "trec", "served": True,
                                      "params": {"path": "engine.trec"}}},
        "run": ["engine"]}))
    return tmp_path


def run(project: Path, out: str, *args: str) -> tuple[int, str, str, dict]:
    code, stdout, stderr = cli("run", "--dataset", str(project / "tiny"),
                               "--configurations-file", str(project / "configurations.yaml"),
                               "--min-per-category", "1", "--output", str(project / out), *args)
    metrics = project / out / "latest" / "metrics.json"
    return code, stdout, stderr, json.loads(metrics.read_text()) if metrics.exists() else {}


def test_the_baseline_is_rescored_under_a_grade_added_since(project, flow_env):
    code, _, err, first = run(project, "out1", "--no-baseline")
    assert code == 0, err
    # nDCG@10 under G1 (gain 2^g - 1): q1 has d2 (grade 1) at rank 2: (1 / log2(3)) / (1 / log2(2));
    # q2 has d4 at rank 1: 1.0
    recorded = (1 / math.log2(3) + 1.0) / 2
    assert first["configurations"]["engine"]["means"]["ndcg@10"] == pytest.approx(recorded,
                                                                                   abs=1e-12)
    assert first["judging"]["judgments"]["set"]["counted"] == "all"

    # the first baseline of this dataset, of a served `trec` configuration (no file yet)
    baseline = project / "baseline.json"
    code, stdout, err = cli("baseline", "update", "--from-output", str(project / "out1"),
                            "--baseline", str(baseline), "--dry-run")
    assert code == 0 and not baseline.exists(), err
    assert "~ configuration: None -> engine" in stdout and "+ engine.path:" in stdout
    code, stdout, err = cli("baseline", "update", "--from-output", str(project / "out1"),
                            "--baseline", str(baseline))
    assert code == 0, err
    pinned = json.loads(baseline.read_text())
    assert pinned["configuration"] == "engine"
    assert pinned["configuration_hash"] == first["what_ran"]["configurations"]["engine"]["sha256"]
    assert pinned["configuration_params"]["path"].endswith("engine.trec")
    assert pinned["judgments"]["pairs"] == 2 and pinned["judgments"]["by_source"] == {"import": 2}
    assert pinned["conventions"]["depth"] == 100

    # ann grades q1's first result d1 as 2, after the baseline
    grades = project / "ann.csv"
    grades.write_text("query_id,resource_id,grade\nq1,d1,2\n")
    code, _, err = cli("judgments", "import", str(grades), "--dataset", str(project / "tiny"),
                       "--judge", "ann")
    assert code == 0, err

    code, stdout, err, second = run(project, "out2", "--baseline", str(baseline))
    assert code == 0, err
    # today's q1: d1 (gain 2^2 - 1 = 3) at rank 1, d2 (gain 1) at rank 2, which is also the
    # ideal order: nDCG 1.0; q2 unchanged 1.0. The same ranking re-scored: 1.0 as well.
    rescored = ((3 / math.log2(2) + 1 / math.log2(3)) / (3 / math.log2(2) + 1 / math.log2(3))
                + 1.0) / 2
    compared = second["gate"]["compared"]["ndcg@10"]
    assert compared["baseline"] == pytest.approx(rescored, abs=1e-12)
    assert compared["recorded_baseline"] == pytest.approx(recorded, abs=1e-12)
    assert compared["value"] == pytest.approx(1.0, abs=1e-12) and compared["delta"] == 0
    # MRR: q1's first relevant moved from rank 2 (1/2) to rank 1 under the new grade
    assert second["gate"]["compared"]["mrr"]["recorded_baseline"] == pytest.approx((1 / 2 + 1) / 2)
    assert second["gate"]["compared"]["mrr"]["baseline"] == pytest.approx(1.0)
    like = second["gate"]["like_with_like"]["baseline"]
    assert like["status"] == "re-scored"
    assert like["judgments"]["added"] == 1 and like["judgments"]["by_judge"] == {"ann": 1}
    # said on the console, beside the verdict, and in the report
    assert "judgments changed since the baseline: 1 grade added (by ann)" in stdout
    assert f"baseline under today's judgments: ndcg@10 1.000, as recorded: {recorded:.3f}" in stdout
    report = (project / "out2" / "latest" / "report.md").read_text()
    assert "### Like with like" in report and "1 grade added (by ann)" in report

    # a baseline from the second run (in Postgres): the judgment set it pins changed
    code, stdout, err = cli("baseline", "update", "--from-run", second["run_id"], "--baseline",
                            str(baseline), "--dry-run")
    assert code == 0, err
    assert "~ judgments: 2 -> 3 graded pairs" in stdout and "configuration:" not in stdout
    assert f"(dry run: {baseline} unchanged)" in stdout

    # the dataset's own qrels only: ann's grade does not count, nothing changed since the baseline
    code, stdout, err, third = run(project, "out3", "--baseline", str(baseline),
                                   "--judgment-sources", "dataset")
    assert code == 0, err
    assert third["gate"]["like_with_like"]["baseline"]["status"] == "judgments unchanged"
    assert third["gate"]["compared"]["ndcg@10"]["baseline"] == pytest.approx(recorded, abs=1e-12)
    assert third["judging"]["judgments"]["set"]["counted"] == "dataset"

    # the baseline's lists pruned: the gate says so and compares with the values as recorded
    code, stdout, err = cli("history", "prune", "--older-than", "0m")
    assert code == 0, err
    code, stdout, err, fourth = run(project, "out4", "--baseline", str(baseline))
    assert code == 0, err
    like = fourth["gate"]["like_with_like"]["baseline"]
    assert like["status"] == "as recorded" and "were pruned" in like["note"]
    assert like["judgments"]["added"] == 1  # the judgments' change is still named
    assert fourth["gate"]["compared"]["ndcg@10"]["baseline"] == pytest.approx(recorded, abs=1e-12)
    assert f"the ranked lists of the baseline's run {first['run_id']} were pruned" in stdout


@pytest.fixture
def service(example_service):
    example_service.set_knobs()
    yield example_service
    example_service.set_knobs()


def test_failed_queries_within_the_allowance_compare_the_same_queries(service, flow_env,
                                                                     tmp_path):
    """The first baseline of an http configuration in a fresh folder, then a run where one query
    fails (allowed: max_failed_queries 1): the gate compares both sides over the others."""
    document = yaml.safe_load((ROOT / "examples" / "configurations" / "native.yaml").read_text())
    entry = document["configurations"]["native"]
    entry["params"]["base_url"] = service.url
    entry["max_failed_queries"] = 1
    configurations = tmp_path / "configurations.yaml"
    configurations.write_text(yaml.safe_dump(document))
    args = ["--fixtures", str(ROOT / "fixtures"), "--configurations-file", str(configurations)]

    code, _, err = cli("run", *args, "--no-baseline", "--output", str(tmp_path / "a"))
    assert code == 0, err
    baseline = tmp_path / "baselines" / "native.json"
    code, stdout, err = cli("baseline", "update", "--from-output", str(tmp_path / "a"),
                            "--baseline", str(baseline))
    assert code == 0, err
    assert "~ configuration: None -> native" in stdout
    pinned = json.loads(baseline.read_text())
    assert pinned["configuration"] == "native" and pinned["configuration_params"]["url"] == "/search"

    queries = load_collection(fixtures=ROOT / "fixtures").queries
    failing = queries[3]
    service.set_knobs(fail_queries={failing.text: 500})
    code, stdout, err = cli("run", *args, "--baseline", str(baseline), "--output",
                            str(tmp_path / "b"))
    assert code == 0, err
    metrics = json.loads((tmp_path / "b" / "latest" / "metrics.json").read_text())
    n = len(queries)
    native = metrics["configurations"]["native"]
    assert native["queries"] == {"scored": n - 1, "failed": 1, "of": n}
    assert native["means_over"] == f"1 query failed: means over {n - 1} of {n}"
    # the baseline's mean over the same n - 1 queries: its per-query values without the failed one
    values = {q: v["ndcg@10"] for q, v in pinned["per_query"].items()}
    same = (sum(values.values()) - values[failing.id]) / (n - 1)
    compared = metrics["gate"]["compared"]["ndcg@10"]
    assert compared["queries"] == n - 1
    assert compared["baseline"] == pytest.approx(same, abs=1e-12)
    assert compared["value"] == pytest.approx(same, abs=1e-12)  # the service ranks as before
    assert compared["headline"] == pytest.approx(native["means"]["ndcg@10"], abs=1e-12)
    assert metrics["gate"]["passed"] is True
    # said wherever the means are shown
    assert f"native: 1 query failed: means over {n - 1} of {n}" in stdout
    assert f"1 query failed: the gate compares means over the {n - 1} queries" in stdout
    report = (tmp_path / "b" / "latest" / "report.md").read_text()
    assert f"1 query failed: means over {n - 1} of {n}" in report
    code, stdout, _ = cli("history", "--configuration", "native", "--last", "2", "--output",
                          str(tmp_path / "history"))
    assert code == 0 and f"1 query failed: means over {n - 1} of {n}" in stdout

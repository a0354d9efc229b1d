"""A run over golden queries sampled from production traces keeps how they were drawn (window,
method, seed, counts) in its record: metrics.json's what_ran.golden_queries, the report, and the
history's summary in Postgres (issue 25)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from searcheval.cli import main
from searcheval.store import database, snapshots

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_the_sample_of_the_golden_queries_is_in_the_runs_record(flow_env, tmp_path):
    # 40 traces over four queries on 1 March, and 10 on 5 March outside the asked window
    traces = tmp_path / "traces.jsonl"
    catalog = json.loads((ROOT / "fixtures" / "catalog.json").read_text())
    docs = [r["id"] for r in catalog[:3]]
    rows = [{"trace_id": f"t{i}", "ts": f"2026-03-0{1 if i < 40 else 5}T0{i % 10}:00:00Z",
             "query": ["weather api", "send sms", "ocr api", "maps"][i % 4], "segment": "web",
             "retrieved_ids": docs} for i in range(50)]
    traces.write_text("".join(json.dumps(r) + "\n" for r in rows))
    folder = tmp_path / "prod"
    folder.mkdir()
    shutil.copy(ROOT / "fixtures" / "catalog.json", folder / "catalog.json")
    assert main(["queries", "sample", "--traces", str(traces), "--method", "top", "--n", "3",
                 "--seed", "11", "--since", "2026-03-01", "--until", "2026-03-02",
                 "--output", str(folder / "golden_queries.json")]) == 0
    sampled = json.loads((folder / "golden_queries.json").read_text())
    judged = "".join(f"{q['id']},{docs[0]},2,2026-03-01T00:00:00Z,ann\n"
                     for q in sampled["queries"])
    (folder / "judgments.csv").write_text("query_id,resource_id,grade,judged_at,judge\n"
                                          + judged)

    out = tmp_path / "out"
    assert main(["run", "--fixtures", str(folder), "--no-baseline", "--configurations", "bm25",
                 "--min-per-category", "0", "--output", str(out), "--quiet"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    record = metrics["what_ran"]["golden_queries"]
    assert record == sampled["sample"]  # the file's own provenance, whole
    assert (record["method"], record["seed"], record["n"]) == ("top", 11, 3)
    assert record["window"]["since"].startswith("2026-03-01")
    assert record["counts"]["traces"] == 40  # the 10 of 5 March are outside the window
    assert record["counts"]["sampled"] == 3 and record["counts"]["candidates"] == 4
    report = (out / "report.md").read_text()
    [line] = [x for x in report.splitlines() if "golden queries: sampled from" in x]
    assert "traces.jsonl by top (seed 11, window 2026-03-01" in line, line
    assert line.endswith(": 3 of 4 candidate queries, 40 traces"), line
    with database.connect(flow_env) as conn:
        row = snapshots.load_run(conn, metrics["run_id"])
    assert row["summary"]["what_ran"]["golden_queries"] == record

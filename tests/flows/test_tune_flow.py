"""`searcheval tune` through its Prefect flow: every trial a task run, parallel trials on the
thread pool, the outputs, and a second run of the same command resuming the stored study."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prefect_records import task_runs_named

from searcheval.bench.tune import CONFIGURATIONS  # the tuned project of the benchmark
from searcheval.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_tune_runs_each_trial_as_a_task_and_resumes(flow_env, tmp_path):
    configurations = tmp_path / "configurations.yaml"
    configurations.write_text(CONFIGURATIONS)
    out = tmp_path / "out"
    args = ["tune", "--fixtures", str(ROOT / "fixtures"), "--configurations-file",
            str(configurations), "--param", "hybrid.weights.bm25=0..2", "--param",
            "hybrid.method=[combsum, rrf]", "--held-out", "0.5", "--parallel", "2",
            "--output", str(out)]
    assert main([*args, "--trials", "4"]) == 0
    first = json.loads((out / "tune.json").read_text())
    assert len(first["trials"]) == 4
    from searcheval.cli.tune import summary_lines

    printed = "\n".join(summary_lines(first, str(out)))  # what the command printed
    assert "held-out verdict:" in printed and "configurations.tuned.yaml" in printed

    runs = task_runs_named("trial-", tuple(f"trial-{n}" for n in range(4)))
    assert {r.name for r in runs} >= {f"trial-{n}" for n in range(4)}

    # the same command with more trials: the stored four are resumed, two more run
    assert main([*args, "--trials", "6"]) == 0
    second = json.loads((out / "tune.json").read_text())
    assert second["study_id"] == first["study_id"]
    assert [t["overrides"] for t in second["trials"][:4]] == \
        [t["overrides"] for t in first["trials"]]
    assert len(second["trials"]) == 6


@pytest.mark.slow
def test_trials_on_a_dask_cluster(flow_env, tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCHEVAL_DASK_WORKERS", "1")
    configurations = tmp_path / "configurations.yaml"
    configurations.write_text(CONFIGURATIONS)
    out = tmp_path / "out"
    code = main(["tune", "--fixtures", str(ROOT / "fixtures"), "--configurations-file",
                 str(configurations), "--param", "hybrid.weights.dense=0..2", "--held-out",
                 "0.5", "--trials", "3", "--parallel", "3", "--seed", "5", "--task-runner",
                 "dask", "--output", str(out)])
    document = json.loads((out / "tune.json").read_text())
    assert code == 0 and len(document["trials"]) == 3
    assert all(t["value"] is not None for t in document["trials"])


@pytest.mark.slow
def test_a_judge_labels_before_the_verdict_through_the_flow(flow_env, tmp_path, monkeypatch,
                                                            capsys):
    """`--judge` through the flow: its labelling is a task run before the verdict, capped by
    `--judge-limit`; a judge never audited by people is reported and not counted."""
    import csv
    import io
    import shutil

    from searcheval.bench.chat_server import serve_chat

    data = tmp_path / "tunejudge"  # the fixtures, every other irrelevant judgment left out
    shutil.copytree(ROOT / "fixtures", data)
    rows = list(csv.DictReader(io.StringIO((data / "judgments.csv").read_text())))
    kept = [r for i, r in enumerate(rows) if i % 2 == 0 or int(r["grade"]) > 0]
    out_csv = io.StringIO()
    writer = csv.DictWriter(out_csv, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(kept)
    (data / "judgments.csv").write_text(out_csv.getvalue())
    configurations = tmp_path / "configurations.yaml"
    configurations.write_text(CONFIGURATIONS)
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-test-123")
    with serve_chat(delay_ms=1, api_key_env="JUDGE_TEST_KEY") as url:
        judges = tmp_path / "judges.yaml"
        judges.write_text(
            "judges:\n  small:\n    kind: openai\n    model: test-small\n    params:\n"
            f"      base_url: {url}\n      api_key: {{env: JUDGE_TEST_KEY}}\n"
            "      prompt: 'Query: {query} Document: {title} {text}'\n"
            "    audit: {minimum: 8}\n")
        out = tmp_path / "out"
        code = main(["tune", "--fixtures", str(data), "--configurations-file",
                     str(configurations), "--param", "hybrid.weights.bm25=0..2",
                     "--held-out", "0.5", "--trials", "2", "--unjudged-threshold", "0",
                     "--judge", f"{judges}:small", "--judge-limit", "3",
                     "--judgment-sources", "all", "--output", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    document = json.loads((out / "tune.json").read_text())
    judging = document["judge"]
    assert judging["labelled"] == 3 and not judging["counts"]
    assert judging["reason"] == "audit too small: 0 of the 8 audited pair(s) it needs"
    assert "judge small: 3 pair(s) graded" in printed and "NOT COUNTED in the verdict" in printed
    assert document["pool_id"] == f"tune:{document['study_id'][:12]}"

    runs = task_runs_named("label_before_verdict")
    assert runs and all(r.state.is_completed() for r in runs)

"""`searcheval tune` through its Prefect flow: every trial a task run, parallel trials on the
thread pool, the outputs, and a second run of the same command resuming the stored study."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterName

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(task_run_filter=TaskRunFilter(
            name=TaskRunFilterName(like_="trial-")))
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

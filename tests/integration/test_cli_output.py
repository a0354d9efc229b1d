"""What `searcheval run` prints, as a user sees it: the real command in a subprocess (its own
ephemeral Prefect server, the real model, the session's embedded Postgres). The results table
once, on stdout, then the verdict; logs on stderr, without Prefect's telemetry; `--quiet` leaves
only the results; a closed stdout ends the command quietly with its exit code kept."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SEARCHEVAL = str(Path(sys.executable).parent / "searcheval")
HEADER = ["configuration", "nDCG@10", "MRR", "Recall@20", "p95", "ms"]


@pytest.fixture(scope="module")
def cli_env(new_database, tmp_path_factory) -> dict[str, str]:
    """The user's environment: nothing PREFECT_* set (so telemetry is at its default), a private
    PREFECT_HOME, a database of this module's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path_factory.mktemp("prefect-home")), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", SEARCHEVAL_DATABASE_URL=new_database("cli_output"))
    env.pop("SEARCHEVAL_ALERT_WEBHOOK", None)
    return env


def test_a_run_prints_the_table_once_on_stdout_and_logs_on_stderr(cli_env, tmp_path):
    done = subprocess.run([SEARCHEVAL, "run", "--output", str(tmp_path / "out")], cwd=ROOT,
                          env=cli_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout, done.stderr[-5000:])
    out = done.stdout.splitlines()
    # the table: a header and one row per configuration, then the verdict and the report
    assert out[0].split() == HEADER
    assert [line.split()[0] for line in out[1:4]] == ["bm25", "dense", "fused"]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert out[4] == (f"gate: PASSED (no gated metric of fused dropped by more than the "
                      f"tolerance 0.02, and no floor was missed); "
                      f"report: {tmp_path / 'out' / metrics['run_id'] / 'report.md'}")
    assert len(out) == 5
    fused = metrics["configurations"]["fused"]["means"]["ndcg@10"]
    assert out[3].split()[1] == f"{fused:.3f}"
    # the logs are on stderr, the table is not repeated there, and no telemetry is attempted
    assert "Beginning flow run" in done.stderr
    assert "configuration  nDCG@10" not in done.stderr
    assert out[4] in done.stderr  # the flow's last line names the verdict too
    assert "telemetry" not in done.stderr.lower()
    assert "ERROR" not in done.stderr and "Traceback" not in done.stderr
    # one progress report per stage, off a terminal as log lines (this database is new: cold)
    assert re.search(r"searcheval.progress - embedding: 33 texts in \d+ s \(", done.stderr)
    assert re.search(r"searcheval.progress - indexing: 18 documents in \d+ s", done.stderr)
    assert re.search(r"searcheval.progress - searching: 45 queries in \d+ s", done.stderr)
    assert re.search(r"searcheval.progress - storing: \d+ rows in \d+ s", done.stderr)
    assert done.stderr.count("searcheval.progress - embedding: ") == 1  # one, not one per batch


def test_quiet_and_a_closed_pipe_leave_only_the_verdict_and_keep_the_exit_code(cli_env,
                                                                                tmp_path):
    baseline = json.loads((ROOT / "baseline.json").read_text())
    baseline["metrics"]["ndcg@10"] = 1.5  # cannot be reached: the gate trips
    (tmp_path / "baseline.json").write_text(json.dumps(baseline))
    reader, writer = os.pipe()
    os.close(reader)  # like `| head` that already quit: every write to stdout fails with EPIPE
    try:
        done = subprocess.run([SEARCHEVAL, "run", "--quiet", "--baseline",
                               str(tmp_path / "baseline.json"), "--output", str(tmp_path / "out")],
                              cwd=ROOT, env=cli_env, stdout=writer, stderr=subprocess.PIPE,
                              text=True, timeout=300)
    finally:
        os.close(writer)
    assert done.returncode == 1, done.stderr[-3000:]
    # quiet: no log line, no telemetry, no BrokenPipe traceback; only the verdict on stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    [line] = done.stderr.splitlines()
    doc = json.loads((tmp_path / "out" / "metrics.json").read_text())
    value = doc["configurations"]["fused"]["means"]["ndcg@10"]
    assert line.startswith(f"searcheval: gate tripped for fused: ndcg@10: {value:.3f} vs "
                           f"baseline 1.500 ({value - 1.5:+.3f})")
    assert line.endswith(f"; report: {tmp_path / 'out' / doc['run_id'] / 'report.md'}")

"""An engine that is down is a failure, said plainly: the run ends fast (fail_fast_after), exit 3,
one line on stderr naming the configuration, the URL and the cause, a report and a history row
marked incomplete, and the alert sent. Against the real example service, stopped, and a socket
that accepts connections but never answers (a hung engine)."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import time
from pathlib import Path

import pytest
import yaml

from searcheval import store
from searcheval.cli import main
from searcheval.store import database

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def http_file(tmp_path: Path, url: str, **params) -> Path:
    document = yaml.safe_load((ROOT / "examples" / "configurations" / "native.yaml").read_text())
    document["configurations"]["native"]["params"]["base_url"] = url
    document["configurations"]["native"]["params"].update(params)
    path = tmp_path / "configurations.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def run(tmp_path: Path, configurations: Path,
        configuration: str = "native") -> tuple[int, float, dict | None, Path, str]:
    """`searcheval run` of `configuration`, whose every query fails: (exit code, seconds,
    metrics.json, output folder, last stderr line).
    stderr goes to a buffer of the test's own (never closed): Prefect's console handler keeps
    the stream of the first flow run, which capsys would close under it."""
    out = tmp_path / "out"
    err, printed = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(printed):
        code = main(["run", "--fixtures", str(ROOT / "fixtures"), "--output", str(out),
                     "--configurations-file", str(configurations), "--no-baseline"])
    seconds = time.monotonic() - started
    print(f"searcheval run took {seconds:.1f} s")  # shown with -s: the figure in the report
    assert f"{configuration}: all 15 queries failed: no mean" in printed.getvalue()  # the table
    metrics = out / "latest" / "metrics.json"
    last = err.getvalue().strip().splitlines()[-1]
    return code, seconds, json.loads(metrics.read_text()) if metrics.exists() else None, out, last


@pytest.fixture
def stopped_service_url(tmp_path):
    """The URL the real example service answered on, after it stopped: its port refuses."""
    from example_service import running_service

    with running_service("--fixtures", str(ROOT / "fixtures"), log_dir=tmp_path) as service:
        url = service.url
        assert service.stats()["requests"] >= 0  # it did answer while it ran
    return url


def test_the_service_stopped_ends_the_run_fast_with_exit_3_and_the_cause(
        stopped_service_url, flow_env, tmp_path, webhook):
    code, seconds, metrics, out, last = run(tmp_path, http_file(tmp_path, stopped_service_url))
    assert code == 3
    assert seconds < 30
    assert last.startswith("searcheval: run incomplete")
    assert "native" in last and f"{stopped_service_url}/search" in last
    assert "connection refused" in last and "is down" in last
    # published: report and history row marked incomplete, the queries not sent said so
    assert metrics["incomplete"] == ["native"]
    failures = metrics["failures"]["configurations"]["native"]
    assert failures["down"] is True and failures["failed"] == failures["queries"]
    assert failures["not_sent"] >= failures["queries"] - 4 - 3  # at most the first few were sent
    report = (out / "latest" / "report.md").read_text()
    assert "**incomplete**" in report and "connection refused" in report
    with database.connect(flow_env) as conn:
        row = [r for r in store.last_runs(conn, 5) if r["run_id"] == metrics["run_id"]]
        record = conn.execute("select incomplete from eval_runs where run_id = %s",
                              (metrics["run_id"],)).fetchone()
    assert row and record == (True,)
    # the alert went out, naming the cause
    assert any("connection refused" in json.dumps(body) for body in webhook.bodies)


def test_a_service_that_never_answers_times_out_and_fails_fast(flow_env, tmp_path):
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(64)  # connections are accepted by the kernel, never answered
    url = f"http://127.0.0.1:{hung.getsockname()[1]}"
    try:
        code, seconds, metrics, _, last = run(tmp_path, http_file(tmp_path, url, timeout_s=2,
                                                                  concurrency=2))
    finally:
        hung.close()
    assert code == 3
    # 2 in flight time out after 2 s, then 1 more: 3 failures in a row (fail_fast_after 3)
    assert seconds < 30
    assert "timeout after 2 s" in last and f"{url}/search" in last
    assert metrics["failures"]["configurations"]["native"]["not_sent"] >= 1


BROKEN_RETRIEVER = '''
from pathlib import Path

CALLS = Path(__file__).with_name("calls.log")


def retrieve(query, k):
    with CALLS.open("a") as log:  # every call, so the test can count them
        log.write(query.id + "\\n")
    raise RuntimeError("index 'products-v2' not found")
'''


def test_a_python_ranker_that_raises_on_every_query_fails_fast_with_exit_3(flow_env, tmp_path):
    """The `python` kind shares the http kind's breaker: a retriever that raises on every call is
    called `fail_fast_after` (3) times, one at a time (concurrency 1), the 12 other queries of
    the 15 are not asked, and the run ends incomplete with exit 3 and one line naming the
    configuration and the cause."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "broken_retriever.py").write_text(BROKEN_RETRIEVER)
    configurations = tmp_path / "configurations.yaml"
    configurations.write_text(yaml.safe_dump({"configurations": {"mine": {
        "kind": "python", "served": True,
        "params": {"callable": "broken_retriever:retrieve", "python_path": str(src)}}}}))
    code, seconds, metrics, _, last = run(tmp_path, configurations, "mine")
    assert code == 3, last
    assert seconds < 30
    assert len((src / "calls.log").read_text().splitlines()) == 3  # fail_fast_after's default
    assert last.startswith("searcheval: run incomplete"), last
    assert ("mine: the python ranker is down (RuntimeError: index 'products-v2' not found): all "
            "15 queries failed, 12 not sent") in last
    failures = metrics["failures"]["configurations"]["mine"]
    assert (failures["down"], failures["failed"], failures["not_sent"]) == (True, 15, 12)
    assert metrics["incomplete"] == ["mine"]
